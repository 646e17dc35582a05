#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu): it installs
# Python 3.11 (the course's constraints are pinned for it), bubblewrap (the sandbox, where the
# container allows it) and util-linux's setpriv (a user of its own for each student's code where
# it does not), then the course and its data (install.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends \
  ca-certificates python3 python3-venv bubblewrap util-linux

# uv brings Python 3.11 whatever Ubuntu's own is, into /opt, where any user may run it.
python3 -m venv /opt/vitcourse/tools
/opt/vitcourse/tools/bin/pip install -q "uv==0.13.9"
export UV_PYTHON_INSTALL_DIR=/opt/vitcourse/python
/opt/vitcourse/tools/bin/uv venv --seed --python 3.11 /opt/vitcourse/venv

bash "$here/install.sh" /opt/vitcourse/venv/bin/python /opt/vitcourse/data
