"""The language the course speaks (vitcourse.language): English unless asked, Spanish when
VITCOURSE_LANG=es or set_language("es"), and a one-line error for a language it does not speak."""

import subprocess
import sys
from pathlib import Path

import pytest

from vitcourse import language

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fresh(monkeypatch):
    """No language chosen yet in this process, none in the environment."""
    monkeypatch.setattr(language, "_chosen", None)
    # Set, not deleted: monkeypatch then puts back what was there (nothing), whatever
    # set_language wrote into the environment meanwhile. Empty is no language chosen.
    monkeypatch.setenv("VITCOURSE_LANG", "")
    return language


def test_english_unless_asked(fresh):
    assert fresh.language() == "en"
    assert fresh._("a message the catalog does not know") == "a message the catalog does not know"


def test_the_environment_or_set_language_choose(fresh, monkeypatch):
    monkeypatch.setenv("VITCOURSE_LANG", "es_ES.UTF-8")
    assert fresh.language() == "es"
    fresh.set_language("EN")
    assert fresh.language() == "en"
    import os

    assert os.environ["VITCOURSE_LANG"] == "en"  # the processes it starts speak it too


def test_speaking_a_language_for_a_while_puts_the_earlier_one_back(fresh, monkeypatch):
    import os

    with fresh.speaking("es"):
        assert fresh.language() == "es" and os.environ["VITCOURSE_LANG"] == "es"
    assert fresh.language() == "en" and os.environ["VITCOURSE_LANG"] == ""
    fresh.set_language("es")
    monkeypatch.delenv("VITCOURSE_LANG")
    with pytest.raises(RuntimeError), fresh.speaking("en"):
        raise RuntimeError("put back even so")
    assert fresh.language() == "es" and "VITCOURSE_LANG" not in os.environ


def test_an_unknown_language_is_a_one_line_error_naming_the_ones_there_are(fresh, monkeypatch):
    with pytest.raises(ValueError) as raised:
        fresh.set_language("fr")
    assert str(raised.value) == (
        "the course speaks no language 'fr': it speaks en (English), es (español)"
    )
    monkeypatch.setenv("VITCOURSE_LANG", "klingon")
    with pytest.raises(ValueError, match="it speaks en"):
        fresh.language()


