"""What a learner reads in a notebook's cell, cut into the pieces a translator translates.

- A markdown cell is one piece: its whole text (a cell is a few paragraphs at most, and its
  Markdown, links and equations stay together for the translator).
- A code cell's pieces are what a learner reads in it, never its code: each comment (a block of
  full-line comments is one piece; `### BEGIN SOLUTION` and its kin are markers, not prose), and
  each string a learner sees: one printed, drawn as a title or label, raised in an error, shown
  as Markdown, an assertion's message, a docstring, a list of titles or labels, or the values of
  a dict of labels (`labels = {"ViT": "ViT from scratch"}`: its keys are code's), or the labels a
  loop takes from a list (`for label, loader in [("training images", train), ...]`: the strings
  where the target's name says label or title). A string inside
  an f-string's `{...}` is code, not text. Strings the code uses as keys or names
  (`"ViT distilled"` in notebook 09 is both a label and a key of the shipped results) are left.
- A figure's alt text (the cell's `mystnb.image.alt`, which the book puts on the image).

`translated(cell, lookup)` puts a translation in place of each piece. A code cell keeps its code
token for token: only comments and the text inside the quotes of the strings above change
(tests/translation/test_cells.py compares the two cells' syntax trees with those emptied).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

SHOWN_BY = {  # calls whose string arguments a learner reads
    "print", "display", "Markdown", "warn", "set_title", "set_xlabel", "set_ylabel", "suptitle",
    "title", "xlabel", "ylabel", "text", "annotate", "legend", "set_text", "colorbar",
    "print_table",
}  # fmt: skip
SHOWN_AS = {"label", "title", "xlabel", "ylabel", "description", "help"}  # keyword arguments
NAMED_AS_SHOWN = re.compile(r"(title|label|caption|panel)s?$")  # titles = [...] shown later
MARKER = re.compile(r"#+\s*(BEGIN|END) (SOLUTION|HIDDEN TESTS)|#+\s*YOUR CODE HERE|# noqa|# fmt:")
MAGIC = re.compile(r"^(\s*)[%!].*")


@dataclass(frozen=True)
class Piece:
    """One thing to translate: its English `text`, what it is (`kind`), and where it is."""

    text: str
    kind: str  # "markdown", "comment", "string", "alt"
    start: tuple[int, int] = (0, 0)  # (line, column) of its source, from 1 and 0; code only
    end: tuple[int, int] = (0, 0)
    prefix: str = ""  # a string's prefix and quotes, or a comment's "# " and indentation
    suffix: str = ""


def pieces(cell: dict) -> list[Piece]:
    """What a learner reads in `cell`, in order."""
    source = _source(cell)
    found = []
    if cell["cell_type"] == "markdown":
        found = [Piece(source, "markdown")] if source.strip() else []
    elif cell["cell_type"] == "code":
        found = _comments(source) + _strings(source)
        found.sort(key=lambda piece: piece.start)
    alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt")
    if alt:
        found.append(Piece(alt, "alt"))
    return found


def translated(cell: dict, lookup) -> dict:
    """`cell` with each piece replaced by `lookup(piece)` (a str in the piece's form: for a
    string, the text between its quotes as written in code; for a comment, lines of text)."""
    new = {**cell, "metadata": dict(cell.get("metadata", {}))}
    source = _source(cell)
    found = pieces(cell)
    if cell["cell_type"] == "markdown":
        new["source"] = lookup(found[0]) if found and found[0].kind == "markdown" else source
    elif cell["cell_type"] == "code":
        new["source"] = _replace(source, [p for p in found if p.kind != "alt"], lookup)
    for piece in found:
        if piece.kind == "alt":
            mystnb = dict(new["metadata"]["mystnb"])
            mystnb["image"] = {**mystnb["image"], "alt": lookup(piece)}
            new["metadata"]["mystnb"] = mystnb
    return new


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return source if isinstance(source, str) else "".join(source)


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    """The cell's tokens; IPython's `%magic` and `!shell` lines read as nothing."""
    plain = "\n".join(MAGIC.sub(r"\1", line) for line in source.split("\n"))
    return list(tokenize.generate_tokens(io.StringIO(plain).readline))


def _comments(source: str) -> list[Piece]:
    """Each comment, a block of full-line comments at one indentation as one piece."""
    lines = source.split("\n")
    found: list[Piece] = []
    for token in _tokens(source):
        if token.type != tokenize.COMMENT or MARKER.match(token.string):
            continue
        row, col = token.start
        text = re.sub(r"^#+ ?", "", token.string)
        full_line = not lines[row - 1][:col].strip()
        last = found[-1] if found else None
        if (
            full_line
            and last
            and last.suffix == "block"
            and last.end[0] == row - 1
            and last.start[1] == col
        ):
            found[-1] = Piece(
                last.text + "\n" + text, "comment", last.start, token.end, last.prefix, "block"
            )
        else:
            prefix = token.string[: len(token.string) - len(token.string.lstrip("#"))] + " "
            found.append(
                Piece(
                    text,
                    "comment",
                    token.start,
                    token.end,
                    prefix,
                    "block" if full_line else "inline",
                )
            )
    return found


def _strings(source: str) -> list[Piece]:
    """Each string token a learner reads (see the module's docstring)."""
    plain = "\n".join(MAGIC.sub(r"\1pass", line) for line in source.split("\n"))
    try:
        tree = ast.parse(plain)
    except SyntaxError:
        return []
    spans = [_span(node, plain) for node in _shown(tree)]
    found = []
    for start, end, text in _string_tokens(source):
        if any(a <= start and end <= b for a, b in spans):
            match = re.match(r"(?is)^([rbuf]*)('''|\"\"\"|'|\")(.*)\2$", text)
            if match and re.search(r"[A-Za-z]{2}", re.sub(r"\{[^}]*\}", "", match[3])):
                prefix = match[1] + match[2]
                found.append(Piece(match[3], "string", start, end, prefix, match[2]))
    return found


def _shown(tree: ast.AST) -> list[ast.AST]:
    """The string nodes (or the nodes holding them) whose text a learner reads."""
    shown: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in SHOWN_BY:
                shown += [_text_of(arg) for arg in node.args]
            shown += [_text_of(k.value) for k in node.keywords if k.arg in SHOWN_AS]
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            shown += [_text_of(arg) for arg in node.exc.args]
        elif isinstance(node, ast.Assert) and node.msg is not None:
            shown.append(_text_of(node.msg))
        elif isinstance(node, ast.For):
            shown += _looped_labels(node.target, node.iter)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(node):
            shown.append(node.body[0].value)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and NAMED_AS_SHOWN.search(t.id.lower()) for t in node.targets
        ):
            is_dict = isinstance(node.value, ast.Dict)
            shown += node.value.values if is_dict else [node.value]
    return [node for node in shown if node is not None]


