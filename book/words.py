"""The book's own words, in each language it is built in (`book/build --language es`): the lines
it adds to a notebook's page (the links under the title, the note under an explorer, the exercise
as the student copy has it, notebook 06's fixed passes) and the links to the other editions.

A language in WORDS is an edition of the book: English at the top of the site, every other
language in a folder of its own (html/es/). Every page links to every other edition
(`other_editions`). docs/maintainers.md, "A new language", says what a third one needs.
"""

WORDS = {
    "en": {
        "title": "vitcourse: build a Vision Transformer, step by step",
        "authors": "the vitcourse authors",
        "slides": "slides",
        "links": "**Run it:** [this notebook on Colab]({teacher}) · [the student copy on Colab]"
        "({student}) (the exercises open; this page folds the solutions) · on your machine, "
        "`jupyter lab {folder}/{name}` ([set-up](../index.md#run-it-on-your-machine)). "
        '**Teach it:** <a href="../{deck}">the slides</a> '
        "([teaching with slides](../docs/teachers.md#teaching-with-slides))",
        "explorer": "*The book shows this explorer's first view: the figure drawn by the cell "
        "above. In JupyterLab or on Colab the cell opens it with its sliders, and moving them "
        "redraws the figure.*",
        "exercise": "*The exercise, as in the student copy:*",
        "show": "Show the solution",
        "hide": "Hide the solution",
        "fixed": "*On this page the model trains for {epochs} passes over the training images "
        "(`TrainConfig(epochs={epochs})`) instead of for `MINUTES` minutes, so that the page "
        "shows a run of the same length whichever machine built the book. Your copy trains for "
        "the time budget.*",
        "fixed_quick": "*In this quick build the model trains for one short pass over a few images "
        "(quick mode's `TrainConfig(epochs=1)`): its curves have a point each, and its numbers "
        "say nothing of the model. The course's book trains it for {epochs} passes over the "
        "training images (`TrainConfig(epochs={epochs})`) instead of for `MINUTES` minutes; your "
        "copy trains for the time budget.*",
        # The link to this edition from the others, in its own language. A notebook's page links
        # to the same notebook there, any other page to its home page.
        "edition": "The course in English",
        # The words of the buttons the book's own templates draw (book/_templates/).
        "interface": {
            "primary": "Show or hide the chapters",
            "secondary": "Show or hide this page's sections",
            "search": "Search...",
            "folded": "Toggle hidden content",
        },
        # On every page of a quick build (the theme's announcement banner), and the home page's
        # sentence on how its notebooks ran ({{ run_mode }} in index.md): true of the build.
        "quick": "A quick build: each notebook ran in quick mode (a few images, one short pass), "
        "so its numbers and figures are not the course's. The course's book is built in full "
        "mode.",
        "run_mode": {
            "full": "in full mode",
            "quick": "in quick mode (a few images, one short pass: this is a quick build)",
        },
    },
    "es": {
        "title": "vitcourse: construye un Vision Transformer paso a paso",
        "authors": "los autores de vitcourse",
        "slides": "diapositivas",
        "links": "**Ejecútalo:** [este cuaderno en Colab]({teacher}) · [la copia del estudiante "
        "en Colab]({student}) (con los ejercicios abiertos; esta página pliega las soluciones) · "
        "en tu máquina, `jupyter lab {folder}/{name}` "
        "([instalación](../index.md#en-tu-maquina)). "
        '**Enséñalo:** <a href="../{deck}">las diapositivas</a>',
        "explorer": "*El libro muestra la primera vista de este explorador: la figura que dibuja "
        "la celda de arriba. En JupyterLab o en Colab la celda lo abre con sus controles, y al "
        "moverlos se vuelve a dibujar la figura.*",
        "exercise": "*El ejercicio, como en la copia del estudiante:*",
        "show": "Mostrar la solución",
        "hide": "Ocultar la solución",
        "fixed": "*En esta página el modelo se entrena {epochs} pasadas sobre las imágenes de "
        "entrenamiento (`TrainConfig(epochs={epochs})`) en lugar de `MINUTES` minutos, para que "
        "la página muestre una ejecución de la misma duración sea cual sea la máquina que "
        "construyó el libro. Tu copia se entrena con el presupuesto de tiempo.*",
        "fixed_quick": "*En esta construcción rápida el modelo se entrena una pasada corta sobre "
        "pocas imágenes (`TrainConfig(epochs=1)` del modo rápido): sus curvas tienen un punto "
        "cada una, y sus números no dicen nada del modelo. El libro del curso lo entrena {epochs} "
        "pasadas sobre las imágenes de entrenamiento (`TrainConfig(epochs={epochs})`) en lugar "
        "de `MINUTES` minutos; tu copia se entrena con el presupuesto de tiempo.*",
        "edition": "El curso en español",
        "interface": {
            "primary": "Mostrar u ocultar los capítulos",
            "secondary": "Mostrar u ocultar las secciones de esta página",
            "search": "Buscar...",
            "folded": "Mostrar u ocultar el contenido plegado",
        },
        "quick": "Una construcción rápida: cada cuaderno se ejecutó en modo rápido (pocas "
        "imágenes, una pasada corta), así que sus números y figuras no son los del curso. El "
        "libro del curso se construye en modo completo.",
        "run_mode": {
            "full": "en modo completo",
            "quick": "en modo rápido (pocas imágenes, una "
            "pasada corta: esta es una construcción rápida)",
        },
    },
}


def other_editions(code: str) -> list[tuple[str, str, str]]:
    """The editions a page of edition `code` links to: each one's folder from this edition's home
    (English is the site's top, every other language a folder in it), its language, the link's
    words."""

    def home(other: str) -> str:
        return "" if other == "en" else f"{other}/"

    up = "" if code == "en" else "../"
    return [(up + home(other), other, WORDS[other]["edition"]) for other in WORDS if other != code]
