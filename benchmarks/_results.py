"""What the benchmark scripts that regenerate a notebook's precomputed results share.

Each writes one JSON file into ``course_lib/lectures/data/`` with a ``meta`` block (which script, torch and Python
versions, threads, seconds) beside its results; a short ``--quick`` run must never overwrite the committed file.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch

DATA = Path(__file__).resolve().parent.parent / "course_lib" / "lectures" / "data"


def results_parser(doc: str, out: Path, quick: str | None = None) -> argparse.ArgumentParser:
    """A parser with ``--out`` (default ``out``) and, when ``quick`` describes it, ``--quick``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    if quick:
        parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--out", type=Path, default=out, help=f"where to write the JSON (default {out})")
    return parser


def refuse_overwrite(parser: argparse.ArgumentParser, args, default_out: Path, short: bool, what: str = "--quick"):
    """A short run may not replace the committed results: it must name another ``--out``."""
    if short and args.out == default_out:
        parser.error(f"{what} must not overwrite the committed results: pass --out")


def write_results(out: Path, script: str, total_seconds: float, results: dict, **meta) -> dict:
    """Write ``{"meta": ..., **results}`` to ``out`` (compact JSON) and print where and how long it took."""
    results = {
        "meta": {
            "generated_by": f"benchmarks/{script}",
            "torch": torch.__version__,
            "python": platform.python_version(),
            "threads": 1,
            "total_seconds": round(total_seconds, 1),
            **meta,
        },
        **results,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, separators=(",", ":")) + "\n")
    print(f"wrote {out} ({out.stat().st_size / 1000:.1f} kB)")
    print(f"total_seconds={total_seconds:.0f}")
    return results
