"""`python -m vitcourse.grade`, the documented command: it runs `vitcourse.classroom.grade`.
Imported, this file stands for that module (`import vitcourse.grade` as before it moved)."""

import sys

from vitcourse.classroom import grade

if __name__ == "__main__":
    grade.main()
else:
    sys.modules[__name__] = grade
