"""vitcourse.environment: quick mode, device choice, the report notebook 00 prints."""

import pytest
import torch

from vitcourse.environment import environment_report, pick_device, quick_mode


@pytest.mark.parametrize(
    "value, expected", [("1", True), ("yes", True), ("0", False), ("", False), ("false", False)]
)
def test_quick_mode_reads_the_variable(monkeypatch, value, expected):
    monkeypatch.setenv("VITCOURSE_QUICK", value)
    assert quick_mode() is expected


def test_pick_device_prefers_what_is_there(monkeypatch):
    monkeypatch.delenv("VITCOURSE_DEVICE", raising=False)
    expected = (
        "cuda"
        if torch.cuda.is_available()
        else ("mps" if torch.backends.mps.is_available() else "cpu")
    )
    assert pick_device().type == expected
    assert pick_device("cpu") == torch.device("cpu")
    monkeypatch.setenv("VITCOURSE_DEVICE", "cpu")
    assert pick_device() == torch.device("cpu")


def test_pick_device_refuses_a_missing_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="'cuda' was asked for.*no CUDA GPU"):
        pick_device("cuda")


def test_environment_report_names_versions_and_device():
    report = environment_report()
    assert report["torch"] == torch.__version__
    assert report["device"].split(" ")[0] == pick_device().type
    assert int(report["torch threads"]) == torch.get_num_threads()
