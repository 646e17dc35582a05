"""`python -m vitcourse.student`, the documented command: it runs `vitcourse.classroom.student`.
Imported, this file stands for that module (`import vitcourse.student` as before it moved)."""

import sys

from vitcourse.classroom import student

if __name__ == "__main__":
    student.main()
else:
    sys.modules[__name__] = student
