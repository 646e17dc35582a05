"""An old door: the module is `vitcourse.data.datasets`. This file stands for it, so that
`from vitcourse.datasets import scrambled_twin` (notebook 09) and learners' own code keep working.
"""

import sys

from vitcourse.data import datasets

sys.modules[__name__] = datasets
