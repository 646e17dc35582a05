"""What a check says when the learner's own code raises: a first sentence for each kind of error.

Python's and PyTorch's errors name what went wrong, in their words: "'method' object is not
iterable", "roll() received an invalid combination of arguments". A learner reads them better in
the course's words, with the name, the argument or the type that is off and what was expected:

    'ViTConfig' object has no attribute 'mlp_ratio'
        -> a ViTConfig has no attribute `mlp_ratio`: check the name ...

`crash_hint` picks, in order: the exercise's own hint for that error (a check's `raised`: a
reshape that does not fit its patches, say), then the kind of error (`KINDS`, below), then
the general one, which asks for the shapes. Its second tier is the kind's, or else the exercise's
own second tier, so that `hint(name)` says something about this exercise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vitcourse.checks.harness import Hint
from vitcourse.language import N_, _


@dataclass(frozen=True)
class Kind:
    """One kind of error: which exception types, the pattern of their message (named groups are
    the fields of the two tiers), and the two tiers, written in English (`N_`)."""

    types: tuple[str, ...]
    pattern: str
    first: str
    more: str = ""


# The modules a learner passes where their output belongs (`self.mlp(self.norm2)`).
_MODULES = {
    "LayerNorm",
    "Linear",
    "MLP",
    "Conv2d",
    "MultiHeadSelfAttention",
    "TransformerBlock",
    "PatchEmbedding",
    "Sequential",
    "Dropout",
    "GELU",
}

KINDS = (
    Kind(
        ("RuntimeError",),
        r"does not require grad and does not have a grad_fn",
        N_(
            "backward() found no gradient to follow: the loss was computed under "
            "torch.no_grad(), or from numbers taken out of the graph (detach, item, numpy)."
        ),
        N_("torch.no_grad() belongs to evaluation, never around a training step's forward."),
    ),
    Kind(
        ("RuntimeError",),
        r"a leaf Variable that requires grad is being used in an in-place operation",
        N_(
            "an in-place operation (`+=`, `/=`, a method ending in `_`) on an input that "
            "requires a gradient: make a new tensor instead, with a plain `+` or `/`."
        ),
        N_("an input changed in place is changed for the caller too, and autograd refuses it."),
    ),
    Kind(
        ("TypeError", "AttributeError"),
        r"'(?P<type>method|builtin_function_or_method|function)' object (is not (iterable|"
        r"subscriptable)|has no attribute '(?P<name>\w+)')",
        N_(
            "a method (or function) was used without calling it: it needs its parentheses, "
            "`model.parameters()` and not `model.parameters`."
        ),
        N_(
            "without the parentheses Python hands over the method itself; with them, what it "
            "returns (the parameters, a shape...)."
        ),
    ),
    Kind(
        ("AttributeError",),
        r"'NoneType' object has no attribute '(?P<name>\w+)'",
        N_(
            "a value is None where an object with `{name}` was expected: does a function of yours "
            "end without `return`?"
        ),
        N_("a Python function without a return statement returns None."),
    ),
    Kind(
        ("AttributeError",),
        r"'(?P<type>[\w.]+)' object has no attribute '(?P<name>\w+)'",
        N_(
            "a {type} has no attribute `{name}`: check the name's spelling, and that the object is "
            "the one you meant."
        ),
        N_(
            "print(obj) or dir(obj) lists what an object has; a config (ViTConfig) prints all its "
            "fields."
        ),
    ),
    Kind(
        ("TypeError",),
        r"(?P<func>[\w.]+)\(\): argument '(?P<arg>\w+)' (\(position \d+\) )?must be "
        r"(?P<want>[\w ,]+?), not (?P<type>\w+)",
        N_("{func} wants {want} for its argument `{arg}`, and was given a {type}."),
        N_("print type(...) of what you pass there, and of what produced it."),
    ),
    Kind(
        ("TypeError",),
        r"(?P<func>[\w.]+)\(\) got an unexpected keyword argument '(?P<arg>\w+)'",
        N_("{func} has no argument named `{arg}`: check its name in the function's documentation."),
        N_("help({func}) (or the function name followed by ? in a notebook) lists its arguments."),
    ),
    Kind(
        ("TypeError",),
        r"(?P<func>[\w.]+)\(\) received an invalid combination of arguments - got \((?P<got>[^)]*)\)",
        N_(
            "{func} was called with arguments it does not take ({got}): an argument's name or type "
            "is off. The error lists the combinations it accepts{names}."
        ),
        N_(
            "compare your call's arguments, one by one, with the accepted lists in the error: "
            "their names (dims or dim?) and their types (an int, a tuple, a tensor)."
        ),
    ),
    Kind(
        ("TypeError",),
        r"(?P<func>[\w.]+)\(\) missing \d+ required positional arguments?: (?P<args>.+)",
        N_("{func} was called without {args}: it needs them too."),
        N_("count the arguments the function takes and the ones your call gives."),
    ),
    Kind(
        ("TypeError",),
        r"(?P<func>[\w.]+)\(\) takes (?P<takes>\d+) positional arguments? but (?P<given>\d+) "
        r"(were|was) given",
        N_("{func} takes {takes} positional arguments and was given {given}."),
        N_("a method counts self as its first argument."),
    ),
    Kind(
        ("TypeError",),
        r"unsupported operand type\(s\) for (?P<op>\S+): '(?P<a>\w+)' and '(?P<b>\w+)'",
        N_(
            "`{op}` between a {a} and a {b}: one of the two is not what you expect (None from a "
            "function without return? a module instead of its output?)."
        ),
        N_("print type(...) of each side of the operation."),
    ),
    Kind(
        ("TypeError",),
        r"'(?P<type>[\w.]+)' object is not callable",
        N_(
            "a {type} was called like a function, with ( ): `x.shape(0)` where `x.shape[0]` is "
            "meant, or a name that now holds a value instead of a function?"
        ),
        N_("square brackets index; parentheses call."),
    ),
    Kind(
        ("ValueError",),
        r"(too many|not enough) values to unpack \(expected (?P<expected>\d+)",
        N_(
            "a line unpacks into {expected} names something with another number of items: print "
            "its length (a tensor unpacks along its first axis)."
        ),
        N_("print len(...) or .shape of what you unpack, and count the names on the left."),
    ),
    Kind(
        ("ValueError", "RuntimeError"),
        r"Expected input batch_size \((?P<rows>\d+)\) to match target batch_size \((?P<targets>\d+)\)",
        N_(
            "the cross-entropy got {rows} rows of logits and {targets} target classes: it wants one "
            "class index per row, a (B,) tensor (an argmax without `dim` gives a single index)."
        ),
        N_(
            "argmax without `dim` gives one index for the whole flattened tensor; argmax over "
            "the classes' axis (dim=-1) gives one per row."
        ),
    ),
    Kind(
        ("NameError",),
        r"name '(?P<name>\w+)' is not defined",
        N_(
            "`{name}` is not defined where your code runs: a typo, a cell above not run, or a name "
            "to import."
        ),
        N_("run the notebook's cells from the top (Run > Run All Above Selected Cell)."),
    ),
    Kind(
        ("IndexError",),
        r"Dimension out of range \(expected to be in range of \[-?\d+, (?P<last>\d+)\], but got "
        r"(?P<got>-?\d+)\)",
        N_("axis {got} does not exist in a tensor whose last axis is {last}: count its axes."),
        N_("print .shape of the tensor: its axes are numbered 0, 1, ... and -1 is the last."),
    ),
)


def _names(message: str) -> str:
    """The argument names of the combinations a PyTorch function accepts, from its error."""
    names = []
    for line in re.findall(r"\* \(([^)]*)\)", message):
        for part in line.split(","):
            words = part.split("=")[0].split()
            if words and words[-1] not in names and words[-1] != "*":
                names.append(words[-1])
    return ": " + ", ".join(names[:8]) if names else ""


def by_kind(error: BaseException) -> Hint | None:
    """The hint for this kind of error (`KINDS`), its fields filled in; None for another kind."""
    message = str(error)
    for kind in KINDS:
        if type(error).__name__ not in kind.types:
            continue
        found = re.search(kind.pattern, message)
        if not found:
            continue
        fields = {k: v.strip() for k, v in found.groupdict().items() if v is not None}
        if "got" in fields and "names" in kind.first:
            fields["names"] = _names(message)
        if fields.get("type") in _MODULES:  # a module where its output belongs
            more = N_(
                "a module is a function to call on a tensor: pass its output, `self.norm2(x)`, "
                "not the module itself, `self.norm2`."
            )
        elif fields.get("type") == "tuple":  # a function's pair used as one value
            more = N_(
                "a function that returns several values (attention returns the output and the "
                "weights) gives a tuple: unpack it into one name per value before using them."
            )
        else:
            more = kind.more
        return Hint(_(kind.first).format(**fields), more=_(more).format(**fields))
    return None


def crash_hint(error: BaseException, raised: list, general: Hint, more: str = "") -> Hint:
    """The hint for an error the learner's code raised inside a check: the exercise's own for it
    (`raised`: (a text the error's "Type: message" contains, its hint)), else its kind's, else
    `general`, whose second tier becomes the exercise's own (`more`)."""
    said = f"{type(error).__name__}: {error}"
    own = next((h for text, h in raised if text in said), None)
    if own is not None:
        return own
    return by_kind(error) or Hint(str(general), more=more or getattr(general, "more", ""))
