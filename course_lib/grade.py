"""``python -m course_lib.grade``: grade a folder of submissions (the code is in :mod:`course_lib.authoring.grade`)."""

from course_lib.authoring.grade import main

if __name__ == "__main__":
    raise SystemExit(main())
