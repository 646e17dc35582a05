"""vitcourse.environment: quick mode, device choice, the report notebook 00 prints, the
reachability probe; the hosting names are not in it (their one home is vitcourse.hosting)."""

import http.server
import socket
import threading
import time
from pathlib import Path

import pytest
import torch

from vitcourse import environment, hosting
from vitcourse.environment import (
    default_root,
    environment_report,
    is_online,
    pick_device,
    quick_mode,
    shown_path,
)


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


def test_default_root_is_the_repos_data_folder_or_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("VITCOURSE_DATA", raising=False)
    assert default_root() == Path(__file__).resolve().parent.parent / "data"
    monkeypatch.setenv("VITCOURSE_DATA", str(tmp_path))
    assert default_root() == tmp_path


def test_reachability_probe_gives_up_on_a_silent_server():
    """A server that accepts the connection and never answers must not hang us."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        start = time.perf_counter()
        assert is_online(f"http://127.0.0.1:{port}/file.gz", timeout=1.0) is False
        assert time.perf_counter() - start < 3


def test_reachability_probe_wants_the_file_not_just_a_connection():
    """Some networks answer every address with an error page: that is not 'online'."""

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(404 if "missing" in self.path else 200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert is_online(f"{base}/missing.gz", timeout=2.0) is False
        assert is_online(f"{base}/file.gz", timeout=2.0) is True
    finally:
        server.shutdown()


def test_the_hosting_names_have_one_home():
    """Colab's and Kaggle's names live in `vitcourse.hosting` alone: `environment` imports the few
    it uses and forwards none (tests/test_package.py checks every import names a name's home)."""
    for name in ("COURSE_FILES", "CPU_SECONDS", "TIME_BUDGETS", "fetch_course_files", "RAW_URL"):
        assert hasattr(hosting, name) and not hasattr(environment, name), name


def test_environment_names_what_it_does_not_have():
    with pytest.raises(
        AttributeError, match="'vitcourse.environment' has no attribute 'COURSE_FILEZ'"
    ):
        environment.COURSE_FILEZ  # noqa: B018
    assert not hasattr(environment, "_pip_install")  # hosting's own helpers stay there


def test_the_report_names_the_data_folder_from_the_course_not_the_machine(monkeypatch, tmp_path):
    monkeypatch.delenv("VITCOURSE_DATA", raising=False)
    assert environment_report()["data folder"] == "data"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VITCOURSE_DATA", str(tmp_path / "mine"))
    assert environment_report()["data folder"] == "mine"  # from the working folder
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")  # a working folder beside the home folder
    assert shown_path(home / "courses" / "data") == "~/courses/data"
    assert shown_path("/srv/shared/data") == "/srv/shared/data"  # elsewhere: as it is
    monkeypatch.delenv("VITCOURSE_DATA")
    course = Path(__file__).resolve().parent.parent
    assert str(course) not in environment_report()["data folder"]
