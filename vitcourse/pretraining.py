"""An old door: the module is `vitcourse.training.pretraining`. This file stands for it, so that
`from vitcourse.pretraining import ...` (notebook 09) and learners' own code keep working."""

import sys

from vitcourse.training import pretraining

sys.modules[__name__] = pretraining
