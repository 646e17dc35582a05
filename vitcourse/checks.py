"""Exercise checks: compare a learner's code with the reference and explain what went wrong.

Used by the exercises in notebooks 01-09. This module holds the checks and their hints only; the
reference solutions live in their concept's module (`patching.patchify`, `embedding.embed_tokens`,
`block.layer_norm`, `vit.count_parameters`, ...). Each check runs the learner's function (or module, with
the reference's weights loaded into it) on seeded inputs and compares with `vitcourse`'s own
version. On success it returns the learner's object, so the notebook goes on with their code. On a
wrong answer it raises an AssertionError whose hint names the likely mistake: each check knows
the classic ones, recomputes them, and recognises a matching output. If the exercise still raises
`NotImplementedError`, it says so and returns the reference, so the rest of the notebook runs.

`EXERCISES` lists the course's exercises (name, notebook, check, reference). Each check records
its latest result per exercise (`progress_file()`), so `progress()` in any notebook lists what
you have passed (`exercise_results()` returns it); `grade(name, learner)` runs a check quietly
for the class grader (`vitcourse.grade`).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from vitcourse import (
    analysis,
    attention,
    block,
    distillation,
    embedding,
    patching,
    pretraining,
    training,
    vit,
)
from vitcourse.block import layer_norm
from vitcourse.embedding import embed_tokens
from vitcourse.vit import count_parameters

# (hint, a function computing the output that mistake would give); used by `_compare`.
Mistakes = list[tuple[str, Callable[[], torch.Tensor]]]


class _Open(Exception):
    """The learner's code raised NotImplementedError."""


def _call(fn: Callable, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as e:
        raise _Open from e


def _still_open(name: str, reference):
    print(
        f"… {name}: not written yet (it raises NotImplementedError). The reference solution "
        "stands in for now, so the rest of the notebook runs. Come back to it!"
    )
    return reference


def _passed(name: str, learner):
    print(f"✓ {name}: correct, it matches the reference. Well done!")
    return learner


def _fail(name: str, problem: str, hint: str = ""):
    raise AssertionError(
        f"{name} is not right yet: {problem}" + (f"\nHint: {hint}" if hint else "")
    )


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, rtol=1e-4, atol=1e-5)


def _compare(
    name: str,
    got,
    expected: torch.Tensor,
    mistakes: Mistakes = (),
    generic: str = "",
    shape_hints: dict | None = None,
) -> None:
    """Pass silently if `got` equals `expected`; otherwise fail with the best hint we have."""
    if not isinstance(got, torch.Tensor):
        _fail(name, f"it should return a tensor, but returned {type(got).__name__}")
    if got.shape != expected.shape:
        hint = (shape_hints or {}).get(tuple(got.shape), "")
        _fail(
            name,
            f"expected an output of shape {tuple(expected.shape)}, got {tuple(got.shape)}",
            hint,
        )
    if _close(got, expected):
        return
    if not torch.isfinite(got).all():
        _fail(name, "the output holds NaN or infinite values", generic)
    for hint, mistaken in mistakes:
        try:
            wrong = mistaken()
        except Exception:  # a mistake that cannot even be computed on these inputs
            continue
        if _close(got, wrong):
            _fail(name, "the shape is right but the values are not", hint)
    _fail(name, "the shape is right but the values are not", generic)


