"""`python -m vitcourse.translate`, the documented command: it runs `vitcourse.translation.cli`.
Imported, this file stands for that module, as the other commands' files do."""

import sys

from vitcourse.translation import cli

if __name__ == "__main__":
    cli.main()
else:
    sys.modules[__name__] = cli
