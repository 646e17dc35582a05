"""vitcourse.training.evaluation: loss, accuracy and per-class scores on a case worked by hand."""

from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from vitcourse.training.evaluation import evaluate


def test_evaluate_metrics_on_a_known_case():
    class Fixed(torch.nn.Module):  # predicts class 0 always
        config = SimpleNamespace(num_classes=2)

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return torch.tensor([[1.0, 0.0]]).expand(len(x), 2) + self.w

    labels = torch.tensor([0, 0, 0, 1])
    loader = DataLoader(TensorDataset(torch.zeros(4, 1), labels), batch_size=3)
    m = evaluate(Fixed(), loader)
    assert m["acc"] == 0.75
    assert m["confusion"].tolist() == [[3, 0], [1, 0]]
    assert m["precision"].tolist() == pytest.approx([0.75, 0.0])
    assert m["recall"].tolist() == pytest.approx([1.0, 0.0])
    assert m["f1"][0].item() == pytest.approx(2 * 0.75 / 1.75)
    expected_loss = torch.nn.functional.cross_entropy(torch.tensor([[1.0, 0.0]] * 4), labels)
    assert m["loss"] == pytest.approx(expected_loss.item())
