"""The classroom: student copies, and a class's notebooks graded where they can harm nothing::

    student          python -m vitcourse.student: the notebooks with every solution taken out
    grade            python -m vitcourse.grade: a class graded, and what the teacher reads
    submissions      a class's folders: each student's notebooks found, links not followed
    grading          one submitted notebook: its two sandboxed steps, then the verdict, here
    grade_worker     step one, in a sandbox: run the notebook, keep what its cells define
    grade_probe      step two, in a sandbox: run one kept answer on a check's inputs
    grade_solutions  the package the probe sees: the course's solutions left out
    grade_quiz       a notebook's quiz: its answers read from the cells handed in, never run
    gradebook        the journal written as grading goes, grades.csv, gradebook.csv, reports
    similarity       what similar.md compares: answers read as text, in a process under limits
    autograder       the grader as a Gradescope autograder and a PrairieLearn external grader
    bundles          what a teacher uploads: Gradescope's zip, PrairieLearn's grader folder
    platforms        what differs from one platform to the next (`PLATFORMS`), its results.json
    sandbox          each step run apart, with limits: time, memory, processes, files
    sandbox_bubblewrap  what bubblewrap's sandbox sees: no network, none of your files
    sandbox_memory   shared memory held to the memory limit where no cgroup counts it
    sandbox_cgroup   a cgroup for each sandbox, where one can be made: the kernel's count
    sandbox_disk     each sandbox's output on a tmpfs of its size, where one can be mounted
    sandbox_out      a teacher's sandbox: its output on a tmpfs of its own, copied out after
    sandbox_watch    the limits watched from outside: time, memory, processes, output
    sandbox_user     who a sandbox runs as: never root; without bubblewrap, a user of its own

Nothing here is imported by a notebook; `docs/teachers.md` is the teacher's guide.
"""