def _seeded(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _randomized(module: nn.Module, seed: int = 0) -> nn.Module:
    """Give every parameter (LayerNorm gains included) distinct random values, so that two
    different computations cannot agree by accident."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3 + (1.0 if p.ndim == 1 else 0.0))
    return module.eval()


def _load_reference_weights(name: str, learner: nn.Module, reference: nn.Module) -> None:
    try:
        learner.load_state_dict(reference.state_dict())
    except RuntimeError as e:
        _fail(
            name,
            "its parameters do not match the reference's names and shapes "
            f"({str(e).splitlines()[0]})",
            "keep __init__ exactly as given; write only forward.",
        )
    learner.eval()


def _run_with_reference_weights(name: str, build: Callable, reference: nn.Module, x: torch.Tensor):
    """Build the learner's module, load the reference's weights into it, and run it on `x`."""
    learner = _call(build)
    _load_reference_weights(name, learner, reference)
    with torch.no_grad():
        return _call(learner, x.clone())


# --- the course's exercises: a registry, the learner's progress, grading ------------------------


@dataclass(frozen=True)
class Exercise:
    """One exercise: the name the learner defines (and the check rebinds), its notebook, its check."""

    name: str  # e.g. "patchify" or "MultiHeadSelfAttention"
    notebook: str  # the notebook's file name without ".ipynb", e.g. "01_patches"
    check: Callable  # the check itself, without recording progress (what `grade` calls)
    reference: object  # the course's solution, which the check lends while the exercise is open


EXERCISES: dict[str, Exercise] = {}  # filled by @_exercise below, in the course's order


def progress_file() -> Path:
    """Where the checks record each exercise's latest result: `$VITCOURSE_PROGRESS`, or
    `~/.vitcourse/progress.json`."""
    return Path(
        os.environ.get("VITCOURSE_PROGRESS") or Path.home() / ".vitcourse" / "progress.json"
    )


def _read_progress() -> dict:
    try:
        return json.loads(progress_file().read_text())
    except (OSError, ValueError):  # no file yet, or one we cannot read: start afresh
        return {}


def _record(name: str, status: str) -> None:
    """Note an exercise's result for `progress()`; a notebook never fails for want of a file."""
    try:
        path = progress_file()
        results = _read_progress()
        results[name] = {"status": status, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(results, indent=1))
        os.replace(partial, path)  # atomic: a reader sees the old file or the new one
    except OSError:
        pass


def _exercise(name: str, notebook: str, reference):
    """Register a check as exercise `name` of `notebook`; the notebooks' check cells call the
    returned function, which also records the result for `progress()`. The course's own solution
    (`reference`, lent while the exercise is open) is never the learner's work: running the check
    cell again after it was lent does not count as a pass."""

    def register(check: Callable) -> Callable:
        @functools.wraps(check)
        def check_and_record(learner):
            if learner is reference:
                _record(name, "not attempted")
                print(
                    f"… {name}: this is the course's solution, which the check lent you, not "
                    "yours. Run your exercise's cell again, then this one."
                )
                return reference
            try:
                result = check(learner)
            except AssertionError:
                _record(name, "wrong")
                raise
            except Exception:
                _record(name, "error")
                raise
            _record(name, "passed" if result is learner else "not attempted")
            return result

        EXERCISES[name] = Exercise(name, notebook, check, reference)
        return check_and_record

    return register


def grade(name: str, learner) -> tuple[str, str]:
    """Run exercise `name`'s check on the learner's definition, quietly.

    Returns (status, hint): status is "passed", "wrong" (the hint is the check's message, naming
    the likely mistake), "not attempted" (it still raises NotImplementedError, or it is the
    course's own solution) or "error" (the learner's code raised something else; the hint says
    what). Used by `vitcourse.grade`.
    """
    if name not in EXERCISES:
        raise KeyError(f"no exercise named {name!r}; the exercises are {', '.join(EXERCISES)}")
    if learner is EXERCISES[name].reference:
        return "not attempted", f"{name} is the course's own solution (lent or imported), not yours"
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            result = EXERCISES[name].check(learner)
    except AssertionError as e:
        return "wrong", str(e)
    except Exception as e:  # noqa: BLE001 - the learner's code may raise anything
        return "error", "".join(traceback.format_exception_only(type(e), e)).strip()
    return ("passed", "") if result is learner else ("not attempted", "")


def assert_written(name: str, learner) -> None:
    """Fail if the learner's `name` is still the course's solution that the check lent: for
    nbgrader's hidden tests (`python -m vitcourse.student --nbgrader-source`), so that an open
    exercise scores no point there."""
    if learner is EXERCISES[name].reference:
        raise AssertionError(f"{name} is not written yet: the course's solution stands in for it")


def exercise_results() -> dict[str, str]:
    """{exercise: the latest result of its check here}; "not run yet" where it never ran."""
    recorded = _read_progress()
    return {name: recorded.get(name, {}).get("status", "not run yet") for name in EXERCISES}


def progress() -> None:
    """Print which exercises of the course you have passed, from the checks you ran in any
    notebook (each check records its latest result in `progress_file()`)."""
    results = exercise_results()
    marks = {"passed": "✓", "wrong": "✗", "error": "✗"}
    notebook = None
    for name, status in results.items():
        if EXERCISES[name].notebook != notebook:
            notebook = EXERCISES[name].notebook
            print(notebook)
        print(f"  {marks.get(status, '·')} {name}: {status}")
    passed = sum(status == "passed" for status in results.values())
    print(f"{passed} of {len(results)} exercises passed (recorded in {progress_file()})")


# --- notebook 01: patches ----------------------------------------------------------------------


@_exercise("patchify", "01_patches", patching.patchify)
def check_patchify(fn: Callable) -> Callable:
    """Check `fn(images, patch_size) -> (B, N, P*P*C)`."""
    name = "patchify"
    images = _seeded(2, 3, 8, 12)  # a 2 x 3 grid of 4 x 4 patches, not square on purpose
    B, C, H, W, P = 2, 3, 8, 12, 4
    try:
        got = _call(fn, images.clone(), P)
    except _Open:
        return _still_open(name, patching.patchify)
    grid = images.reshape(B, C, H // P, P, W // P, P)
    mistakes = [
        (
            "the patches come out column by column. Walk the grid like reading a page: along the "
            "first row left to right, then the next row (permute grid rows before grid columns).",
            lambda: grid.permute(0, 4, 2, 3, 5, 1).reshape(B, 6, P * P * C),
        ),
        (
            "each patch has the right pixels, but in the wrong order: channels should come last, "
            "(row, column, channel), as in the paper. Permute to (B, H/P, W/P, P, P, C).",
            lambda: grid.permute(0, 2, 4, 1, 3, 5).reshape(B, 6, P * P * C),
        ),
        (
            "inside each patch the pixels are read column by column; read them row by row.",
            lambda: grid.permute(0, 2, 4, 5, 3, 1).reshape(B, 6, P * P * C),
        ),
        (
            "a plain reshape does not cut out squares: it takes numbers in memory order (whole pixel "
            "rows). First split each side into (grid, pixel) with reshape, then permute, then reshape.",
            lambda: images.reshape(B, 6, P * P * C),
        ),
    ]
    _compare(
        name,
        got,
        patching.patchify(images, P),
        mistakes,
        shape_hints={(B, P * P * C, 6): "the last two axes are swapped: (B, N, P*P*C) wanted."},
    )
    return _passed(name, fn)


@_exercise("unpatchify", "01_patches", patching.unpatchify)
def check_unpatchify(fn: Callable) -> Callable:
    """Check `fn(patches, patch_size, image_size=(H, W)) -> (B, C, H, W)`, patchify's inverse."""
    name = "unpatchify"
    images = _seeded(2, 3, 8, 12)
    patches = patching.patchify(images, 4)
    try:
        got = _call(fn, patches.clone(), 4, (8, 12))
    except _Open:
        return _still_open(name, patching.unpatchify)
    undo = (
        "undo patchify's steps in reverse: reshape to (B, H/P, W/P, P, P, C), permute to "
        "(B, C, H/P, P, W/P, P), then reshape to (B, C, H, W)."
    )
    mistakes = [
        (
            "a plain reshape does not put the squares back; " + undo,
            lambda: patches.reshape(2, 3, 8, 12),
        )
    ]
    _compare(
        name, got, images, mistakes, generic="unpatchify(patchify(x)) should give x back: " + undo
    )
    return _passed(name, fn)


# --- notebook 02: embeddings -------------------------------------------------------------------


@_exercise("PatchEmbedding", "02_embeddings", embedding.PatchEmbedding)
def check_patch_embedding(cls: type) -> type:
    """Check a PatchEmbedding class: `cls(image_size, patch_size, in_channels, dim)`, (B, C, H, W) -> (B, N, D)."""
    name = "PatchEmbedding"
    sizes = {"image_size": 16, "patch_size": 4, "in_channels": 3, "dim": 8}
    torch.manual_seed(0)
    reference = _randomized(embedding.PatchEmbedding(**sizes))
    images = _seeded(2, 3, 16, 16)
    try:
        got = _run_with_reference_weights(name, lambda: cls(**sizes), reference, images)
    except _Open:
        return _still_open(name, embedding.PatchEmbedding)
    with torch.no_grad():
        conv = reference.proj(images)  # (B, D, H/P, W/P)
    mistakes = [
        (
            "a reshape from (B, D, N) to (B, N, D) mixes up numbers; swap the axes with "
            ".transpose(1, 2) instead.",
            lambda: conv.reshape(2, 16, 8),
        ),
        (
            "the patches come out column by column: flatten the (H/P, W/P) grid as it is, row by row.",
            lambda: conv.transpose(2, 3).flatten(2).transpose(1, 2),
        ),
    ]
    _compare(
        name,
        got,
        reference(images).detach(),
        mistakes,
        shape_hints={
            (2, 8, 16): "that is (B, D, N): move the width D last with .transpose(1, 2).",
            (2, 8, 4, 4): "that is the convolution's (B, D, H/P, W/P): flatten the grid into N "
            "tokens, then put D last: .flatten(2).transpose(1, 2).",
        },
    )
    return _passed(name, cls)


@_exercise("embed_tokens", "02_embeddings", embed_tokens)
def check_embed_tokens(fn: Callable) -> Callable:
    """Check `fn(patch_tokens (B, N, D), cls_token (1, 1, D), pos_embed (1, T, D)) -> (B, T, D)`."""
    name = "embed_tokens"
    x, cls_token, pos = _seeded(3, 4, 6, seed=1), _seeded(1, 1, 6, seed=2), _seeded(1, 5, 6, seed=3)
    try:
        got = _call(fn, x.clone(), cls_token.clone(), pos.clone())
    except _Open:
        return _still_open(name, embed_tokens)
    mistakes = [
        (
            "the cls token goes in front, at position 0: torch.cat([cls, x], dim=1).",
            lambda: torch.cat([x, cls_token.expand(3, -1, -1)], 1) + pos,
        ),
        (
            "the position embeddings are missing: add pos_embed to every token, the cls token too.",
            lambda: torch.cat([cls_token.expand(3, -1, -1), x], 1),
        ),
        (
            "the cls token should get position embedding 0 as well: add pos_embed after "
            "concatenating.",
            lambda: torch.cat([cls_token.expand(3, -1, -1), x + pos[:, 1:]], 1),
        ),
    ]
    _compare(
        name,
        got,
        embed_tokens(x, cls_token, pos),
        mistakes,
        shape_hints={
            (3, 4, 6): "the cls token is an extra token, concatenated in front (T = N + 1), "
            "not added to the patch tokens.",
        },
    )
    return _passed(name, fn)


# --- notebook 03: attention --------------------------------------------------------------------


@_exercise("attention", "03_attention", attention.scaled_dot_product_attention)
def check_attention(fn: Callable) -> Callable:
    """Check `fn(q, k, v) -> (out, weights)` on (B, h, T, d) inputs."""
    name = "attention"
    q, k, v = (
        _seeded(2, 3, 5, 8, seed=1) * 2,
        _seeded(2, 3, 5, 8, seed=2) * 2,
        _seeded(2, 3, 5, 8, seed=3),
    )
    try:
        result = _call(fn, q.clone(), k.clone(), v.clone())
    except _Open:
        return _still_open(name, attention.scaled_dot_product_attention)
    if not (isinstance(result, tuple) and len(result) == 2):
        _fail(
            name,
            f"it should return a pair (out, weights), got {type(result).__name__}",
            "end with: return weights @ v, weights",
        )
    out, weights = result
    expected_out, expected_weights = attention.scaled_dot_product_attention(q, k, v)
    scores = q @ k.transpose(-2, -1)
    weight_mistakes = [
        (
            "the scores are not scaled: divide q @ k^T by sqrt(d), d the width of q, before the softmax.",
            lambda: scores.softmax(-1),
        ),
        (
            "divide by sqrt(d), not by d: the scores' spread grows like sqrt(d).",
            lambda: (scores / 8).softmax(-1),
        ),
        (
            "softmax over the wrong axis: each query's weights over the keys must sum to 1, so take "
            "the softmax over the last axis (dim=-1).",
            lambda: (scores / math.sqrt(8)).softmax(-2),
        ),
        (
            "the scores are transposed: row i should be query i's scores, so compute q @ k^T, "
            "not k @ q^T.",
            lambda: (scores.transpose(-2, -1) / math.sqrt(8)).softmax(-1),
        ),
        (
            "the weights are transposed: row i should be query i's weights over the keys.",
            lambda: (scores / math.sqrt(8)).softmax(-1).transpose(-2, -1),
        ),
    ]
    _compare(
        name + " weights",
        weights,
        expected_weights,
        weight_mistakes,
        generic="weights = softmax(q @ k.transpose(-2, -1) / sqrt(d), dim=-1).",
    )
    _compare(
        name + " output",
        out,
        expected_out,
        [
            (
                "the output mixes the values with the transposed weights: out = weights @ v.",
                lambda: expected_weights.transpose(-2, -1) @ v,
            )
        ],
        generic="out = weights @ v.",
    )
    return _passed(name, fn)


@_exercise("MultiHeadSelfAttention", "03_attention", attention.MultiHeadSelfAttention)
def check_multi_head_attention(cls: type) -> type:
    """Check a multi-head self-attention class: `cls(dim, num_heads)` with `qkv` and `proj`, (B, T, D) -> (B, T, D)."""
    name = "MultiHeadSelfAttention"
    B, T, D, h = 2, 5, 12, 3
    d = D // h
    reference = _randomized(attention.MultiHeadSelfAttention(D, h))
    x = _seeded(B, T, D)
    try:
        got = _run_with_reference_weights(name, lambda: cls(D, h), reference, x)
    except _Open:
        return _still_open(name, attention.MultiHeadSelfAttention)
    with torch.no_grad():
        qkv = reference.qkv(x)  # (B, T, 3D)
        right = qkv.reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)  # (3, B, h, T, d)
        naive = (
            qkv.reshape(B, T, 3, D).permute(2, 0, 1, 3).reshape(3, B, h, T, d)
        )  # no head axis move

        def attend(q, k, v, scale=None):
            scale = math.sqrt(d) if scale is None else scale
            return ((q @ k.transpose(-2, -1)) / scale).softmax(-1) @ v  # (B, h, T, d)

        def merge(out):
            return out.transpose(1, 2).reshape(B, T, D)

        mistakes = [
            (
                "the heads are split without moving the head axis: reshape (B, T, D) to (B, T, h, d) "
                "first, then transpose to (B, h, T, d).",
                lambda: reference.proj(merge(attend(*naive))),
            ),
            (
                "the heads are split without moving the head axis (and merged the same way): reshape "
                "to (B, T, h, d), then transpose to (B, h, T, d); undo both when merging.",
                lambda: reference.proj(attend(*naive).reshape(B, T, D)),
            ),
            (
                "the heads are merged without moving the head axis back: out.transpose(1, 2) to "
                "(B, T, h, d) before reshaping to (B, T, D).",
                lambda: reference.proj(attend(*right).reshape(B, T, D)),
            ),
            (
                "the output projection is missing: finish with self.proj(out).",
                lambda: merge(attend(*right)),
            ),
            (
                "scale by sqrt(d) with d = D / h, the width of one head, not by sqrt(D).",
                lambda: reference.proj(merge(attend(*right, scale=math.sqrt(D)))),
            ),
            (
                "the scores are not scaled by sqrt(d).",
                lambda: reference.proj(merge(attend(*right, scale=1.0))),
            ),
        ]
        _compare(name, got, reference(x), mistakes)
    return _passed(name, cls)


# --- notebook 04: the transformer block --------------------------------------------------------


@_exercise("layer_norm", "04_transformer_block", layer_norm)
def check_layer_norm(fn: Callable) -> Callable:
    """Check `fn(x, weight, bias, eps=1e-6)`: LayerNorm over the last axis, as F.layer_norm."""
    name = "layer_norm"
    x = _seeded(2, 4, 6) * 3 + 1
    weight, bias = _seeded(6, seed=1), _seeded(6, seed=2)
    try:
        got = _call(fn, x.clone(), weight, bias, 1e-6)
    except _Open:
        return _still_open(name, layer_norm)
    mean = x.mean(-1, keepdim=True)
    mistakes = [
        (
            "use the population variance (divide by D, not D - 1): x.var(dim=-1, unbiased=False).",
            lambda: (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + 1e-6) * weight + bias,
        ),
        (
            "normalise each token on its own, over its D features (the last axis), not across tokens.",
            lambda: (
                (x - x.mean(1, keepdim=True))
                / torch.sqrt(x.var(1, keepdim=True, unbiased=False) + 1e-6)
                * weight
                + bias
            ),
        ),
        (
            "after normalising, scale by weight and shift by bias (LayerNorm's learned gain and offset).",
            lambda: F.layer_norm(x, (6,), eps=1e-6),
        ),
    ]
    _compare(
        name,
        got,
        F.layer_norm(x, (6,), weight, bias, 1e-6),
        mistakes,
        generic="(x - mean) / sqrt(var + eps) * weight + bias, mean and var over the last axis.",
    )
    return _passed(name, fn)


@_exercise("TransformerBlock", "04_transformer_block", block.TransformerBlock)
def check_transformer_block(cls: type) -> type:
    """Check a pre-norm block: `cls(dim, num_heads, mlp_dim)` with norm1, attn, norm2, mlp."""
    name = "TransformerBlock"
    reference = _randomized(block.TransformerBlock(12, 3, 24))
    x = _seeded(2, 5, 12)
    try:
        got = _run_with_reference_weights(name, lambda: cls(12, 3, 24), reference, x)
    except _Open:
        return _still_open(name, block.TransformerBlock)
    r = reference
    with torch.no_grad():

        def two_steps(first, second):
            h = first(x)
            return second(h)

        mistakes = [
            (
                "that is post-norm (normalise after adding). The ViT normalises *before* each branch: "
                "x = x + self.attn(self.norm1(x)).",
                lambda: two_steps(
                    lambda x: r.norm1(x + r.attn(x)), lambda h: r.norm2(h + r.mlp(h))
                ),
            ),
            (
                "the attention branch's residual is missing: x = x + self.attn(self.norm1(x)).",
                lambda: two_steps(lambda x: r.attn(r.norm1(x)), lambda h: h + r.mlp(r.norm2(h))),
            ),
            (
                "the MLP branch's residual is missing: x = x + self.mlp(self.norm2(x)).",
                lambda: two_steps(lambda x: x + r.attn(r.norm1(x)), lambda h: r.mlp(r.norm2(h))),
            ),
            (
                "add each branch to the un-normalised x: x = x + self.attn(self.norm1(x)), "
                "not x = norm1(x); x = x + attn(x).",
                lambda: two_steps(
                    lambda x: r.norm1(x) + r.attn(r.norm1(x)),
                    lambda h: r.norm2(h) + r.mlp(r.norm2(h)),
                ),
            ),
            (
                "norm1 belongs to the attention branch and norm2 to the MLP branch.",
                lambda: two_steps(
                    lambda x: x + r.attn(r.norm2(x)), lambda h: h + r.mlp(r.norm1(h))
                ),
            ),
            (
                "both branches read the block's input; the MLP should read the output of the "
                "attention step: first x = x + attn(...), then x = x + mlp(norm2(x)).",
                lambda: x + r.attn(r.norm1(x)) + r.mlp(r.norm2(x)),
            ),
        ]
        _compare(name, got, reference(x), mistakes)
    return _passed(name, cls)


# --- notebook 05: the vision transformer --------------------------------------------------------

_TINY = vit.ViTConfig(
    image_size=16,
    patch_size=4,
    in_channels=3,
    num_classes=5,
    dim=12,
    depth=2,
    num_heads=3,
    mlp_dim=24,
)


@_exercise("ViT", "05_vision_transformer", vit.VisionTransformer)
def check_vision_transformer(cls: type) -> type:
    """Check a ViT class: `cls(config)` with the reference's submodules, images -> logits."""
    name = "VisionTransformer"
    reference = _randomized(vit.VisionTransformer(_TINY))
    images = _seeded(2, 3, 16, 16)
    try:
        got = _run_with_reference_weights(name, lambda: cls(_TINY), reference, images)
    except _Open:
        return _still_open(name, vit.VisionTransformer)
    r = reference
    with torch.no_grad():
        patches = r.patch_embed(images)
        cls_tok = r.cls_token.expand(2, -1, -1)

        def run(tokens, pool=lambda t: t[:, 0], final_norm=True):
            for b in r.blocks:
                tokens = b(tokens)
            return r.head(pool(r.norm(tokens) if final_norm else tokens))

        mistakes = [
            (
                "the position embeddings are not added: tokens = tokens + self.pos_embed.",
                lambda: run(torch.cat([cls_tok, patches], 1)),
            ),
            (
                "the cls token goes in front (position 0), and the head reads it from there.",
                lambda: run(torch.cat([patches, cls_tok], 1) + r.pos_embed),
            ),
            (
                "the head should classify the cls token, x[:, 0], not the last token.",
                lambda: run(
                    torch.cat([cls_tok, patches], 1) + r.pos_embed, pool=lambda t: t[:, -1]
                ),
            ),
            (
                "this model pools with the cls token (config.pool == 'cls'): use x[:, 0], not a mean.",
                lambda: run(
                    torch.cat([cls_tok, patches], 1) + r.pos_embed, pool=lambda t: t.mean(1)
                ),
            ),
            (
                "the final LayerNorm is missing: apply self.norm after the last block.",
                lambda: run(torch.cat([cls_tok, patches], 1) + r.pos_embed, final_norm=False),
            ),
        ]
        _compare(
            name,
            got,
            reference(images),
            mistakes,
            shape_hints={
                (2, 17, 5): "the head gives logits per token: pool to one vector per image first "
                "(the cls token, x[:, 0]).",
            },
        )
    return _passed(name, cls)


@_exercise("count_parameters", "05_vision_transformer", count_parameters)
def check_parameter_count(fn: Callable) -> Callable:
    """Check `fn(config) -> int`: a ViT's number of trainable parameters, from its sizes alone."""
    name = "count_parameters"
    configs = [_TINY, vit.PRESETS["course-28/4"], vit.PRESETS["vit-base/16"]]
    try:
        got = [_call(fn, c) for c in configs]
    except _Open:
        return _still_open(name, count_parameters)
    for config, answer in zip(configs, got, strict=True):
        expected = count_parameters(config)
        if answer == expected:
            continue
        D, L = config.dim, config.depth
        parts = {
            "the cls token (D numbers)": D,
            "the position embeddings (T x D)": config.num_tokens * D,
            "the LayerNorms (2D each: a gain and a bias; two per block and the final one)": (
                2 * L + 1
            )
            * 2
            * D,
            "the biases (each Linear and the patch projection have one per output)": D
            + L * (3 * D + D + config.mlp_dim + D)
            + config.num_classes,
            "the classifier head (D x classes + classes)": D * config.num_classes
            + config.num_classes,
        }
        missing = [part for part, n in parts.items() if n == expected - answer]
        _fail(
            name,
            f"for {config} it gives {answer:,}, the model has {expected:,} "
            f"({expected - answer:+,} off)",
            f"did you leave out {missing[0]}?"
            if missing
            else "count each piece: patch projection (P*P*C*D + D), cls token, position embeddings, "
            "per block two LayerNorms, qkv (D*3D + 3D), proj (D*D + D), the MLP, then the final "
            "LayerNorm and the head.",
        )
    return _passed(name, fn)


# --- notebook 06: training ----------------------------------------------------------------------


def _training_setup():
    """A tiny seeded model, its optimizer and two batches whose gradients exceed the clip norm."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.GELU(), nn.Linear(16, 3))
    _randomized(model).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.05)
    batches = [(_seeded(8, 1, 3, 4, seed=s) * 3, torch.arange(8) % 3) for s in (1, 2)]
    return model, optimizer, batches


def _run_steps(step: Callable, label_smoothing: float = 0.1, grad_clip: float = 1.0):
    """Two steps with `step`; the losses and the final weights."""
    model, optimizer, batches = _training_setup()
    losses = [step(model, optimizer, x, y, label_smoothing, grad_clip) for x, y in batches]
    return losses, torch.cat([p.detach().flatten() for p in model.parameters()])


@_exercise("train_step", "06_training", training.train_step)
def check_train_step(fn: Callable) -> Callable:
    """Check `fn(model, optimizer, images, labels, label_smoothing, grad_clip) -> loss`: one
    optimisation step, as `vitcourse.training.train_step` takes it."""
    name = "train_step"
    try:
        losses, weights = _run_steps(lambda *args: _call(fn, *args))
    except _Open:
        return _still_open(name, training.train_step)
    expected_losses, expected = _run_steps(training.train_step)
    if not all(isinstance(loss, torch.Tensor) and loss.numel() == 1 for loss in losses):
        _fail(name, "it should return the batch's loss, a tensor with one number")

    def without(zero=True, clip=True, update=True, smoothing=True):
        def step(model, optimizer, x, y, label_smoothing, grad_clip):
            loss = F.cross_entropy(model(x), y, label_smoothing=label_smoothing if smoothing else 0)
            if zero:
                optimizer.zero_grad()
            loss.backward()
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            if update:
                optimizer.step()
            return loss

        return _run_steps(step)[1]

    mistakes = [
        (
            "the gradients are never reset, so the second step also adds the first batch's: call "
            "optimizer.zero_grad() before loss.backward().",
            lambda: without(zero=False),
        ),
        (
            "the weights never change: call optimizer.step() after loss.backward() (and the "
            "clipping), and zero the gradients *before* backward(), not between it and step().",
            lambda: without(update=False),
        ),
        (
            "the gradient norm is not clipped: call nn.utils.clip_grad_norm_(model.parameters(), "
            "grad_clip) after backward() and before step().",
            lambda: without(clip=False),
        ),
        (
            "label smoothing is missing: F.cross_entropy(logits, labels, "
            "label_smoothing=label_smoothing).",
            lambda: without(smoothing=False),
        ),
    ]
    # The weights first: a wrong step shows there, and then changes the second batch's loss too.
    _compare(
        name + " (the weights after two steps)",
        weights,
        expected,
        mistakes,
        generic="forward, loss, zero_grad, backward, clip, step, in that order.",
    )
    _compare(
        name + " (the returned losses)",
        torch.stack([loss.detach().reshape(()) for loss in losses]),
        torch.stack(expected_losses),
        generic="return the batch's loss: the cross-entropy of model(images) against labels.",
    )
    return _passed(name, fn)


# --- notebook 07: inside a trained ViT -----------------------------------------------------------


@_exercise("attention_rollout", "07_inside_a_vit", analysis.attention_rollout)
def check_attention_rollout(fn: Callable) -> Callable:
    """Check `fn(maps (layers, B, heads, T, T)) -> (B, T, T)`: attention rollout."""
    name = "attention_rollout"
    scores = _seeded(3, 2, 2, 5, 5) * 2
    maps = scores.softmax(-1)  # (L=3, B=2, h=2, T=5, T=5), rows sum to 1
    try:
        got = _call(fn, maps.clone())
    except _Open:
        return _still_open(name, analysis.attention_rollout)
    eye = torch.eye(5)

    def roll(combine=lambda m: m.mean(1), residual=True, renormalise=True, order="new @ old"):
        out = eye.expand(2, 5, 5)
        for layer in maps:
            a = combine(layer) + (eye if residual else 0)
            if renormalise:
                a = a / a.sum(-1, keepdim=True)
            out = a @ out if order == "new @ old" else out @ a
        return out

    mistakes = [
        (
            "the residual path is missing: add the identity to each layer's attention (each token "
            "also keeps itself), then renormalise the rows.",
            lambda: roll(residual=False),
        ),
        (
            "after adding the identity, the rows sum to 2: divide each row by its sum again.",
            lambda: roll(renormalise=False),
        ),
        (
            "the layers are multiplied in the wrong order: each layer reads what the layers below "
            "mixed, so rollout = a @ rollout, the new layer on the left.",
            lambda: roll(order="old @ new"),
        ),
        (
            "combine the heads by their mean (layer.mean(dim=1)), not their maximum.",
            lambda: roll(combine=lambda m: m.max(1).values),
        ),
        (
            "that is only the last layer's attention: rollout multiplies every layer's together.",
            lambda: (maps[-1].mean(1) + eye) / (maps[-1].mean(1) + eye).sum(-1, keepdim=True),
        ),
    ]
    _compare(
        name,
        got,
        analysis.attention_rollout(maps),
        mistakes,
        shape_hints={
            (3, 2, 5, 5): "that is one map per layer: multiply the layers together into one "
            "(B, T, T) map.",
            (2, 2, 5, 5): "average the heads (dim 1 of each layer's (B, h, T, T)) first.",
        },
    )
    return _passed(name, fn)


# --- notebook 08: ViT vs CNN --------------------------------------------------------------------


@_exercise("equivariance_error", "08_vit_vs_cnn", analysis.equivariance_error)
def check_equivariance_error(fn: Callable) -> Callable:
    """Check `fn(features, image, shift, border) -> float`: a layer's distance from translation
    equivariance, as `vitcourse.analysis.equivariance_error` measures it."""
    name = "equivariance_error"
    torch.manual_seed(0)
    conv = _randomized(nn.Conv2d(1, 4, 3, padding=1))
    where = _seeded(1, 4, 10, 12, seed=5)  # a fixed pattern by position: not equivariant at all

    def features(x):
        return conv(x) + where

    image = _seeded(1, 1, 10, 12, seed=6)
    with torch.no_grad():
        try:
            got = _call(fn, features, image.clone(), 3, 2)
        except _Open:
            return _still_open(name, analysis.equivariance_error)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if not isinstance(got, float | int):
            _fail(name, f"it should return one number, got {type(got).__name__}")
        expected = analysis.equivariance_error(features, image, 3, 2)
        f_then_s = torch.roll(features(image), 3, dims=-1)
        s_then_f = features(torch.roll(image, 3, dims=-1))

        def relative(a, b, inner=(..., slice(2, -2))):
            return ((a - b)[inner].norm() / a[inner].norm()).reshape(1)

        mistakes = [
            (
                "shift the features too: compare features(shifted image) with the features of "
                "the image, shifted afterwards (torch.roll(features(image), shift, dims=-1)).",
                lambda: relative(features(image), s_then_f),
            ),
            (
                "shift along the width, the last axis (dims=-1), not the height.",
                lambda: relative(
                    torch.roll(features(image), 3, dims=-2),
                    features(torch.roll(image, 3, dims=-2)),
                ),
            ),
            (
                "leave out `border` columns at each side: torch.roll wraps pixels round, and the "
                "wrapped edge is not a real shift.",
                lambda: relative(f_then_s, s_then_f, inner=(...,)),
            ),
            (
                "make it relative: divide the difference's norm by the norm of the features.",
                lambda: (f_then_s - s_then_f)[..., 2:-2].norm().reshape(1),
            ),
        ]
        _compare(
            name,
            torch.tensor([float(got)]),
            torch.tensor([expected]),
            mistakes,
            generic="norm of (shifted features - features of the shifted image), away from the "
            "border, divided by the norm of the shifted features.",
        )
    return _passed(name, fn)


# --- notebook 09: when ViTs win -----------------------------------------------------------------


@_exercise("random_masking", "09_when_vits_win", pretraining.random_masking)
def check_random_masking(fn: Callable) -> Callable:
    """Check `fn(batch_size, num_patches, mask_ratio, generator) -> (visible (B, V), mask (B, N))`:
    each image hides its own random `round(N * mask_ratio)` patches; `visible` lists the others in
    increasing order; `mask` is True where hidden. Its randomness is not compared with the
    reference's (any good random choice passes), only its properties."""
    name = "random_masking"
    B, N, ratio = 256, 16, 0.75
    hidden = pretraining.hidden_count(N, ratio)
    try:
        got = _call(fn, B, N, ratio, torch.Generator().manual_seed(0))
    except _Open:
        return _still_open(name, pretraining.random_masking)
    if not (isinstance(got, tuple) and len(got) == 2):
        _fail(name, "it should return two tensors, (visible, mask)")
    visible, mask = got
    if not isinstance(visible, torch.Tensor) or not isinstance(mask, torch.Tensor):
        _fail(name, "it should return two tensors, (visible, mask)")
    if mask.shape != (B, N) or mask.dtype != torch.bool:
        _fail(
            name,
            f"mask should be a bool tensor (B, N) = {(B, N)}, got {mask.dtype} {tuple(mask.shape)}",
            "mask = torch.ones(B, N, dtype=torch.bool), then set the visible places to False.",
        )
    if visible.shape != (B, N - hidden):
        hint = (
            "mask_ratio is the share of patches hidden: V = N - round(N * mask_ratio) stay visible."
        )
        if visible.shape == (B, hidden):
            _fail(name, f"visible holds {hidden} patches per image, expected {N - hidden}", hint)
        _fail(
            name, f"visible should be (B, V) = {(B, N - hidden)}, got {tuple(visible.shape)}", hint
        )
    if visible.dtype != torch.long:
        _fail(name, f"visible should hold indices (torch.long), got {visible.dtype}")
    counts = mask.sum(dim=1)
    if (counts == N - hidden).all():
        _fail(name, "mask is True on the visible patches", "mask is True where a patch is HIDDEN.")
    if not (counts == hidden).all():
        _fail(
            name,
            f"each image should hide exactly {hidden} of {N} patches; counts go from "
            f"{counts.min().item()} to {counts.max().item()}",
            "pick the visible patches from a random permutation (argsort of random noise), "
            "rather than hiding each patch with probability mask_ratio.",
        )
    if (visible.diff(dim=1) <= 0).any():
        _fail(
            name,
            "each row of visible should be in increasing order, without repeats",
            "sort the chosen indices: .sort(dim=1).values",
        )
    if mask.gather(1, visible).any():
        _fail(name, "some patches listed as visible are marked hidden in mask")
    if len({tuple(row) for row in visible.tolist()}) < B // 2:
        _fail(
            name,
            "the images share the same visible patches",
            "draw one random permutation per image: torch.rand(B, N).argsort(dim=1).",
        )
    share = mask.float().mean(dim=0)  # how often each position is hidden: about mask_ratio each
    if share.min() < ratio - 0.15 or share.max() > ratio + 0.15:
        _fail(
            name,
            f"some positions are hidden far more often than others ({share.min():.2f} to "
            f"{share.max():.2f}, expected about {ratio})",
            "every patch should be as likely to be hidden as any other.",
        )
    again = _call(fn, B, N, ratio, torch.Generator().manual_seed(0))
    if not torch.equal(again[0], visible):
        _fail(
            name,
            "the same generator seed gave other patches",
            "draw the noise with the generator: torch.rand(B, N, generator=generator).",
        )
    return _passed(name, fn)


@_exercise("masked_patch_loss", "09_when_vits_win", pretraining.masked_patch_loss)
def check_masked_patch_loss(fn: Callable) -> Callable:
    """Check `fn(predicted (B, N, K), target (B, N, K), mask (B, N)) -> scalar`: the mean squared
    error over the hidden patches only."""
    name = "masked_patch_loss"
    predicted, target = _seeded(3, 8, 12, seed=1), _seeded(3, 8, 12, seed=2)
    mask = _seeded(3, 8, seed=3) > 0.4  # hidden where True, a different count per image
    try:
        got = _call(fn, predicted.clone(), target.clone(), mask.clone())
    except _Open:
        return _still_open(name, pretraining.masked_patch_loss)
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = got.reshape(())
    error = (predicted - target).pow(2)  # (B, N, K)
    m = mask.float()
    mistakes = [
        (
            "that averages over every patch: count only the hidden ones, where mask is True (the "
            "encoder was shown the visible ones; MAE found a loss on them too slightly worse).",
            lambda: error.mean(),
        ),
        (
            "that averages over the visible patches: mask is True where a patch is HIDDEN.",
            lambda: (error.mean(-1) * (1 - m)).sum() / (1 - m).sum(),
        ),
        (
            "that sums each patch's squared errors: take their mean over the K numbers of a patch.",
            lambda: (error.sum(-1) * m).sum() / m.sum(),
        ),
        (
            "divide by the number of hidden patches (mask.sum()), not by every patch (B * N).",
            lambda: (error.mean(-1) * m).sum() / m.numel(),
        ),
        (
            "that is the mean of each image's own mean: average over all hidden patches together "
            "(images may hide different numbers of them).",
            lambda: ((error.mean(-1) * m).sum(1) / m.sum(1)).mean(),
        ),
        (
            "square the difference: (predicted - target) ** 2, not its absolute value.",
            lambda: ((predicted - target).abs().mean(-1) * m).sum() / m.sum(),
        ),
    ]
    _compare(
        name,
        got,
        pretraining.masked_patch_loss(predicted, target, mask),
        mistakes,
        generic="per patch the mean of (predicted - target) ** 2 over its numbers, then the mean "
        "over the hidden patches (where mask is True).",
        shape_hints={
            (3, 8): "that is one error per patch: average the hidden ones into one number.",
            (3, 8, 12): "that is the error of every number: reduce it to one number.",
        },
    )
    return _passed(name, fn)


@_exercise("distillation_loss", "09_when_vits_win", distillation.distillation_loss)
def check_distillation_loss(fn: Callable) -> Callable:
    """Check `fn(cls_logits, dist_logits, teacher_logits, labels, kind, alpha, tau) -> scalar`:
    DeiT's hard and soft distillation losses."""
    name = "distillation_loss"
    cls_l, dist_l, teacher = (_seeded(6, 5, seed=s) * 2 for s in (11, 12, 13))
    labels = torch.tensor([0, 1, 2, 3, 4, 0])
    reference = distillation.distillation_loss
    ce = F.cross_entropy
    guesses = teacher.argmax(-1)

    def kl(student, target, tau, reduction="batchmean"):
        return F.kl_div(
            F.log_softmax(student / tau, -1),
            F.log_softmax(target / tau, -1),
            reduction=reduction,
            log_target=True,
        )

    def mistakes_for(kind: str, alpha: float, tau: float) -> Mistakes:
        base = ce(cls_l, labels)
        if kind == "hard":
            return [
                (
                    "hard distillation trains on the teacher's guesses, teacher_logits.argmax(-1),"
                    " as if they were labels.",
                    lambda: (1 - alpha) * base + alpha * ce(dist_l, teacher.softmax(-1)),
                ),
                (
                    "the cls head learns from the labels and the distillation head from the "
                    "teacher, not the other way round.",
                    lambda: (1 - alpha) * ce(dist_l, labels) + alpha * ce(cls_l, guesses),
                ),
                (
                    "alpha weighs the teacher's part: (1 - alpha) * labels' loss + alpha * "
                    "teacher's loss.",
                    lambda: alpha * base + (1 - alpha) * ce(dist_l, guesses),
                ),
            ]
        return [
            (
                "multiply the KL divergence by tau ** 2, which keeps its gradients the size "
                "they would have at tau = 1.",
                lambda: (1 - alpha) * base + alpha * kl(dist_l, teacher, tau),
            ),
            (
                "KL(teacher || student): the teacher's probabilities are the target. In "
                "F.kl_div(input, target) the input is the student's log-probabilities.",
                lambda: (1 - alpha) * base + alpha * tau * tau * kl(teacher, dist_l, tau),
            ),
            (
                "average over the batch only (reduction='batchmean'): reduction='mean' also "
                "divides by the number of classes.",
                lambda: (
                    (1 - alpha) * base
                    + alpha * tau * tau * kl(dist_l, teacher, tau, "sum") / dist_l.numel()
                ),
            ),
            (
                "alpha weighs the teacher's part: (1 - alpha) * labels' loss + alpha * "
                "teacher's loss.",
                lambda: alpha * base + (1 - alpha) * tau * tau * kl(dist_l, teacher, tau),
            ),
            (
                "divide both the student's and the teacher's logits by tau before the softmax.",
                lambda: (
                    (1 - alpha) * base
                    + alpha
                    * tau
                    * tau
                    * F.kl_div(
                        F.log_softmax(dist_l / tau, -1),
                        F.log_softmax(teacher, -1),
                        reduction="batchmean",
                        log_target=True,
                    )
                ),
            ),
            (
                "the cls head learns from the labels and the distillation head from the "
                "teacher, not the other way round.",
                lambda: (
                    (1 - alpha) * ce(dist_l, labels) + alpha * tau * tau * kl(cls_l, teacher, tau)
                ),
            ),
        ]

    for kind, alpha, tau in (("hard", 0.2, 1.0), ("soft", 0.3, 3.0), ("hard", 0.5, 1.0)):
        args = (cls_l.clone(), dist_l.clone(), teacher.clone(), labels.clone(), kind, alpha, tau)
        try:
            got = _call(fn, *args)
        except _Open:
            return _still_open(name, reference)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.reshape(())
        mistakes = mistakes_for(kind, alpha, tau)
        _compare(
            name,
            got,
            reference(cls_l, dist_l, teacher, labels, kind, alpha, tau),
            mistakes,
            generic=f"for kind={kind!r}: (1 - alpha) * cross entropy(cls_logits, labels) + alpha * "
            + (
                "cross entropy(dist_logits, teacher_logits.argmax(-1))."
                if kind == "hard"
                else "tau ** 2 * KL(teacher || student) at temperature tau, averaged over the batch."
            ),
            shape_hints={(6,): "that is one loss per image: average them into one number."},
        )
    return _passed(name, fn)
