"""Mutants that survive their check because they compute what the reference computes on every input the
exercise allows, each with a one-line reason (read by ``benchmarks/check_mutants.py``).

A key is ``<name>:<line>:<column>:<operator>:<n>`` (``benchmarks/_mutate.py``), its line counted from the ``def``;
a key may hold ``*`` (``fnmatch``), for every mutant of one kind at one place.
A survivor that is not equivalent is a missing case: add the case to the check, do not list it here.
"""

EQUIVALENT: dict[str, str] = {}