def test_set_language_is_at_the_packages_top():
    done = subprocess.run(
        [sys.executable, "-c", "import vitcourse; vitcourse.set_language('es'); "
         "from vitcourse.language import language; print(language())"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert done.stdout.strip() == "es", done.stderr[-2000:]


def test_spanish_comes_from_the_compiled_catalog(fresh):
    fresh.set_language("es")
    catalog = fresh.catalog("es")
    assert catalog.gettext("") != ""  # its header: the catalog is there and was read
    assert fresh._("a message the catalog does not know") == "a message the catalog does not know"


def test_a_count_is_written_as_the_language_writes_it(fresh):
    """English 70,000; Spanish no comma (a decimal one to its readers): 1024 and 70 000, with a
    space that does not break the line; tables too."""
    counts = [7, 1024, 55000, 1601802, -25000]
    assert [fresh.number(n) for n in counts] == ["7", "1,024", "55,000", "1,601,802", "-25,000"]
    assert fresh.number(2150.4) == "2,150"  # a float is rounded first
    fresh.set_language("es")
    assert [fresh.number(n) for n in counts] == [
        "7",
        "1024",
        "55\u00a0000",
        "1\u00a0601\u00a0802",
        "-25\u00a0000",
    ]
    assert fresh.table(["", "n"], [["a", 55000]]).splitlines()[1] == "a  55\u00a0000"


def test_the_notebooks_write_counts_with_number():
    """`f"{n:,}"` prints 70,000 in the Spanish edition too: the notebooks write `number(n)`."""
    import json
    import re

    found = []
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            spec = re.search(r".*:[<>^=]?[+-]?\d*,(\.\d+)?[dfn]?\}.*", source)  # {n:,} {n:>6,}
            if cell["cell_type"] == "code" and spec:
                found.append(f"{path.name}: {spec[0]}")
    assert not found, found


WRONG_PATCHIFY = """
from vitcourse.checks import check_patchify, hint

def patchify(images, patch_size):  # the patches column by column: a classic mistake
    B, C, H, W = images.shape
    P = patch_size
    grid = images.reshape(B, C, H // P, P, W // P, P)
    return grid.permute(0, 4, 2, 3, 5, 1).reshape(B, -1, P * P * C)

try:
    check_patchify(patchify)
except AssertionError as failed:
    print("\\n".join(failed._render_traceback_()))
hint("patchify")
"""


@pytest.mark.parametrize(
    "code, verdict, first, second",
    [
        ("en", "✗ patchify is not right yet: the shape is right but the values are not",
         "Hint: the patches come out column by column.", "Hint for patchify: when the N patches"),
        ("es", "✗ patchify aún no está bien: la forma es correcta, pero los valores no",
         "Pista: los patches salen columna a columna.", "Pista para patchify: al aplanar"),
    ],
)  # fmt: skip
def test_a_failed_check_speaks_the_language_chosen(code, verdict, first, second):
    import os

    env = {**os.environ, "VITCOURSE_LANG": code}
    done = subprocess.run([sys.executable, "-c", WRONG_PATCHIFY], capture_output=True, text=True,
                          cwd=ROOT, env=env)  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0] == verdict, done.stdout + done.stderr[-2000:]
    assert lines[1].startswith(first)
    assert lines[-1].startswith(second)


def test_the_model_the_set_up_cell_and_the_datasets_speak_spanish_too(fresh, capsys, monkeypatch):
    """Beyond the checks: the model's own errors, the set-up cell's report, the built-in datasets'
    class names and the notebooks' tables, in the language chosen (the English stays the code's)."""
    from vitcourse.data import dataset_info
    from vitcourse.environment import environment_report, print_report, setup
    from vitcourse.vit import ViTConfig

    monkeypatch.setenv("VITCOURSE_QUICK", "1")
    fresh.set_language("es")
    with pytest.raises(ValueError, match=r"^dim 130 no es divisible por num_heads 4$"):
        ViTConfig(dim=130, num_heads=4)
    setup("01_patches")
    report = capsys.readouterr().out.splitlines()
    assert report[0] == "dónde:       esta máquina"
    assert "modo rápido: activado" in report
    print_report(environment_report())  # notebook 00's
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("núcleos de CPU: ") for line in lines)
    assert "modo rápido:      activado" in lines  # aligned on "carpeta de datos:"
    assert dataset_info("fashion-mnist").classes[-1] == "Botín"
    assert dataset_info("cifar10").classes[0] == "avión"
    assert dataset_info("cifar100").classes[1] == "pez de acuario"
    assert dataset_info("mnist").classes[0] == "0"
    fresh.set_language("en")
    assert dataset_info("fashion-mnist").classes[-1] == "Ankle boot"
    with pytest.raises(ValueError, match=r"^dim 130 is not divisible by num_heads 4$"):
        ViTConfig(dim=130, num_heads=4)


def test_the_spanish_student_copies_say_where_to_write_in_spanish():
    copy = (ROOT / "es" / "student" / "01_patches.ipynb").read_text()
    assert "# TU CÓDIGO AQUÍ" in copy and "YOUR CODE HERE" not in copy
    assert "# YOUR CODE HERE" in (ROOT / "student" / "01_patches.ipynb").read_text()


def test_what_a_file_keeps_is_the_tables_english_class_names(fresh):
    """metrics.json's per-class scores are keyed by `table_classes`: English in any language."""
    from vitcourse.data.datasets import dataset_info, table_classes

    with fresh.speaking("es"):
        info = dataset_info("fashion-mnist-scrambled")
        assert info.classes[-1] == "Botín" and table_classes(info)[-1] == "Ankle boot"
