"""vitcourse.hosting: the notebooks' set-up cell (`from vitcourse.environment import setup`) on a
laptop, and on a simulated Colab and Kaggle: a fake `google.colab` module, pip commands recorded
instead of run, and the course's data files "downloaded" from this repository's own."""

import hashlib
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from vitcourse import environment
from vitcourse.checkpoints import shipped_model
from vitcourse.data.loading import load_dataset
from vitcourse.environment import prepare_environment
from vitcourse.hosting import (
    BRANCH,
    COURSE_FILES,
    CPU_SECONDS,
    HOSTED_PACKAGES,
    RAW_URL,
    REPOSITORY,
    colab_url,
    fetch_course_files,
    time_estimate,
)

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


class Recorder:
    """Stands in for subprocess.run: records each command, runs none."""

    def __init__(self):
        self.commands = []

    def __call__(self, command, check=False):
        self.commands.append(command)
        return subprocess.CompletedProcess(command, 0)


def from_the_repository(urls: list):
    """Stands in for the download: serves RAW_URL + name from this repository's data/."""

    def fetch(url: str) -> bytes:
        urls.append(url)
        assert url.startswith(RAW_URL)
        return (ROOT / "data" / url[len(RAW_URL) :]).read_bytes()

    return fetch


@pytest.fixture
def bare_runtime(monkeypatch, tmp_path):
    """A hosted runtime's working folder, where pip installed the package without its data/."""
    # setup() sets VITCOURSE_DATA: monkeypatch must know to take it away again afterwards.
    monkeypatch.setenv("VITCOURSE_DATA", "")
    monkeypatch.delenv("VITCOURSE_DATA")
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    monkeypatch.setattr(environment, "PACKAGE_DATA", tmp_path / "site-packages" / "data")
    monkeypatch.chdir(tmp_path)
    # A package the runtime lacks, next to those it has: only the missing one is installed.
    monkeypatch.setitem(HOSTED_PACKAGES, "vitcourse_missing_package", "missing-package>=1")
    return tmp_path


@pytest.fixture
def fake_colab(monkeypatch):
    calls = []
    output = types.ModuleType("google.colab.output")
    output.enable_custom_widget_manager = lambda: calls.append("widgets")
    colab = types.ModuleType("google.colab")
    colab.output = output
    google = types.ModuleType("google")
    google.colab = colab
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setitem(sys.modules, "google.colab.output", output)
    return calls


def test_on_a_laptop_setup_only_reports(monkeypatch, capsys):

    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    monkeypatch.delenv("VITCOURSE_DATA", raising=False)
    run, urls = Recorder(), []
    report = prepare_environment("06_training", run=run, fetch=from_the_repository(urls))
    # The notebooks' first cell calls environment.setup: it prints prepare_environment's report.
    assert environment.setup("06_training", run=run, fetch=from_the_repository(urls)) is None
    assert run.commands == [] and urls == []  # nothing installed, nothing downloaded
    assert "VITCOURSE_DATA" not in environment.os.environ
    assert report["where"] == "this machine" and "set-up" not in report
    assert report["edition"].startswith("vitcourse ") and "this checkout" in report["edition"]
    assert report["time"] == "full mode took 5.5 minutes on a 2-core CPU"
    assert "advice" not in report
    assert "device:      cpu" in capsys.readouterr().out


def test_on_colab_setup_installs_around_torch_fetches_the_data_and_turns_on_widgets(
    bare_runtime, fake_colab
):

    run, urls = Recorder(), []
    report = prepare_environment("08_vit_vs_cnn", run=run, fetch=from_the_repository(urls))
    assert report["where"] == "colab"
    assert (
        report["edition"]
        == f"vitcourse from github.com/{REPOSITORY}, {BRANCH} (vitcourse.hosting.BRANCH)"
    )
    # One pip command, for the missing package only; torch and torchvision held where they are.
    [command] = run.commands
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    assert command[-1] == "missing-package>=1"
    assert not any(arg.startswith(("torch", "torchvision")) for arg in command)
    pins = Path(command[command.index("-c") + 1]).read_text().split()
    assert pins == [
        f"torch=={torch.__version__}",
        f"torchvision=={environment.torchvision.__version__}",
    ]
    # The data: into data/ in the working folder, every course file, checked.
    data = bare_runtime / "data"
    assert environment.os.environ["VITCOURSE_DATA"] == str(data)
    assert urls == [RAW_URL + name for name in COURSE_FILES]
    assert all(
        (data / name).read_bytes() == (ROOT / "data" / name).read_bytes() for name in COURSE_FILES
    )
    assert fake_colab == ["widgets"]
    assert f"fetched {len(COURSE_FILES)} data files" in report["set-up"]
    assert "Runtime > Change runtime type > T4 GPU" in report["advice"]  # a CPU runtime
    assert "(RACE_LIVE = True: 15.2 minutes)" in report["time"]
    # The notebooks find what was fetched: Fashion-MNIST and the shipped models.
    assert len(load_dataset("fashion-mnist", train=False)) == 10_000
    assert shipped_model("fashion-mnist") == data / "trained" / "course-28-7_fashion-mnist.pt"
    # Run again (a learner re-runs the cell): nothing is installed or fetched twice.
    HOSTED_PACKAGES.pop("vitcourse_missing_package")  # installed now (monkeypatch restores it)
    again = prepare_environment("08_vit_vs_cnn", run=run, fetch=from_the_repository(urls))
    assert len(run.commands) == 1 and len(urls) == len(COURSE_FILES)
    assert "fetched" not in again.get("set-up", "")


