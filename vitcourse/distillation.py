"""An old door: the module is `vitcourse.training.distillation`. This file stands for it, so that
`from vitcourse.distillation import ...` (notebook 09) and learners' own code keep working."""

import sys

from vitcourse.training import distillation

sys.modules[__name__] = distillation
