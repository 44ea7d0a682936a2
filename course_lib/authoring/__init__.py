"""The instructor's tools: ``build`` writes ``exercises/`` from ``solutions/``; ``grade`` (with ``grading/``)
grades a folder of submissions. The commands stay ``python -m course_lib.build`` and ``python -m course_lib.grade``.
"""
