"""``python -m course_lib.build``: write ``exercises/`` from ``solutions/``.

The code is in :mod:`course_lib.authoring.build`.
"""

from course_lib.authoring.build import main

if __name__ == "__main__":
    raise SystemExit(main())
