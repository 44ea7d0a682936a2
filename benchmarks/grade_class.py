"""Time ``python -m course_lib.grade`` on a generated class.

Writes N submissions of one exercise notebook (a third correct, a third with a wrong
answer, a third untouched, as a real class might send), grades them with ``-j J`` in a
subprocess pinned to the first C cores, and prints the time per submission and in total.
First it grades one submission alone, for the time of one submission without contention.

    python benchmarks/grade_class.py                      # 50 submissions, -j 2, 2 cores
    python benchmarks/grade_class.py --n 10 -j 1 --cores 1

The numbers depend on the machine; kernel start-up and ``import torch`` are most of it.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib.authoring.build import exercise_notebook  # noqa: E402 (after the path is set)


def write_class(folder: Path, solution_path: Path, n: int) -> Counter:
    """N submissions in ``folder/student_NN/``: correct, wrong (1.5 times the right answer), untouched."""
    solution = nbformat.read(solution_path, as_version=4)
    kinds = Counter()
    for i in range(n):
        kind = ("correct", "wrong", "untouched")[i % 3]
        nb = exercise_notebook(solution, solution_path.name)
        if kind != "untouched":
            for cell, original in zip(nb.cells[1:], solution.cells):
                if "solution" in cell.metadata.get("tags", []):
                    cell.source = original.source
                    name = re.search(r"^def (\w+)\(", cell.source, re.MULTILINE)
                    if kind == "wrong" and name:  # runs, and returns 1.5 times the right answer
                        f = name.group(1)
                        cell.source += (
                            f"\n\n_right_{f} = {f}\n\n\ndef {f}(*args, **kwargs):\n"
                            f"    return _right_{f}(*args, **kwargs) * 1.5\n"
                        )
        student = folder / f"student_{i:02d}"
        student.mkdir(parents=True)
        nbformat.write(nb, student / solution_path.name)
        kinds[kind] += 1
    return kinds


def grade(folder: Path, out: Path, jobs: int, cores: list[int], extra: list[str]) -> float:
    command = [sys.executable, "-m", "course_lib.grade", str(folder), "--out", str(out), "-j", str(jobs), "--quiet"]
    pin = (lambda: os.sched_setaffinity(0, cores)) if hasattr(os, "sched_setaffinity") else None
    start = time.perf_counter()
    subprocess.run(command + extra, cwd=ROOT, check=True, preexec_fn=pin, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def own_times(out: Path) -> list[float]:
    """Each submission's own grading time, from its log."""
    times = []
    for log in (out / "logs").glob("*.log"):
        found = re.search(r"graded in ([\d.]+) s", log.read_text(encoding="utf-8"))
        if found:
            times.append(float(found.group(1)))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50, help="submissions in the class (default 50)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="grade this many at once (default 2)")
    parser.add_argument("--cores", type=int, default=2, help="pin grading to this many cores (default 2)")
    parser.add_argument("--notebook", default="00_warmup", help="which solutions/ notebook (default 00_warmup)")
    args, extra = parser.parse_known_args()
    cores = sorted(os.sched_getaffinity(0))[: args.cores] if hasattr(os, "sched_getaffinity") else []
    solution = ROOT / "solutions" / f"{args.notebook}.ipynb"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_class(tmp / "one", solution, 1)
        single = grade(tmp / "one", tmp / "out-one", 1, cores, extra)
        kinds = write_class(tmp / "class", solution, args.n)
        total = grade(tmp / "class", tmp / "out", args.jobs, cores, extra)
        times = own_times(tmp / "out")
        with open(tmp / "out" / "grades.csv", encoding="utf-8") as f:
            statuses = Counter(row["status"] for row in csv.DictReader(f))
    print(f"machine: {os.cpu_count()} cores, grading pinned to {len(cores) or 'all'} of them: {cores}")
    print(f"one submission alone (-j 1): {single:.1f} s, command start-up included")
    print(f"class of {args.n} {args.notebook} ({', '.join(f'{v} {k}' for k, v in kinds.items())}), -j {args.jobs}:")
    print(f"  total {total:.1f} s = {total / args.n:.2f} s of wall clock per submission")
    print(
        f"  each submission's own grading: mean {sum(times) / len(times):.1f} s, "
        f"min {min(times):.1f} s, max {max(times):.1f} s"
    )
    print(f"  statuses: {dict(statuses)}")


if __name__ == "__main__":
    main()
