"""What a learner reads in a cell, cut into pieces (vitcourse.translation.cells), and put back."""

import io
import json
import re
import tokenize
from pathlib import Path

import pytest

from vitcourse.translation.cells import MAGIC, pieces, translated

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

CODE = '''\
import matplotlib.pyplot as plt

# The race, two lines of comment
# that are one piece.
KINDS = ("CNN", "ViT distilled")  # keys of the saved results: not shown as they are
results = {"ViT distilled": 0.5}
if kind == "ViT distilled":
    print(f"{kind:<17} reached {acc:.1%} after {n} passes")
fig, ax = plt.subplots()
ax.set_title("the image")
ax.plot(x, y, label="validation accuracy")
titles = ["std of the tokens", "gradient norm"]
path = Path("runs") / "race.json"


def race(kind):
    """Train one model for the budget."""
    raise ValueError("no such model: " + kind)


labels = {"ViT distilled": "ViT, distilled"}  # the keys are code, the values are shown
assert n > 0, "no images to train on"
print_table(["model", "test acc"], rows)
print(f"{'model':<8}")  # inside a field: code
print(f"{f'{n}x{n}':>7} done")  # an f-string inside a field, too (Python 3.12 tokenizes it)
for row, (label, f, key) in enumerate([("first convolution", conv, "conv"), ("blocks", vit, "b")]):
    pass
'''


def cell(source: str, kind: str = "code", **metadata) -> dict:
    return {"cell_type": kind, "id": "c1", "metadata": metadata, "source": source,
            "outputs": [], "execution_count": None}  # fmt: skip


def test_a_code_cell_gives_its_comments_and_the_strings_a_learner_reads():
    found = [(p.kind, p.text) for p in pieces(cell(CODE))]
    assert found == [
        ("comment", "The race, two lines of comment\nthat are one piece."),
        ("comment", "keys of the saved results: not shown as they are"),
        ("string", "{kind:<17} reached {acc:.1%} after {n} passes"),
        ("string", "the image"),
        ("string", "validation accuracy"),
        ("string", "std of the tokens"),
        ("string", "gradient norm"),
        ("string", "Train one model for the budget."),
        ("string", "no such model: "),
        ("string", "ViT, distilled"),
        ("comment", "the keys are code, the values are shown"),
        ("string", "no images to train on"),
        ("string", "model"),
        ("string", "test acc"),
        ("comment", "inside a field: code"),
        ("string", "{f'{n}x{n}':>7} done"),
        ("comment", "an f-string inside a field, too (Python 3.12 tokenizes it)"),
        ("string", "first convolution"),
        ("string", "blocks"),
    ]  # not the keys "ViT distilled", "CNN", nor "runs" or "race.json", nor the field's 'model'


def test_putting_translations_back_changes_only_comments_and_string_text():
    spanish = {
        "The race, two lines of comment\nthat are one piece.": "La carrera, en un comentario\n"
        "de tres líneas\nque es una pieza.",
        "{kind:<17} reached {acc:.1%} after {n} passes": "{kind:<17} llegó a {acc:.1%} tras {n}",
        "the image": "la imagen",
        "{f'{n}x{n}':>7} done": "{f'{n}x{n}':>7} hecho",
    }
    new = translated(cell(CODE), lambda p: spanish.get(p.text, p.text.upper()))["source"]
    assert "# La carrera, en un comentario\n# de tres líneas\n# que es una pieza.\n" in new
    assert 'print(f"{kind:<17} llegó a {acc:.1%} tras {n}")' in new
    assert 'ax.set_title("la imagen")' in new
    assert 'KINDS = ("CNN", "ViT distilled")  # KEYS OF THE SAVED RESULTS' in new
    assert '"""TRAIN ONE MODEL FOR THE BUDGET."""' in new
    assert skeleton(new) == skeleton(CODE)


def test_an_inline_comment_stays_on_its_line():
    with pytest.raises(ValueError, match="inline comment"):
        translated(cell("x = 1  # one\n"), lambda p: "uno\ndos")


def test_markers_magics_and_alt_text():
    source = (
        "%pip install -q timm  # not read: a shell line\n"
        "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
        "print('shape:', x.shape)\n"
    )
    alt = {"mystnb": {"image": {"alt": "A line chart of the loss."}}}
    found = pieces(cell(source, **alt))
    assert [(p.kind, p.text) for p in found] == [("string", "shape:"),
                                                 ("alt", "A line chart of the loss.")]  # fmt: skip
    new = translated(
        cell(source, **alt), lambda p: {"shape:": "forma:"}.get(p.text, "Una gráfica.")
    )
    assert new["metadata"]["mystnb"]["image"]["alt"] == "Una gráfica."
    assert "print('forma:', x.shape)" in new["source"] and "### BEGIN SOLUTION" in new["source"]
    markdown = cell("# 01 · Patches\n\nText.", "markdown")
    assert [p.text for p in pieces(markdown)] == ["# 01 · Patches\n\nText."]
    assert translated(markdown, lambda p: "# 01 · Patches\n\nTexto.")["source"].endswith("Texto.")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_course_cell_comes_back_whole(path):
    """Each piece put back as it was gives the cell as it was: nothing is lost or moved."""
    for c in json.loads(path.read_text())["cells"]:
        source = "".join(c["source"])
        assert translated(c, lambda p: p.text)["source"] == source


def skeleton(source: str) -> list:
    """A cell's code without its comments and its strings' text: its tokens, each string reduced
    to the {...} fields it formats (tests/translation/test_cli.py compares the editions' code)."""
    plain = "\n".join(MAGIC.sub(r"\1", line) for line in source.split("\n"))
    tokens = []
    for token in tokenize.generate_tokens(io.StringIO(plain).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
            continue
        if token.type == tokenize.STRING:
            tokens.append(("STRING", tuple(re.findall(r"\{[^{}]*\}", token.string))))
        else:
            tokens.append(token.string)
    return tokens
