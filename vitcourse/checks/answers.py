"""A learner's answer as plain data: numbers and tensors that cannot carry code.

A check has two sides. `run` calls the learner's code on the check's inputs; `judge` compares what
came back with the reference and picks the hint. Between them the answer goes through `pack` and
`unpack`: tensors become safetensors bytes (a JSON header and raw numbers), the rest JSON
(numbers, strings, booleans, None, tuples and lists of them). Anything else, a tensor subclass
included, arrives as `Other`, which names its type and nothing more. `OPEN` marks a part of an
exercise that still raises NotImplementedError (one branch of a function with several, see
`harness.each_case`).

The class grader (`vitcourse.classroom.grade`) runs `run` in a sandbox and `judge` in its own
process, so whatever the learner's code returns, the judge sees only plain tensors (`torch.Tensor`)
and numbers. In a notebook both sides run in one process and in the same way, so a learner and a
graded student get the same verdict and the same hint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

MAX_ITEMS = 64  # items of a tuple or list kept; beyond that an answer is not what a check wants
MAX_DEPTH = 4


@dataclass(frozen=True)
class Other:
    """Something the learner returned that a check never wants (a dict, a NumPy array, a tensor
    subclass, a module...): only its type's name crosses over."""

    type_name: str


class _Open:
    """The marker for a case the learner's code has not written yet (it raised
    NotImplementedError); one object, compared with `is`."""

    def __repr__(self) -> str:
        return "OPEN"


OPEN = _Open()


def type_name(value) -> str:
    """The name of what the learner returned, for a check's message."""
    return value.type_name if isinstance(value, Other) else type(value).__name__


def pack(value) -> tuple[bytes, bytes]:
    """`value` as (JSON, safetensors) bytes; see the module's doc for what survives."""
    tensors: dict[str, torch.Tensor] = {}

    def plain(v, depth: int):
        if v is None or type(v) in (bool, int, float, str):
            return v
        if v is OPEN:
            return {"open": 1}
        if type(v) is torch.Tensor:
            key = f"t{len(tensors)}"
            tensors[key] = v.detach().cpu().clone().contiguous()
            return {"tensor": key}
        if type(v) in (tuple, list) and depth < MAX_DEPTH and len(v) <= MAX_ITEMS:
            return {type(v).__name__: [plain(item, depth + 1) for item in v]}
        return {"other": type(v).__name__[:80]}

    structure = plain(value, 0)
    return json.dumps(structure).encode(), save_tensors(tensors)


def unpack(structure: bytes, tensors: bytes):
    """The answer `pack` wrote: plain Python values, tensors (`torch.Tensor`) and `Other`."""
    loaded = load_tensors(tensors) if tensors else {}

    def value(v, depth: int = 0):
        if v is None or type(v) in (bool, int, float, str):
            return v
        if type(v) is dict and len(v) == 1 and depth <= MAX_DEPTH:
            ((kind, inner),) = v.items()
            if kind == "tensor" and inner in loaded:
                return loaded[inner]
            if kind in ("tuple", "list") and type(inner) is list and len(inner) <= MAX_ITEMS:
                items = [value(item, depth + 1) for item in inner]
                return tuple(items) if kind == "tuple" else items
            if kind == "other" and type(inner) is str:
                return Other(inner[:80])
            if kind == "open" and inner == 1:
                return OPEN
        raise ValueError("an answer that pack did not write")

    return value(json.loads(structure))
