"""Scaling up: mixed precision on a GPU, and several processes with torchrun (the README's
"Scaling up").

Nothing here changes what the model learns, only where and how fast: `autocast_dtype` picks
bfloat16 or float16 for `torch.autocast` on a CUDA GPU (float32 elsewhere); under `torchrun`,
`init_distributed` joins the process group (`vitcourse.data.sharding` gives each process its
share of the data), and `all_reduce_sum` / `all_reduce_max` combine what the processes measured.
On a CPU in one process none of it runs: float32, one process, the loop of notebook 06.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn

from vitcourse.language import _

# --- mixed precision -----------------------------------------------------------------------------

PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def autocast_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The lower precision to compute in with `torch.autocast`, or None for plain float32.

    "auto": on a CUDA GPU, bfloat16 where it has it natively (Ampere and later), else float16
    (Colab's T4, a V100), which needs a gradient scaler: its small range would round tiny
    gradients to zero. Elsewhere float32: on a CPU without native bfloat16, autocast was measured
    18 times slower than float32 in bfloat16 and 21 times in float16 (benchmarks/precision.py).
    """
    if precision not in PRECISIONS:
        message = _("{argument} must be one of {kinds}, got {value}")
        raise ValueError(
            message.format(argument="precision", kinds=PRECISIONS, value=repr(precision))
        )
    if precision == "auto":
        if device.type != "cuda":
            return None
        # Native bfloat16 only: a T4 or V100 would emulate it, slowly (torch answers True there
        # unless asked to leave emulation out).
        native = torch.cuda.is_bf16_supported(including_emulation=False)
        return torch.bfloat16 if native else torch.float16
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def mixed_precision(
    device: torch.device, precision: str = "auto"
) -> tuple[torch.dtype | None, torch.amp.GradScaler | None]:
    """The autocast dtype for `device` (`autocast_dtype`), and the gradient scaler float16 needs:
    bfloat16 has float32's range and needs none."""
    amp_dtype = autocast_dtype(device, precision)
    scaler = torch.amp.GradScaler(device.type) if amp_dtype == torch.float16 else None
    return amp_dtype, scaler


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Copy a batch to the device. From pinned (page-locked) memory the copy to a GPU runs in the
    background (`non_blocking`) while the GPU still computes; elsewhere it is a plain copy."""
    return tensor.to(device, non_blocking=tensor.is_pinned())


# --- several processes (torchrun) ----------------------------------------------------------------


def distributed() -> bool:
    """True inside a process group: under torchrun, after `init_distributed`."""
    return dist.is_available() and dist.is_initialized()


def init_distributed(device: str | None = None) -> tuple[int, int, str | None]:
    """Join the process group torchrun set up; returns (rank, world size, device).

    Under `torchrun --nproc_per_node=N`, N processes run the same command and each finds its
    place in the environment torchrun sets (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`). Each process takes
    one GPU (`cuda:LOCAL_RANK`, NCCL between them) or, without GPUs, the CPU (gloo). Run without
    torchrun, it returns (0, 1, device) and starts nothing.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1 or distributed():
        return (dist.get_rank(), dist.get_world_size(), device) if distributed() else (0, 1, device)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device in (None, "cuda") and torch.cuda.is_available():
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(device)
        backend = "nccl"
    elif device in (None, "cpu"):
        device, backend = "cpu", "gloo"
    else:
        message = _("several processes train on CUDA GPUs or on the CPU, not on {device}")
        raise ValueError(message.format(device=repr(device)))
    dist.init_process_group(backend)
    return dist.get_rank(), world_size, device


def all_reduce_sum(tensor: torch.Tensor, device: torch.device, op=None) -> torch.Tensor:
    """The sum of `tensor` over every process (each process passes its own); `op` another
    reduction, such as `dist.ReduceOp.MAX`."""
    # NCCL reduces tensors on the GPU; gloo on the CPU.
    on = device if dist.get_backend() == "nccl" else torch.device("cpu")
    total = tensor.to(on).clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM if op is None else op)
    return total.to(tensor.device)


def all_reduce_max(value: float, device: torch.device) -> float:
    """The largest of every process's `value`."""
    return all_reduce_sum(
        torch.tensor([value], dtype=torch.float64), device, dist.ReduceOp.MAX
    ).item()


def rank_and_world_size() -> tuple[int, int]:
    """This process's place among those training together: (0, 1) without torchrun."""
    return (dist.get_rank(), dist.get_world_size()) if distributed() else (0, 1)


def prepare_network(model: nn.Module, device: torch.device, compile: bool = False) -> nn.Module:
    """What the training steps call: `model` wrapped in `DistributedDataParallel` under torchrun
    (which averages the gradients over the processes), and compiled when asked. It shares the
    model's weights; the model itself is what is saved, analysed and plotted."""
    network = model
    if distributed():
        ids = [device.index] if device.type == "cuda" else None
        network = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    return torch.compile(network) if compile else network


def share_buffers(model: nn.Module) -> None:
    """Under torchrun, give every process the first one's buffers (a BatchNorm's running
    statistics, which each process updates from its own batches), so that all of them measure,
    and save, the same model."""
    if distributed():
        for buffer in model.buffers():
            dist.broadcast(buffer, src=0)


def mean_over_processes(value: float, device: torch.device) -> float:
    """Under torchrun, the mean of each process's `value` (each saw its share of the data)."""
    if not distributed():
        return value
    total = all_reduce_sum(torch.tensor([value], dtype=torch.float64), device)
    return total.item() / dist.get_world_size()