def _looped_labels(target: ast.AST, values: ast.AST) -> list[ast.AST]:
    """In `for label, loader in [("a", x), ("b", y)]` (or `enumerate([...])`), the strings taken
    by a target named like a label or a title: "a" and "b"."""
    if isinstance(values, ast.Call) and getattr(values.func, "id", "") == "enumerate":
        if isinstance(target, ast.Tuple) and len(target.elts) == 2 and values.args:
            return _looped_labels(target.elts[1], values.args[0])
        return []
    if not isinstance(target, ast.Tuple) or not isinstance(values, (ast.List, ast.Tuple)):
        return []
    found = []
    for i, name in enumerate(target.elts):
        if isinstance(name, ast.Name) and NAMED_AS_SHOWN.search(name.id.lower()):
            found += [
                row.elts[i]
                for row in values.elts
                if isinstance(row, ast.Tuple) and len(row.elts) == len(target.elts)
            ]
    return found


def _text_of(node: ast.AST) -> ast.AST | None:
    """The part of an argument that is text: the argument, unless it is a call of something
    else (`print(len(x))`), whose own arguments are not shown as they are."""
    if isinstance(node, ast.Call) and not (
        isinstance(node.func, ast.Attribute) and node.func.attr == "format"
    ):
        return None
    return node


def _span(node: ast.AST, source: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """A node's (line, column) start and end, in characters (ast counts UTF-8 bytes)."""
    lines = source.split("\n")

    def chars(row: int, byte: int) -> int:
        return len(lines[row - 1].encode()[:byte].decode(errors="ignore"))

    return (
        (node.lineno, chars(node.lineno, node.col_offset)),
        (node.end_lineno, chars(node.end_lineno, node.end_col_offset)),
    )


def _string_tokens(source: str) -> list[tuple[tuple[int, int], tuple[int, int], str]]:
    """Each string literal's start, end and source text: an f-string in one piece, what its
    `{...}` fields hold included (Python 3.12+'s tokenizer cuts an f-string up, and gives the
    strings inside its fields as tokens of their own: they are code, as on 3.11)."""
    found, opened, depth = [], None, 0
    for token in _tokens(source):
        kind = tokenize.tok_name[token.type]
        if kind == "STRING" and depth == 0:
            found.append((token.start, token.end, token.string))
        elif kind == "FSTRING_START":
            opened, depth = (token.start if depth == 0 else opened), depth + 1
        elif kind == "FSTRING_END":
            depth -= 1
            if depth == 0:
                found.append((opened, token.end, _cut(source, opened, token.end)))
    return found


def _cut(source: str, start: tuple[int, int], end: tuple[int, int]) -> str:
    lines = source.split("\n")
    if start[0] == end[0]:
        return lines[start[0] - 1][start[1] : end[1]]
    middle = lines[start[0] : end[0] - 1]
    return "\n".join([lines[start[0] - 1][start[1] :], *middle, lines[end[0] - 1][: end[1]]])


def _replace(source: str, found: list[Piece], lookup) -> str:
    """The source with each piece's text replaced, last first (so positions hold)."""
    lines = source.split("\n")
    for piece in sorted(found, key=lambda p: p.start, reverse=True):
        text = lookup(piece)
        (row, col), (end_row, end_col) = piece.start, piece.end
        if piece.kind == "comment":
            indent = " " * col if piece.suffix == "block" else ""
            if piece.suffix == "inline" and "\n" in text:
                raise ValueError(f"an inline comment's translation has a line break: {text!r}")
            new = ("\n" + indent).join(piece.prefix + line for line in text.split("\n"))
        else:
            new = piece.prefix + text + piece.suffix
        before, after = lines[row - 1][:col], lines[end_row - 1][end_col:]
        lines[row - 1 : end_row] = (before + new + after).split("\n")
    return "\n".join(lines)
