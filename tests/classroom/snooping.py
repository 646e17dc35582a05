"""A determined student's answer that computes nothing and looks for the expected output instead.

`snoop` (for an exercise that is a function) and `Snoop` (for one that is a class) look, from
wherever the check calls them, at everything an answer can reach: the locals of every frame up
the stack (`sys._getframe`), the globals of every module of the course, every tensor the process
holds (`gc.get_objects`), and every file in the folders the sandbox shows (`/grading`, or the
probe's own folders without a sandbox). They write what they found to the output folder
(`snooped.safetensors`: the tensors; `snooped.json`: the numbers in the frames and globals), and
raise. tests/classroom/test_grading_reach.py then compares what was found with the expected
output, which only the grader computes.

The grader pickles this module's objects by value (cloudpickle), as it pickles a notebook's.
"""

from __future__ import annotations

import gc
import json
import math
import sys
from pathlib import Path

import torch

_found: dict[str, torch.Tensor] = {}
_numbers: set = set()
_seen: set[int] = set()


def _keep(tensor: torch.Tensor) -> None:
    if id(tensor) in _seen or tensor.layout != torch.strided or tensor.device.type != "cpu":
        return
    if tensor.numel() > 2**20:
        return
    _seen.add(id(tensor))
    _found[f"t{len(_found)}"] = tensor.detach().clone().contiguous()


def _look(value, depth: int = 0, visited: set | None = None) -> None:
    """Tensors (and numbers) in `value`, and in what it holds, a few levels down."""
    visited = set() if visited is None else visited
    if depth > 6 or id(value) in visited:
        return
    visited.add(id(value))
    if type(value) in (int, float) and math.isfinite(value):
        _numbers.add(value)
    elif isinstance(value, torch.Tensor):
        _keep(value)
        if value.numel() == 1 and value.layout == torch.strided:
            _numbers.add(float(value.detach().reshape(()).item()))
    elif isinstance(value, torch.nn.Module):
        for tensor in [*value.parameters(), *value.buffers()]:
            _keep(tensor)
    elif isinstance(value, dict):
        for item in list(value.values())[:10_000]:
            _look(item, depth + 1, visited)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in list(value)[:10_000]:
            _look(item, depth + 1, visited)
    elif hasattr(value, "__dict__") and not isinstance(value, type) and depth < 3:
        _look(vars(value), depth + 1, visited)


def _files(roots: list[Path]) -> None:
    """Every file the sandbox shows in `roots`, read as tensors or JSON where it can be."""
    from safetensors.torch import load_file

    for root in roots:
        for path in sorted(root.rglob("*"))[:500]:
            if not path.is_file() or path.stat().st_size > 50 * 2**20:
                continue
            for read in (
                lambda p: torch.load(p, weights_only=True),
                load_file,
                lambda p: json.loads(p.read_text()),
            ):
                try:
                    _look(read(path))
                    break
                except Exception:  # noqa: BLE001, S112 - not that kind of file: try the next
                    continue


def _look_around() -> None:
    frame = sys._getframe(2)
    while frame is not None:
        _look(dict(frame.f_locals))
        frame = frame.f_back
    for name, module in list(sys.modules.items()):  # the course's globals, however deep
        if name.split(".")[0] == "vitcourse" and module is not None:
            _look(dict(vars(module)))
    for thing in gc.get_objects():
        if isinstance(thing, torch.Tensor):
            _keep(thing)
    grading = Path("/grading")
    given, out = (grading / "in", grading / "out") if grading.is_dir() else map(Path, sys.argv[-2:])
    _files([given, out])
    from safetensors.torch import save_file

    save_file(_found, str(out / "snooped.safetensors"))
    (out / "snooped.json").write_text(json.dumps(sorted(_numbers, key=float)[:1_000_000]))


def snoop(*args, **kwargs):
    """An answer for an exercise that is a function."""
    _look(args)
    _look(kwargs)
    _look_around()
    raise RuntimeError("snooped: nothing computed")


class Snoop(torch.nn.Module):
    """An answer for an exercise that is a class: it takes any weights, and looks when built and
    when run."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        _look(args)
        _look(kwargs)
        _look_around()

    def load_state_dict(self, state_dict, *args, **kwargs):
        _look(state_dict)
        return None

    def forward(self, *args, **kwargs):
        _look(args)
        _look(kwargs)
        _look_around()
        raise RuntimeError("snooped: nothing computed")
