"""The notebooks as files: committed clean, runnable on a fresh machine, collected by nbmake.

nbmake itself executes each notebook (pytest collects `notebooks/` too, see pyproject.toml);
these tests check what execution cannot: that nothing is silently left out."""

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found under notebooks/"
    assert NOTEBOOKS[0].name.startswith("00_")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebook_is_clean(path):
    nb = json.loads(path.read_text())
    dirty = [
        i
        for i, cell in enumerate(nb["cells"])
        if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count"))
    ]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; strip them before committing"
    # jupyter_client maps "python3" to the running interpreter; other names fail on a fresh machine.
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.slow  # runs pytest in a subprocess
def test_every_notebook_is_collected_by_nbmake():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "notebooks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for path in NOTEBOOKS:
        assert f"notebooks/{path.name}" in result.stdout, f"{path.name} is not collected"


def _code_cells(path: Path) -> list[dict]:
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def _explorer_cells(path: Path) -> list[int]:
    """The code cells that open an ipywidgets explorer (`..._explorer(...)`, not its import)."""
    return [
        i
        for i, cell in enumerate(_code_cells(path))
        if "_explorer(" in "".join(cell["source"]) and "import" not in "".join(cell["source"])
    ]


WITH_EXPLORERS = [path for path in NOTEBOOKS if _explorer_cells(path)]


def test_the_explorer_notebooks_are_found():
    # The four notebooks with sliders; if this list empties, the test below checks nothing.
    assert [path.name[:2] for path in WITH_EXPLORERS] == ["01", "02", "03", "07"]


@pytest.mark.parametrize("path", WITH_EXPLORERS, ids=lambda p: p.name)
def test_explorers_are_backed_by_a_direct_call(path):
    """An explorer cell is skipped under nbmake: nbclient can deadlock on a cell that opens an
    ipywidgets `interactive` (jupyter/nbclient#312, seen here under load). So its logic must also
    run un-skipped: the same figure function, called directly in an earlier cell."""
    cells = _code_cells(path)
    for i in _explorer_cells(path):
        assert "skip-execution" in cells[i]["metadata"].get("tags", []), f"{path.name}: cell {i}"
        earlier = "".join(
            "".join(c["source"])
            for c in cells[:i]
            if "skip-execution" not in c["metadata"].get("tags", [])
        )
        assert "_figure(" in earlier, (
            f"{path.name}: no direct call of the explorer's figure function"
        )


RACE = ROOT / "data" / "trained" / "race_fashion-mnist.json"


def _race_results():
    return {(r["model"], r["fraction"]): r for r in json.loads(RACE.read_text())["results"]}


