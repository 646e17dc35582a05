"""An old door: the module is `vitcourse.bridges.lightning`. This file stands for it, so that
`from vitcourse.lightning import ...` (notebook 10) and learners' own code keep working."""

import sys

from vitcourse.bridges import lightning

sys.modules[__name__] = lightning
