"""Test-suite settings, at the top of the repository so they hold for `pytest notebooks/...` too.

Quick mode is set here, before nbmake starts any kernel: the kernels inherit this process's
environment, so every notebook runs with small data and few steps. Run
`VITCOURSE_QUICK=0 pytest notebooks/` to execute the notebooks in full mode instead."""

import os

os.environ.setdefault("VITCOURSE_QUICK", "1")