def _markdown(name: str) -> str:
    nb = json.loads((ROOT / "notebooks" / name).read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_the_results_page_quotes_the_shipped_race_and_notebook_08s_text_none_of_it():
    """docs/results.md's table describes the race notebook 08 loads: each test accuracy and pass count
    is the shipped file's. The notebook's own text quotes none of them: it prints them from the
    results it loaded or raced, so a live race never disagrees with a table in the text."""
    text = _markdown("08_vit_vs_cnn.ipynb")
    readme = (ROOT / "docs" / "results.md").read_text()  # the README links it
    results = _race_results()
    assert set(results) == {("ViT", 1.0), ("CNN", 1.0), ("ViT", 0.1), ("CNN", 0.1), ("hybrid", 1.0)}
    for r in results.values():
        quoted = (
            f"{100 * r['test_acc']:.2f}% ({r['epochs']:.{0 if r['epochs'] > 10 else 1}f} passes)"
        )
        assert quoted in readme, (
            f"docs/results.md does not quote {r['model']} {r['fraction']}: {quoted}"
        )
        number = f"{100 * r['test_acc']:.2f}%"
        assert number not in text, f"notebook 08's text hard-codes {number}: print it instead"


def _run_in_full_mode(name, folder, monkeypatch):
    """Execute notebook `name` top to bottom in full mode, in `folder`; the notebook with its
    outputs, and everything its cells printed."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    monkeypatch.setenv("VITCOURSE_QUICK", "0")  # the kernel inherits it
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    ).execute()
    printed = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    return nb, printed


@pytest.mark.slow  # starts a kernel
def test_notebook_08_loads_the_shipped_race_in_full_mode(tmp_path, monkeypatch):
    """The classroom path: full mode, RACE_LIVE = False, loads the shipped race and trains nothing;
    it prints each run's row and draws the paper's Table 5."""
    nb, printed = _run_in_full_mode("08_vit_vs_cnn.ipynb", tmp_path, monkeypatch)
    assert "Loaded our run (2.5 minutes a model" in printed
    assert "training images" not in printed  # no race was run
    for kind, name in (("ViT", "course-28-7"), ("CNN", "cnn-28")):  # section 2's trained models
        assert f"{kind}: {name}_fashion-mnist.pt, trained 10 minutes" in printed
    assert "none ships" not in printed and "train loss" not in printed  # nothing trained
    (shifted,) = [c for c in nb.cells if c.cell_type == "code" and "shifted_accuracy(" in c.source]
    assert sum("image/png" in o.get("data", {}) for o in shifted.outputs) == 1
    assert re.search(r"\nCNN( +\d+\.\d){8}\n", printed)  # its accuracy at shifts 0 to 7
    for r in _race_results().values():  # its row of the table (print_table: columns by words)
        row = rf"\n{r['model']} +{r['images']:,} +{100 * r['test_acc']:.2f}% "
        assert re.search(row, printed), row
    (paper,) = [
        c for c in nb.cells if c.cell_type == "code" and "data_scaling_figure()" in c.source
    ]
    assert sum("image/png" in o.get("data", {}) for o in paper.outputs) == 1
    assert not (tmp_path / "runs").exists()


COMPARISON = ROOT / "data" / "trained" / "when_vits_win_fashion-mnist.json"
SCRAMBLED_RACES = [  # notebook 09's races, on the scrambled images and on the images themselves:
    # (file, dataset, minutes, passes, at least this many seeds)
    (ROOT / "data" / "trained" / f"vit_wins_{name}_{budget}.json", name, minutes, passes, seeds)
    for budget, minutes, passes, seeds in (
        ("3-minutes", 3, None, 5),
        ("5-passes", None, 5, 5),
        ("15-passes", None, 15, 5),
    )
    for name in ("fashion-mnist-scrambled", "fashion-mnist")
]


def test_the_results_page_quotes_the_shipped_comparison_and_notebook_09s_text_none_of_it():
    """docs/results.md quotes the comparison notebook 09 loads; the notebook prints it from the file
    (or from its live run) and its text hard-codes none of it."""
    text = _markdown("09_when_vits_win.ipynb")
    readme = (ROOT / "docs" / "results.md").read_text()  # the README links it
    results = json.loads(COMPARISON.read_text())["results"]
    assert len(results) == 12 and {r["fraction"] for r in results} == {0.01, 0.1, 1.0}
    for r in results:
        quoted = f"{100 * r['test_acc']:.2f}%"
        assert quoted in readme, f"docs/results.md does not quote {r['model']} {r['fraction']}"
        assert quoted not in text, f"notebook 09's text hard-codes {quoted}: print it instead"
    for path, dataset, minutes, passes, fewest in SCRAMBLED_RACES:
        race = json.loads(path.read_text())
        assert race["dataset"] == dataset and (race["minutes"], race["epochs"]) == (minutes, passes)
        seeds = sorted({r["seed"] for r in race["results"]})
        assert len(seeds) >= fewest and [(r["model"], r["seed"]) for r in race["results"]] == [
            (model, seed) for seed in seeds for model in ("vit", "cnn", "mlp")
        ]
        for r in race["results"]:
            quoted = f"{100 * r['test_acc']:.2f}%"
            assert quoted in readme, f"docs/results.md does not quote {r['model']} {r['seed']}"
            assert quoted not in text, f"notebook 09's text hard-codes {quoted}: print it instead"


@pytest.mark.slow  # starts a kernel
@pytest.mark.parametrize("online", [True, False], ids=["weights file", "offline"])
def test_notebook_09_classroom_path_trains_nothing_and_looks_inside_a_pretrained_vit(
    online, tmp_path, monkeypatch
):
    """Full mode with the defaults: the shipped encoder and comparison are loaded, nothing trains,
    and the paper's Table 6 is drawn. With VITCOURSE_PRETRAINED naming a weights file (here a
    random timm ViT-Ti/16's) the last section classifies the photos and draws Figure 7 for it, as
    it would online; without the weights it draws Figure 7 for the shipped encoder instead."""
    import nbformat
    import timm
    import torch

    from vitcourse.pretrained import PRETRAINED

    weights = tmp_path / "vit-ti.pth"
    if online:
        torch.save(timm.create_model(PRETRAINED, pretrained=False).state_dict(), weights)
    monkeypatch.setenv("VITCOURSE_PRETRAINED", str(weights))  # the kernel inherits it
    nb, printed = _run_in_full_mode("09_when_vits_win.ipynb", tmp_path, monkeypatch)
    nbformat.write(nb, tmp_path / "executed.ipynb")  # to look at when it fails
    assert "loaded mae-course-28-7_fashion-mnist.pt" in printed
    assert "our measured comparison" in printed
    assert "labelled images:" not in printed and "train loss" not in printed  # nothing trained
    for r in json.loads(COMPARISON.read_text())["results"]:
        assert f"  {100 * r['test_acc']:.2f}%" in printed
    for path, _, minutes, passes, _ in SCRAMBLED_RACES:  # loaded, none run; each model's mean
        results = json.loads(path.read_text())["results"]
        seeds = sorted({r["seed"] for r in results})
        budget = f"{minutes} minutes" if minutes else f"{passes} passes"
        said = f"({path.name}: {budget} a model, seeds {seeds}"
        assert said in printed, said
        for kind in ("vit", "cnn", "mlp"):
            accuracies = [100 * r["test_acc"] for r in results if r["model"] == kind]
            assert (
                f"{statistics.mean(accuracies):.2f} ± {statistics.stdev(accuracies):.2f}" in printed
            )
    assert " min, " not in printed  # "ViT on ...: 85.00% after 3.0 min, 2,900 steps": a live race
    assert "your scramble gives the data layer's images: True" in printed

    def figures(marker: str) -> int:
        (cell,) = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
        return sum("image/png" in o.get("data", {}) for o in cell.outputs)

    assert figures("compute_figure()") == 1  # the paper's Table 6
    assert figures("Scrambled {DATASET}") == 1  # the race on scrambled images
    assert figures("PASSES = (5, 15)") == 1  # each model's accuracy after every pass, both races
    for heading in ("the difference (points", "what the scramble cost each model", "last 3 passes"):
        assert heading in printed, heading
    for passes in ("5", "15"):  # a row for each race, and the scramble's cost in each budget
        assert f"scrambled images, {passes} passes " in printed
        assert re.search(rf"\n{passes} passes +[+-]\d", printed), passes
    assert re.search(r"\n3 minutes \(\d+ to \d+ passes\) +[+-]\d", printed)
    assert figures("real_vit.attention_maps") == (1 if online else 0)  # the photos
    assert figures("position_embedding_similarity(inside)") == 1  # Figure 7, either model
    assert ("no weights file" in printed) is not online
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow  # starts a kernel
def test_notebook_06_stopped_in_its_first_epoch_keeps_a_usable_model(tmp_path):
    """Pressing Stop (■) before the first epoch ends: the training cell reports the model as it
    is, and the rest of the notebook runs on that model, with no traceback. The Stop button is a
    KeyboardInterrupt in the kernel; here a cell added before the training makes the live plot
    raise one at the first step (quick mode's epoch has two)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "notebooks" / "06_training.ipynb", as_version=4)
    training = next(i for i, c in enumerate(nb.cells) if "history = trainer.fit()" in c.source)
    stop = nbformat.v4.new_code_cell(
        "_step_end = LivePlot.on_step_end\n"
        "def _stop_at_step_1(self, trainer, loss):\n"
        "    if trainer.steps_done == 1:\n"
        "        raise KeyboardInterrupt  # what the Stop button sends\n"
        "    _step_end(self, trainer, loss)\n"
        "LivePlot.on_step_end = _stop_at_step_1"
    )
    nb.cells = [*nb.cells[:training], stop, *nb.cells[training:]]
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()  # raises CellExecutionError if a cell fails
    printed = "".join(o.get("text", "") for o in nb.cells[training + 1].outputs)
    assert "interrupted at step 1; the model and history are kept" in printed
    assert "epochs: 0, steps: 1" in printed and "validation accuracy" in printed
    after = "".join(
        o.get("text", "") for c in nb.cells[training + 2 :] for o in c.get("outputs", [])
    )
    assert "no epoch has ended yet" in after  # the training-against-validation cell says so
    assert "test accuracy" in after and "reloaded model gives the same outputs: True" in after


@pytest.mark.slow  # starts a kernel
@pytest.mark.parametrize("written", [True, False], ids=["written", "open"])
def test_notebook_06_trains_with_the_learners_train_step_once_it_passed(
    tmp_path, monkeypatch, written
):
    """The student copy of 06: once the learner's `train_step` passed its check, every step of the
    training is theirs (a counter in it sees them all) and the cell says so; while it is open,
    the package's takes the steps and the cell says that instead."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("VITCOURSE_PROGRESS", str(tmp_path / "progress.json"))
    nb = nbformat.read(ROOT / "student" / "06_training.ipynb", as_version=4)
    exercise = next(c for c in nb.cells if c.source.startswith("def train_step("))
    if written:
        exercise.source = (
            "CALLS = []\n"
            "def train_step(model, optimizer, images, labels, label_smoothing, grad_clip):\n"
            "    CALLS.append(1)\n"
            "    loss = F.cross_entropy(model(images), labels, label_smoothing=label_smoothing)\n"
            "    optimizer.zero_grad()\n"
            "    loss.backward()\n"
            "    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)\n"
            "    optimizer.step()\n"
            "    return loss\n"
        )
    training = next(i for i, c in enumerate(nb.cells) if "history = trainer.fit()" in c.source)
    count = "print('learner steps', len(CALLS) if 'CALLS' in globals() else 0, trainer.steps_done)"
    nb.cells = [*nb.cells[: training + 1], nbformat.v4.new_code_cell(count)]
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    printed = "".join(o.get("text", "") for o in nb.cells[training].outputs)
    counted = "".join(o.get("text", "") for o in nb.cells[-1].outputs).split()
    steps = int(counted[-1])
    assert steps > 0
    if written:
        assert "every step is taken by your train_step" in printed
        assert steps < int(counted[-2]) <= steps + 10  # the check's few calls, then every step
    else:
        assert "every step is taken by the package's train_step" in printed
        assert int(counted[-2]) == 0
