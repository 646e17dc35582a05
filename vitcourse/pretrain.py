"""`python -m vitcourse.pretrain`, the documented command: it runs `vitcourse.cli.pretrain`.
Imported, this file stands for that module (`import vitcourse.pretrain` as before it moved)."""

import sys

from vitcourse.cli import pretrain

if __name__ == "__main__":
    pretrain.main()
else:
    sys.modules[__name__] = pretrain