def test_on_kaggle_setup_fetches_the_data_and_names_kaggles_gpu_setting(bare_runtime, monkeypatch):

    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    run, urls = Recorder(), []
    report = prepare_environment("01_patches", run=run, fetch=from_the_repository(urls))
    assert report["where"] == "kaggle"
    assert len(run.commands) == 1 and len(urls) == len(COURSE_FILES)
    assert "widget manager" not in report["set-up"]  # Kaggle's JupyterLab renders widgets itself
    assert "Settings > Accelerator > GPU" in report["advice"]


def test_a_damaged_or_failed_download_is_a_clear_error_and_leaves_nothing(tmp_path):

    with pytest.raises(
        RuntimeError, match="is not the course's FashionMNIST/raw/train-images.*SHA-256"
    ):
        fetch_course_files(tmp_path, fetch=lambda url: b"<html>rate limited</html>")
    assert list(tmp_path.iterdir()) == []

    def offline(url):
        raise OSError("Name or service not known")

    with pytest.raises(RuntimeError, match="could not download .*On Kaggle, turn on Internet"):
        fetch_course_files(tmp_path, fetch=offline)


def test_course_files_list_every_shipped_data_file_with_its_checksum():

    data = ROOT / "data"
    shipped = {
        str(path.relative_to(data))
        for path in data.rglob("*")
        if path.is_file() and (path.suffix == ".gz" or path.parent.name == "trained")
    }
    assert shipped == set(COURSE_FILES), (
        "data/ and hosting.COURSE_FILES differ: list every file a notebook reads, with its "
        "sha256sum, so Colab and Kaggle fetch it"
    )
    for name, expected in COURSE_FILES.items():
        assert hashlib.sha256((data / name).read_bytes()).hexdigest() == expected, (
            f"data/{name} changed: put its new sha256sum in hosting.COURSE_FILES"
        )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_starts_with_the_set_up_cell(path):

    cells = json.loads(path.read_text())["cells"]
    first = "".join(next(c for c in cells if c["cell_type"] == "code")["source"])
    pinned = "" if BRANCH == "main" else f"@{BRANCH}"  # a class pinned to a tag (docs/hosted.md)
    assert f'git+https://github.com/{REPOSITORY}{pinned}"' in first and "--no-deps" in first
    assert f'setup("{path.stem}")' in first
    assert path.stem in CPU_SECONDS  # its running time was measured, for setup to report


def test_time_estimate_says_what_was_measured_and_what_was_not():

    assert time_estimate("01_patches", torch.device("cpu")) == "full mode took 15 s on a 2-core CPU"
    assert time_estimate("01_patches", torch.device("cuda")).endswith("; not timed on a GPU")
    # A training budget takes its minutes on any device.
    assert time_estimate("06_training", torch.device("cuda")).endswith(
        "not timed on a GPU: its trainings run for set minutes, as long there, and get further"
    )
    assert (
        time_estimate(None, torch.device("cpu")) == "this notebook's running time was not measured"
    )


def test_the_set_up_imports_without_the_packages_it_may_have_to_install():

    blocked = list(HOSTED_PACKAGES)
    code = (
        f"import sys\nfor name in {blocked!r}: sys.modules[name] = None\n"
        "from vitcourse.environment import setup\nfrom vitcourse.hosting import COURSE_FILES\n"
        "from vitcourse.hosting import _importable\n"
        f"assert not any(_importable(name) for name in {blocked!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_the_readme_links_every_notebook_and_its_student_copy_to_colab():

    readme = (ROOT / "README.md").read_text()
    base = f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}"
    for path in NOTEBOOKS:
        assert f"({base}/notebooks/{path.name})" in readme, path.name
        assert f"({base}/student/{path.name})" in readme, path.name
        assert (ROOT / "student" / path.name).exists()
        # the book links the same two (book/conf.py builds them with colab_url)
        assert colab_url("notebooks", path.name) == f"{base}/notebooks/{path.name}"
        assert colab_url("student", path.name) == f"{base}/student/{path.name}"


def test_the_set_up_lines_and_the_tools_messages_are_in_the_translation_template():
    """What the set-up cell prints, the command lines' lines and errors, the bridges', the
    pretrained weights' and the analysis tools' errors, and the paper's charts go through `_`
    (vitcourse.language), so the catalog extraction finds them."""
    from vitcourse.translation.catalogs import package_template

    catalog = package_template()
    for message in (
        "full mode took {time} on a 2-core CPU{live}",  # hosting
        "{estimate}; not timed on a {device}",
        "fetched {count} data files into {folder}",
        "expected maps (layers, B, heads, T, T), got shape {shape}",  # analysis
        "no weights file at {file} (VITCOURSE_PRETRAINED or file=)",  # pretrained
        "this transformers ViT has features vitcourse does not model: {problems}",
        "unknown preset {name!r}: expected one of {presets}",  # presets
        "ImageNet top-1 accuracy (%)",  # paper
        "{name}\n{millions:g}M images",
        "call setup() first (a lightning.Trainer calls it for you)",  # bridges
        "TensorBoardCallback writes through torch.utils.tensorboard, which needs the "
        "tensorboard package: {install}",
        "stopped early; resume with: {command}",  # cli
        "test accuracy {percent:.2f}% on {images} images; wrote {folder}/",
        "error: --freeze trains the head on top of --init's weights; give --init",
        "{folder}: {count} classes ({classes}), {size} x {size} pixels, {channels}, mean/std "
        "{numbers} (kept in run.json)",
        "masked autoencoder: a ViT encoder ({depth} blocks, width {dim}, {side}x{side} patches), "
        "{parameters} parameters with the decoder; {percent}% of the patches hidden; "
        "{images} images, no labels; device {device}",
    ):
        assert catalog.get(message) is not None, message
