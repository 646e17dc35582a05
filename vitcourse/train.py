"""`python -m vitcourse.train`, the documented command: it runs `vitcourse.cli.train`. Imported,
this file stands for that module (`import vitcourse.train` as before it moved)."""

import sys

from vitcourse.cli import train

if __name__ == "__main__":
    train.main()
else:
    sys.modules[__name__] = train
