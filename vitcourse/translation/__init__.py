"""The course in another language, for its translators: one English source, gettext catalogs.

    cells       what a learner reads in a notebook's cell, cut into pieces to translate: a
                markdown cell, a comment, a string a learner sees, a figure's alt text; and the
                cell with each piece translated, its code unchanged
    catalogs    the .pot templates and each language's .po catalogs (Babel): extracted from the
                notebooks and the package, merged, checked for what is missing, compiled (.mo)
    cli         python -m vitcourse.translate: extract, merge LANG, and LANG (the edition:
                LANG/notebooks, LANG/student and the package's compiled catalog)

The language the package speaks at run time is `vitcourse.language` (`set_language`), which
reads the compiled catalogs only: a learner's install needs none of this (Babel comes with the
book's requirements).
"""
