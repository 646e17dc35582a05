"""The course's book (book/build) as a reader sees it, in Debian's Chromium driven by Playwright.

The book is built once for the run (this file's tests and those of test_book_screens.py and
test_book_slides.py share it): in quick mode into the run's temporary folder (every notebook
executed, with small data), or, where `VITCOURSE_BOOK_HTML` names a built book's html folder, that
one (`.ci/run` builds the real book in full mode first and hands it over). It is served on
127.0.0.1, and the tests check what a reader meets:

- every page in the navigation loads with no console error, no failed request and nothing asked of
  another site (the book works offline);
- each notebook's page shows, loaded, as many images as its executed notebook has image outputs,
  and every cell that draws one gives it alt text (the notebook's cell metadata);
- no page shows a traceback, an error or anything written to stderr;
- every same-site link, image, stylesheet and script resolves (anchors included);
- the Colab links name notebooks that exist in the repository;
- axe-core finds no critical or serious accessibility violation, and every figure's alt text says
  what it shows (a sentence, not a file name).

`test_the_checks_fail_on_a_broken_page` breaks a page on purpose (an error output, a figure gone,
a dead link, a file name for alt text) and sees every check fail; `test_a_failing_cell_stops_the_
build` builds a book from a notebook whose cell raises. Needs requirements-book.txt and Chromium
(`sudo apt-get install chromium`); without them the tests are skipped, except under CI.

    pytest tests/test_book.py
"""

from __future__ import annotations

import fcntl
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.conftest import need
from vitcourse.hosting import BRANCH, REPOSITORY

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
COLAB = f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}/"
TRACEBACK = "Traceback (most recent call last)"  # a printed, caught error is a lesson; this is not

pytestmark = pytest.mark.slow


def _need_book_tools():
    need("myst_nb", "pip install -r requirements-book.txt")
    need("axe_playwright_python", "pip install -r requirements-book.txt")
    if not CHROMIUM:
        message = "the book's test needs Chromium (sudo apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message + "; under CI a missing browser is a failure")
        pytest.skip(message)


