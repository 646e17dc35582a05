#!/usr/bin/env bash
# Install the course's grader, at the edition this bundle was made from, for one interpreter.
#
#   bash install.sh PYTHON DATA [PIP OPTIONS]
#
# PYTHON: the interpreter whose environment receives the course (Gradescope: the virtual
# environment setup.sh makes; PrairieLearn: the image's own Python). DATA: the folder that
# receives the course's data (the notebooks read it there: VITCOURSE_DATA). PIP OPTIONS go to
# each pip install. Gradescope's setup.sh and PrairieLearn's Dockerfile both call it; so do the
# course's tests, with --dry-run, against the environment they run in.
set -euo pipefail
python="$1"
data="$2"
options=("${@:3}")
here="$(cd "$(dirname "$0")" && pwd)"
course="$here/course"

# torch and torchvision at the edition's versions, CPU builds: the grader runs every notebook on
# the CPU, and the CUDA builds are gigabytes more. Where PyTorch's CPU index lacks that version,
# PyPI's build of it.
pins=$(grep -E '^(torch|torchvision)==' "$course/constraints.txt" | tr '\n' ' ')
# shellcheck disable=SC2086 # two requirements, split on purpose
"$python" -m pip install "${options[@]}" --index-url https://download.pytorch.org/whl/cpu $pins \
  || "$python" -m pip install "${options[@]}" $pins

# What the notebooks import (requirements.txt, without its editable install of the course), the
# grader's cloudpickle, and the course itself, at the versions of constraints.txt.
grep -v '^-e' "$course/requirements.txt" > "$here/requirements-grader.txt"
"$python" -m pip install "${options[@]}" -c "$course/constraints.txt" -r "$here/requirements-grader.txt" \
  "cloudpickle>=3.0" "$course"

# The data, where any user may read it: each notebook runs as a user of its own.
mkdir -p "$data"
cp -R "$course/data/." "$data/"
cp "$here/edition.json" "$data/edition.json"  # the edition each results.json names
chmod -R a+rX "$data"
