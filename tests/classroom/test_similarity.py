"""vitcourse.classroom.similarity: what similar.md compares of a submission, read as text (never
run) in a process of its own under limits, and the attacks that once stalled it (issue 48): a
notebook of 1,500 defining cells, answers too deep or too long, a copy behind a full-width letter,
colluders padding their answers."""

import json
import time

import pytest

from tests.conftest import need
from vitcourse.classroom import gradebook, similarity

NAMES = ["patchify", "unpatchify"]  # notebook 01's exercises


@pytest.mark.parametrize(
    "source",
    [
        "patchify = " + "+".join(["1"] * 5000),  # too deep for Python's parser
        "patchify = [" + "0," * 200_000 + "]",  # too long to compare
        "def patchify(x, p):\n" + "    " * 1 + "return " + "(" * 300 + "x" + ")" * 300,
    ],
    ids=["deep", "long", "nested"],
)
def test_answers_too_deep_or_too_long_are_not_parsed(source):
    nb = {"cells": [{"cell_type": "code", "source": source, "metadata": {}, "outputs": []}]}
    start = time.monotonic()
    found = similarity.answers(json.dumps(nb).encode(), NAMES)
    assert found.get("patchify") is None or len(found["patchify"]) <= similarity.MAX_ANSWER_CHARS
    assert time.monotonic() - start < 5
    assert similarity.answers(b"[" * 50_000 + b"]" * 50_000, NAMES) == {}


def _notebook(*sources: str) -> bytes:
    cells = [{"cell_type": "code", "source": s, "metadata": {}, "outputs": []} for s in sources]
    return json.dumps({"cells": cells}).encode()


def test_identifiers_are_compared_as_python_reads_them():
    """`def ｐatchify` (a full-width first letter) defines `patchify` (Python reads identifiers in
    NFKC): a copy hidden that way is the same answer in similar.md."""
    need("copydetect", "pip install -r requirements-teachers.txt")
    original = "def patchify(images, size):\n    return images.unfold(2, size, size).flatten(2)\n"
    hidden = original.replace("def patchify(images", "def \uff50atchify(ｉmages").replace(
        "return images", "return ｉmages"
    )
    found = {
        (student, "patchify"): similarity.answers(_notebook(source), NAMES)["patchify"]
        for student, source in (("ann", original), ("ben", hidden))
    }
    assert gradebook.alike(found) == ["patchify: ann, ben (identical)"]


def test_answers_are_read_in_a_process_of_their_own_under_limits(monkeypatch):
    """The grader reads a submission's answers in a child process: the same answers as reading
    them here; none from a child that breaks its limits (here, too little memory to start)."""
    data = _notebook("def patchify(x, p):\n    return x.flatten(2)\n", "x = 1\n")
    assert similarity.read_apart(data, NAMES) == similarity.answers(data, NAMES)
    assert set(similarity.read_apart(data, NAMES)) == {"patchify"}
    assert similarity.read_apart(data, []) == {}
    monkeypatch.setattr(similarity, "MEMORY_GB", 0.01)
    assert similarity.read_apart(data, NAMES) == {}


def test_only_the_last_defining_cell_is_parsed(monkeypatch):
    """1,500 cells that each define patchify cost one parse, not 1,500: the grader keeps the
    last one, and so does the comparison."""
    parsed = []
    normalised = similarity.normalised
    monkeypatch.setattr(similarity, "normalised", lambda s, n: parsed.append(n) or normalised(s, n))
    cells = [f"def patchify(x, p):\n    return x * {i}\n" for i in range(1500)]
    found = similarity.answers(_notebook(*cells), NAMES)
    assert parsed == ["patchify"]
    assert found["patchify"] == normalised(cells[-1], "patchify")


def test_padded_answers_are_compared_by_their_fingerprints():
    """Two colluders whose answers carry the same unused 19,600-character string are grouped; a
    different answer carrying the same padding is not grouped with them."""
    need("copydetect", "pip install -r requirements-teachers.txt")
    pad = "    unused = '" + "".join(chr(97 + (i * 7919) % 26) for i in range(19_600)) + "'\n"
    one = "def patchify(x, p):\n" + pad + "    return x.unfold(2, p, p).unfold(3, p, p)\n"
    two = "def patchify(img, s):\n" + pad + "    return img.unfold(2, s, s).unfold(3, s, s)\n"
    other = "def patchify(x, p):\n" + pad.replace("unused", "spare")[:9_000] + "'\n"
    other += "    B, C, H, W = x.shape\n    return x.reshape(B, C, H // p, p, W // p, p)\n"
    answers = {
        (student, "patchify"): similarity.normalised(source, "patchify")
        for student, source in (("ann", one), ("ben", two), ("cat", other))
    }
    assert gradebook.alike(answers) == ["patchify: ann, ben (identical)"]
    # winnowing keeps a few fingerprints per window of characters: far fewer than the answer's
    assert len(gradebook.fingerprints(answers[("ann", "patchify")])) < len(one) / 3