def build_book(
    folder: Path, notebooks: Path = ROOT / "notebooks", root: Path = ROOT, language: str = "en"
) -> subprocess.CompletedProcess:
    """Build the book from a copy of book/ in `folder`, in quick mode, with the package, docs/ and
    student/ of `root`; the html is in folder/book/_build/html (the Spanish edition, `language`
    "es", in html/es/, from root's es/notebooks)."""
    source = folder / "book"
    shutil.copytree(
        ROOT / "book",
        source,
        ignore=shutil.ignore_patterns("_build", "notebooks", "docs"),
        dirs_exist_ok=True,
    )
    shutil.rmtree(source / "reference", ignore_errors=True)
    env = dict(
        os.environ,
        VITCOURSE_QUICK="1",
        VITCOURSE_ROOT=str(root),
        VITCOURSE_BOOK_CACHE=str(folder / "cache"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    if language == "en":
        env["VITCOURSE_BOOK_NOTEBOOKS"] = str(notebooks)
    return subprocess.run(
        [
            "bash",
            str(source / "build"),
            *(["--language", language] if language != "en" else []),
            "-q",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    """The built book's html folder: the one `VITCOURSE_BOOK_HTML` names, or a quick build made
    once for the whole run. The three files that read the book share that build, in one process or
    in pytest-xdist's several: the first to get here builds it under a lock in the run's temporary
    folder, the others wait for it and read it (a failed build is reported to each, not retried)."""
    _need_book_tools()
    given = os.environ.get("VITCOURSE_BOOK_HTML")
    if given:
        html = Path(given).resolve()
        assert (html / "index.html").exists(), f"VITCOURSE_BOOK_HTML={given} holds no index.html"
        return html
    run = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = run.parent  # each worker's folder is in the run's
    folder, failed = run / "book", run / "book-failed.txt"
    with open(run / "book.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / "built").exists() and not failed.exists():
            for language in ("en", "es"):  # side by side: each edition links to the other
                done = build_book(folder, language=language)
                if done.returncode != 0:
                    failed.write_text(done.stdout[-3000:] + done.stderr[-3000:])
                    break
            else:
                (folder / "built").touch()
    if failed.exists():
        pytest.fail(f"the book did not build:\n{failed.read_text()}")
    return folder / "book" / "_build" / "html"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the tests report what failed; no line per request
        pass


def serve(html: Path) -> str:
    """Serve a folder on 127.0.0.1 in a thread; its address."""
    handler = functools.partial(_Quiet, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/"


def executed(html: Path, page: str) -> dict:
    """The notebook of `page` (notebooks/NN_name.html) with the outputs the book shows: the staged
    source merged with its run in the build's jupyter-cache (book/conf.py says where both are;
    _sources/ holds the student copies, the pages' downloads)."""
    import nbformat
    from jupyter_cache import get_cache

    staged = Path((html.parent / "staged-notebooks.txt").read_text())
    source = nbformat.read(staged / Path(page).with_suffix(".ipynb").name, as_version=4)
    cache = get_cache((html.parent / "execution-cache.txt").read_text())
    return cache.merge_match_into_notebook(source)[1]


def image_outputs(notebook: dict) -> int:
    return sum(
        any(mime.startswith("image/") for mime in output.get("data", {}))
        for cell in notebook["cells"]
        if cell["cell_type"] == "code"
        for output in cell.get("outputs", [])
    )


def cells_drawing_without_alt(notebook: dict) -> list[str]:
    """The ids of cells that drew a figure but carry no alt text for it (cell metadata
    mystnb.image.alt, which MyST-NB puts on the page's <img>)."""
    return [
        cell.get("id", "?")
        for cell in notebook["cells"]
        if cell["cell_type"] == "code"
        and any(any(m.startswith("image/") for m in o.get("data", {})) for o in cell["outputs"])
        and not cell["metadata"].get("mystnb", {}).get("image", {}).get("alt")
    ]


def navigation(html: Path) -> list[str]:
    """Every page the navigation reaches, from the landing page: its sidebar, and the sidebars
    of the pages it leads to (the reference's module pages)."""
    from bs4 import BeautifulSoup

    pages, queue = ["index.html"], ["index.html"]
    while queue:
        page = queue.pop()
        soup = BeautifulSoup((html / page).read_text(), "html.parser")
        for a in soup.select("nav.bd-docs-nav a.reference.internal[href]"):
            target = _resolve(page, a["href"]).split("#")[0]
            if target and target not in pages and (html / target).is_file():
                pages.append(target)
                queue.append(target)
    return pages


def _resolve(page: str, href: str) -> str:
    """A same-site href on `page`, as a path from the html folder ('' for another site)."""
    parsed = urlparse(href)
    if parsed.scheme or parsed.netloc or href.startswith(("mailto:", "javascript:")):
        return ""
    if not parsed.path:
        return f"{page}#{parsed.fragment}"
    path = os.path.normpath(os.path.join(os.path.dirname(page), unquote(parsed.path)))
    return path + (f"#{parsed.fragment}" if parsed.fragment else "")


@functools.cache
def _ids(page: Path) -> frozenset[str]:
    """The ids on a page, the anchors a link can name."""
    return frozenset(re.findall(r'\bid="([^"]+)"', page.read_text()))


def page_problems(html: Path, page: str) -> list[str]:
    """What a reader would meet on `page` that is wrong, read from its HTML: error output, a
    traceback, stderr, a dead same-site link, an image or script that is not there, an anchor
    that is nowhere, a Colab link to a notebook that does not exist, a figure without a sentence
    for alt text, and (for a notebook) fewer or more images than its executed notebook has."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup((html / page).read_text(), "html.parser")
    article = soup.select_one("article") or soup
    problems = []
    for output in article.select(".output.error, .output.traceback, .output.stderr"):
        problems.append(f"{page}: an output shows {output['class']}: {output.get_text()[:200]!r}")
    for output in article.select(".cell_output"):
        if TRACEBACK in output.get_text():
            problems.append(f"{page}: an output shows a traceback: {output.get_text()[:200]!r}")
    links = [(tag, "href") for tag in soup.select("a[href], link[href]")]
    links += [(tag, "src") for tag in soup.select("img[src], script[src]")]
    for tag, attribute in links:
        value = tag[attribute]
        if value.startswith(COLAB):
            if not (ROOT / value[len(COLAB) :]).is_file():
                problems.append(f"{page}: a Colab link names no file of the repository: {value}")
            continue
        target = _resolve(page, value)
        if not target:
            continue
        path, _, anchor = target.partition("#")
        if not (html / path).is_file():
            problems.append(f"{page}: {attribute}={value} leads nowhere")
        elif anchor and path.endswith(".html"):
            if anchor not in _ids(html / path):
                problems.append(f"{page}: {value}: {path} has no #{anchor}")
    images = article.select("img")
    for image in images:
        alt = image.get("alt", "")
        if len(alt.split()) < 5 or alt.endswith((".png", ".jpg", ".svg")):
            problems.append(f"{page}: a figure's alt text does not say what it shows: {alt!r}")
    if page.startswith("notebooks/"):
        expected = image_outputs(executed(html, page))
        if len(images) != expected:
            problems.append(f"{page}: {len(images)} images shown, its notebook has {expected}")
    return problems


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM)
        yield chromium
        chromium.close()


def browse(browser, address: str, pages: list[str]) -> dict[str, dict]:
    """Open each page; per page: console errors, failed or off-site requests, images that did
    not load, and axe-core's violations."""
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    context = browser.new_context()
    offsite = []
    context.route(
        re.compile(r"^(?!http://127\.0\.0\.1).*"),
        lambda route: (offsite.append(route.request.url), route.abort()),
    )
    seen = {}
    for page_name in pages:
        page = context.new_page()
        errors, failed = [], []
        page.on("console", lambda m, e=errors: m.type == "error" and e.append(m.text))
        page.on("pageerror", lambda exc, e=errors: e.append(str(exc)))
        page.on("response", lambda r, f=failed: r.status >= 400 and f.append(f"{r.status} {r.url}"))
        offsite.clear()
        page.goto(address + page_name, wait_until="networkidle")
        unloaded = page.eval_on_selector_all(
            "article img",
            "images => images.filter(i => !(i.complete && i.naturalWidth > 0))"
            ".map(i => i.getAttribute('src'))",
        )
        # axe's CSS preload fetches @import-ed sheets relative to the page, not to the sheet that
        # imports them (a 404 of its own making); the one rule that needs it checks orientation.
        options = {"resultTypes": ["violations"], "preload": False}
        violations = axe.run(page, options=options).response["violations"]
        seen[page_name] = {
            "errors": errors,
            "failed": failed,
            "offsite": list(offsite),
            "unloaded": unloaded,
            "critical or serious": [
                f"{v['id']} ({v['impact']})"
                for v in violations
                if v["impact"] in ("critical", "serious")
            ],
        }
        page.close()
    context.close()
    return seen


def browser_problems(seen: dict[str, dict]) -> list[str]:
    return [
        f"{page}: {what}: {found}"
        for page, report in seen.items()
        for what, found in report.items()
        if found
    ]


def both_editions(html: Path) -> list[str]:
    """Every page of the English edition's navigation, and of the Spanish edition's (in es/)."""
    return navigation(html) + [f"es/{page}" for page in navigation(html / "es")]


@pytest.fixture(scope="module")
def browsed(book, browser):
    return browse(browser, serve(book), both_editions(book))


def test_the_navigation_reaches_every_notebook_and_page(book):
    pages = navigation(book)
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for name in notebooks:
        assert f"notebooks/{Path(name).with_suffix('.html')}" in pages, name
    for page in [
        "docs/teachers.html",
        "docs/scaling.html",
        "reference.html",
        "reference/vitcourse.attention.html",
        "reference/vitcourse.checks.harness.html",
    ]:
        assert page in pages, page


def test_every_page_loads_without_a_console_error_or_a_request_elsewhere(browsed):
    assert browser_problems(browsed) == []


def test_no_page_shows_an_error_a_dead_link_or_a_figure_without_words(book):
    problems = [problem for page in navigation(book) for problem in page_problems(book, page)]
    spanish = book / "es"
    problems += [p for page in navigation(spanish) for p in page_problems(spanish, page)]
    assert problems == []


def test_both_editions_link_to_each_other_on_every_page_and_say_their_language(book):
    from bs4 import BeautifulSoup

    count = len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    for folder, lang, other in [("", "en", "es/"), ("es/", "es", "")]:
        pages = navigation(book / folder)
        assert len([p for p in pages if p.startswith("notebooks/")]) == count, lang
        for page in pages:
            soup = BeautifulSoup((book / folder / page).read_text(), "html.parser")
            assert soup.html["lang"] == lang, page
            links = soup.select("nav.other-edition a[href]")
            assert len(links) == 1, f"{folder}{page}: {len(links)} links to other editions, not 1"
            where = os.path.dirname(folder + page)
            # a notebook's page to the same notebook's, any other page to the other home page
            same = page if page.startswith("notebooks/") or page == "index.html" else "index.html"
            target = os.path.normpath(os.path.join(where, links[0]["href"]))
            assert target == os.path.normpath(other + same), (page, links[0])
            assert links[0]["hreflang"] == ("es" if lang == "en" else "en"), (page, links[0])


ENGLISH_INTERFACE = [  # the themes' and MyST-NB's words, as they come without the book's own
    "Link to this heading",
    "Toggle hidden content",
    "Toggle primary sidebar",
    "Toggle secondary sidebar",
    "Search...",
    "the vitcourse authors",
    "Descarga esta pagina",  # the book theme's Spanish, without its accent
    "Navegación de palanca",
]


def test_the_spanish_edition_speaks_spanish_in_its_interface_and_its_decks(book):
    """The buttons, tooltips, search box and footer of every Spanish page, and each Spanish deck's
    lang and title."""
    pages = [f"es/{page}" for page in navigation(book / "es")]
    english = [
        f"{page}: {words!r}"
        for page in pages
        for words in ENGLISH_INTERFACE
        if words in (book / page).read_text()
    ]
    assert not english, english[:10]
    decks = sorted((book / "es" / "slides").glob("*.slides.html"))
    assert len(decks) == len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    for deck in decks:
        text = deck.read_text()
        assert '<html lang="es">' in text and ": diapositivas</title>" in text, deck.name
    assert '<html lang="en">' in (book / "slides" / "01_patches.slides.html").read_text()


def test_each_notebook_page_shows_every_figure_its_notebook_draws(book):
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        page = f"notebooks/{path.with_suffix('.html').name}"
        notebook = executed(book, page)
        assert image_outputs(notebook) > 0, path.name
        assert cells_drawing_without_alt(notebook) == [], path.name
        assert page_problems(book, page) == []  # the page shows exactly the drawn ones


def test_every_notebook_page_links_to_itself_and_its_student_copy_on_colab(book):
    from bs4 import BeautifulSoup

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        page = book / "notebooks" / path.with_suffix(".html").name
        hrefs = [a["href"] for a in BeautifulSoup(page.read_text(), "html.parser").select("a")]
        assert f"{COLAB}notebooks/{path.name}" in hrefs, path.name
        assert f"{COLAB}student/{path.name}" in hrefs, path.name


def test_solutions_are_folded_and_the_download_is_the_student_copy(book):
    """A reader sees each exercise open and its solution folded under "Show the solution"; the
    page's .ipynb download is the student copy (the exercises to do, no solution)."""
    from bs4 import BeautifulSoup

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        solutions = [
            "".join(cell["source"])
            for cell in json.loads(path.read_text())["cells"]
            if cell["cell_type"] == "code" and "### BEGIN SOLUTION" in "".join(cell["source"])
        ]
        page = book / "notebooks" / path.with_suffix(".html").name
        soup = BeautifulSoup(page.read_text(), "html.parser")
        folded = [d for d in soup.select("details") if "Show the solution" in d.get_text()]
        assert len(folded) == len(solutions), path.name
        for solution, details in zip(solutions, folded, strict=True):
            body = solution.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
            code = [x.split("#")[0].strip() for x in body.splitlines()]
            line = next(x for x in code if x)  # its first line of code, comments left out
            assert line in details.get_text(), (path.name, line)  # the solution, folded
        for pre in soup.select("div.cell_input pre, div.highlight-python pre"):
            inside = pre.find_parent("details")
            if "### BEGIN SOLUTION" in pre.get_text():
                assert inside is not None, (path.name, pre.get_text()[:80])
        link = soup.select_one('a[href$="_sources/notebooks/' + path.name + '"]')
        assert link is not None, f"{path.name}: no .ipynb download"
        download = (page.parent / link["href"]).resolve()
        assert download.read_bytes() == (ROOT / "student" / path.name).read_bytes(), path.name
        assert "### BEGIN SOLUTION" not in download.read_text()


def test_code_has_a_copy_button_and_the_theme_follows_the_readers_system(book, browser):
    page_name = "notebooks/03_attention.html"
    context = browser.new_context(color_scheme="dark", viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(serve(book) + page_name, wait_until="networkidle")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    buttons = page.eval_on_selector_all("div.cell_input button.copybtn", "b => b.length")
    inputs = page.eval_on_selector_all("div.cell_input", "c => c.length")
    assert buttons == inputs > 0  # one on every code cell...
    assert page.eval_on_selector_all("div.cell_output button.copybtn", "b => b.length") == 0
    context.close()
    context = browser.new_context(color_scheme="light")
    page = context.new_page()
    page.goto(serve(book) + page_name, wait_until="networkidle")
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    context.close()


def test_code_and_outputs_fit_the_column_and_outputs_name_no_build_folder(book, browser):
    """At 1280 pixels a line of the course's code (100 characters at most) fits the column; an
    output wraps rather than scroll, at any width; no output names the folder the book was built
    in."""
    from bs4 import BeautifulSoup

    address = serve(book)
    measure = """() => {
      const over = e => e.scrollWidth > e.clientWidth + 1;
      const longest = e => Math.max(...e.textContent.split('\\n').map(l => l.length));
      return {
        inputs: [...document.querySelectorAll('article div.cell_input pre')]
          .filter(e => over(e) && longest(e) <= 100).length,
        outputs: [...document.querySelectorAll('article div.cell_output pre')]
          .filter(over).length,
      };
    }"""
    for width in (1280, 390):
        context = browser.new_context(viewport={"width": width, "height": 900})
        for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
            page = context.new_page()
            page.goto(address + f"notebooks/{path.with_suffix('.html').name}")
            found = page.evaluate(measure)
            assert found["outputs"] == 0, (width, path.name, found)
            if width == 1280:
                assert found["inputs"] == 0, (width, path.name, found)
            page.close()
        context.close()
    for page in sorted((book / "notebooks").glob("*.html")):
        article = BeautifulSoup(page.read_text(), "html.parser").select_one("article")
        outputs = " ".join(o.get_text() for o in article.select(".cell_output"))
        assert str(ROOT) not in outputs, page.name


def test_the_checks_fail_on_a_broken_page(book, browser, tmp_path):
    site = tmp_path / "html"
    shutil.copytree(book, site)
    for record in ("execution-cache.txt", "staged-notebooks.txt"):
        shutil.copy(book.parent / record, site.parent / record)
    page = "notebooks/03_attention.html"
    assert page_problems(site, page) == []
    text = (site / page).read_text()
    for _ in range(2):  # two figures gone (one broken image is added below)
        first = text.index("<img")
        text = text[:first] + text[text.index(">", first) + 1 :]
    broken = (
        '<div class="cell_output docutils container"><div class="output traceback highlight-'
        'ipythontb notranslate"><pre>Traceback (most recent call last):\nValueError: shapes'
        "</pre></div></div>"
        '<a href="no_such_page.html">a dead link</a>'
        '<a href="01_patches.html#no-such-section">a dead anchor</a>'
        f'<a href="{COLAB}notebooks/99_missing.ipynb">Colab</a>'
        '<img alt="../_images/figure.png" src="../_static/no_such.png">'
        "<script>console.error('broken on purpose')</script>"
    )
    text = text.replace("</article>", broken + "</article>", 1)
    (site / page).write_text(text)
    found = "\n".join(page_problems(site, page))
    for expected in [
        "traceback",
        "no_such_page.html leads nowhere",
        "has no #no-such-section",
        "99_missing.ipynb",
        "alt text does not say",
        "images shown",
        "no_such.png leads nowhere",
    ]:
        assert expected in found, expected
    seen = browse(browser, serve(site), [page])[page]
    assert "broken on purpose" in seen["errors"]
    assert any("no_such.png" in url for url in seen["failed"])
    assert seen["unloaded"] == ["../_static/no_such.png"]


def test_a_failing_cell_stops_the_build(tmp_path):
    _need_book_tools()
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    source = json.loads((ROOT / "notebooks" / "04_transformer_block.ipynb").read_text())
    source["cells"] = source["cells"][:1] + [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "broken",
            "metadata": {},
            "outputs": [],
            "source": "raise ValueError('broken on purpose')",
        }
    ]
    (notebooks / "04_transformer_block.ipynb").write_text(json.dumps(source))
    done = build_book(tmp_path, notebooks)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "04_transformer_block" in said and "broken on purpose" in said, said[-3000:]


def test_a_docstring_sphinx_cannot_read_stops_the_build(tmp_path):
    """The package's reference is part of the book: a docstring that is not valid reStructuredText
    (here an indented line after a paragraph, which Sphinx would render as a run-on quote) fails
    the build, naming the module, as any other Sphinx warning does."""
    _need_book_tools()
    course = tmp_path / "course"
    for folder in ("vitcourse", "docs", "student"):
        shutil.copytree(
            ROOT / folder, course / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    with (course / "vitcourse" / "training" / "clock.py").open("a") as module:
        module.write(
            '\n\ndef badly_written():\n    """Two lines:\n    one,\n        then one indented."""\n'
        )
    notebooks = tmp_path / "notebooks"  # every notebook, cut to its title: the book is whole
    notebooks.mkdir()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        source = json.loads(path.read_text())
        source["cells"] = source["cells"][:1]
        (notebooks / path.name).write_text(json.dumps(source))
    done = build_book(tmp_path, notebooks, root=course)
    said = done.stdout + done.stderr
    problems = [line for line in said.splitlines() if "WARNING:" in line or "ERROR:" in line]
    assert done.returncode != 0, said[-3000:]
    assert len(problems) == 1, problems  # the build is clean but for the bad docstring
    assert "vitcourse.training.clock.badly_written" in problems[0], problems
    assert "Unexpected indentation" in problems[0], problems


def test_notebook_06s_page_shows_a_run_of_fixed_passes_and_says_so(book):
    """A time budget would make the page depend on how busy the build machine was: the book's
    copy of notebook 06 trains for a fixed number of passes, and the page says so."""
    from bs4 import BeautifulSoup

    page = book / "notebooks" / "06_training.html"
    text = BeautifulSoup(page.read_text(), "html.parser").get_text()
    if quick_build(book):  # quick mode's one pass, said so, and the book's 7 passes named
        assert "In this quick build the model trains for one short pass" in text
        assert "quick mode: one short pass over a few images, one point a curve" in text
    else:
        assert "On this page the model trains for 7 passes over the training images" in text
    assert "TrainConfig(epochs=7)" in text
    assert "TrainConfig(minutes=MINUTES)" not in text


def quick_build(html: Path) -> bool:
    """Whether the edition in `html` was built in quick mode: its home page says so. (.ci/run
    builds the English edition in full mode and the Spanish one in quick mode.)"""
    home = (html / "index.html").read_text()
    return "this is a quick build" in home or "esta es una construcción rápida" in home


def test_a_quick_build_says_so_on_every_page_and_a_full_build_nowhere(book):
    """The theme's banner on every page of a quick build, in the edition's language, and the home
    page's sentence on how its notebooks ran true of the build, quick or full."""
    from bs4 import BeautifulSoup

    editions = [
        (book, "A quick build:", "as a learner runs it, in {} mode"),
        (book / "es", "Una construcción rápida:", "como lo ejecuta un estudiante, en modo {}"),
    ]
    for html, banner, said in editions:
        home = " ".join(
            BeautifulSoup((html / "index.html").read_text(), "html.parser").text.split()
        )
        modes = ("quick", "full") if html == book else ("rápido", "completo")
        quick = quick_build(html)
        assert said.format(modes[0]) in home if quick else said.format(modes[1]) in home
        for page in navigation(html):
            shown = banner in (html / page).read_text()
            assert shown == quick, f"{page}: banner {'missing' if quick else 'on a full build'}"


def test_every_notebook_page_shows_its_questions_and_they_answer_by_keyboard(book, browser):
    """Each notebook's page holds each of its questions once, as HTML (not a widget, which a page
    without a kernel cannot draw); on notebook 03's page in both editions a choice and a shape are
    answered wrongly, then rightly, with the keyboard, and each feedback read (no request leaves
    the page: `test_every_page_loads_without_a_console_error_or_a_request_elsewhere`)."""
    from bs4 import BeautifulSoup

    from vitcourse.language import _ as translated
    from vitcourse.language import speaking
    from vitcourse.quiz.questions import LETTERS, notebooks, questions

    for edition in ("", "es/"):
        for name in notebooks():
            soup = BeautifulSoup(
                (book / edition / "notebooks" / f"{name}.html").read_text(), "html.parser"
            )
            shown = [div["id"] for div in soup.select("div.vitcourse-quiz")]
            assert sorted(shown) == sorted(f"quiz-{name}-{q}" for q in questions(name)), (
                edition,
                name,
            )
            assert "widget-view" not in str(soup) and "Loading widget" not in soup.get_text()
    address = serve(book)
    asked = questions("03_attention")
    choice = next(q for q in asked.values() if q.kind == "choice" and q.right_letter != "a")
    shape = next(q for q in asked.values() if q.kind == "shape")
    for edition, code in (("", "en"), ("es/", "es")):
        page = browser.new_page()
        page.goto(f"{address}{edition}notebooks/03_attention.html", wait_until="networkidle")
        with speaking(code):
            said = {
                letter: translated(o.feedback)
                for letter, o in zip(LETTERS, choice.options, strict=False)
            }
            wrong_word = translated("Not quite.")
            shape_said = translated(shape.mistakes[0][1]), translated(shape.right)
        where = f"#quiz-03_attention-{choice.id}"
        page.focus(f"{where} input[value=a]")
        page.keyboard.press("Space")
        feedback = page.inner_text(f"{where} .vitcourse-quiz-feedback")
        assert feedback.startswith(f"✗ {wrong_word}") and said["a"].split("`")[0] in feedback
        for _ in range(LETTERS.index(choice.right_letter)):
            page.keyboard.press("ArrowDown")
        feedback = page.inner_text(f"{where} .vitcourse-quiz-feedback")
        # A right answer's feedback opens with its own "Right:" ("Correcto:"), after the ✓.
        assert feedback.startswith("✓ " + said[choice.right_letter].split("`")[0])
        where = f"#quiz-03_attention-{shape.id}"
        page.focus(f"{where} input[type=text]")
        page.keyboard.type(str(tuple(shape.mistakes[0][0])))
        page.keyboard.press("Enter")
        assert shape_said[0].split("`")[0] in page.inner_text(f"{where} .vitcourse-quiz-feedback")
        page.fill(f"{where} input[type=text]", str(tuple(shape.answer)))
        page.keyboard.press("Enter")
        feedback = page.inner_text(f"{where} .vitcourse-quiz-feedback")
        assert feedback.startswith("✓ " + shape_said[1].split("`")[0])
        page.close()
