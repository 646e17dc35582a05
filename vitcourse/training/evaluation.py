"""Measuring a model: loss, accuracy, confusion matrix, per-class precision, recall and F1.

Introduced in notebook 06 (the validation after each epoch, the final test score, and `accuracy`,
which the trainer applies to each training batch's logits) and used by notebook 08's race. Under
torchrun each process measures its share of a split and the sums are added up across processes
(`vitcourse.training.scaling`), so every process gets the result over the whole split.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vitcourse.data.sharding import ShardSampler
from vitcourse.language import _
from vitcourse.training.scaling import all_reduce_sum, distributed, to_device


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """The share of images whose largest logit is their label: (B, classes), (B,) -> a number."""
    return (logits.argmax(-1) == labels).float().mean().item()


@torch.no_grad()
def evaluate(
    model: nn.Module, loader, device: torch.device | None = None, num_classes: int | None = None
) -> dict:
    """Loss, accuracy, confusion matrix and per-class precision, recall and F1 on a loader.

    Under torchrun, a loader that holds one process's share (`ShardSampler`) is measured by every
    process on its share and the sums are added up across them: every process gets the result
    over the whole split.
    """
    device = device or next(model.parameters()).device
    num_classes = num_classes or model.config.num_classes
    was_training = model.training
    model.eval()
    confusion = torch.zeros(num_classes, num_classes, dtype=torch.long)  # rows: truth, cols: guess
    total_loss, count = 0.0, 0
    for images, labels in loader:
        images, labels = to_device(images, device), to_device(labels, device)
        logits = model(images)
        total_loss += F.cross_entropy(logits, labels, reduction="sum").item()
        count += labels.numel()
        pairs = labels.cpu() * num_classes + logits.argmax(-1).cpu()
        confusion += torch.bincount(pairs, minlength=num_classes**2).reshape(num_classes, -1)
    model.train(was_training)
    if isinstance(getattr(loader, "sampler", None), ShardSampler) and distributed():
        sums = all_reduce_sum(torch.tensor([total_loss, count], dtype=torch.float64), device)
        total_loss, count = sums[0].item(), int(sums[1].item())
        confusion = all_reduce_sum(confusion, device)
    if count == 0:
        raise ValueError(_("cannot evaluate on an empty loader"))
    correct = confusion.diag().float()
    precision = correct / confusion.sum(0).clamp(min=1)
    recall = correct / confusion.sum(1).clamp(min=1)
    f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-12)
    return {
        "loss": total_loss / max(count, 1),
        "acc": correct.sum().item() / count,
        "confusion": confusion,
        "precision": precision,
        "recall": recall,
        "f1": f1,
    }
