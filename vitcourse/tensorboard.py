"""An old door: the module is `vitcourse.bridges.tensorboard`. This file stands for it, so that
`from vitcourse.tensorboard import ...` (notebook 10) and learners' own code keep working."""

import sys

from vitcourse.bridges import tensorboard

sys.modules[__name__] = tensorboard
