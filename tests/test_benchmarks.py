"""Every benchmark runs as the docs tell a user to run it: ``.venv/bin/python benchmarks/NAME.py`` from the
repository's root, with ``--quick`` where it has one (the whole pipeline in seconds, writing nowhere that matters)
and ``--help`` otherwise. A benchmark that only works when imported as a package, or whose recipe no longer maps to
the code on main, fails here rather than in a user's hands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))

# What the last line of a quick run starts with, where a benchmark promises one.
LAST_LINES = {
    "capstone.py": "ladder: rungs=7 seeds=2",
    "critic_scratchpad.py": "critic: seeds=2",
    "reasoning_length.py": "reasoning: share_before=",
    "hf_learning.py": "hf: sft=",
    "loop_speed.py": "loop: grpo_s300=",
    "check_mutants.py": "mutants: checks=3",
}


def _arguments(script: str, tmp_path: Path) -> list[str]:
    source = (ROOT / "benchmarks" / script).read_text()
    if '"--quick"' not in source:
        return ["--help"]
    if "results_parser(" in source:  # its --quick must be sent elsewhere than the committed results
        return ["--quick", "--out", str(tmp_path / "out.json")]
    return ["--quick"]


def test_every_benchmark_is_listed():
    expected = {"capstone.py", "critic_scratchpad.py", "reasoning_length.py", "grpo_family.py", "hf_learning.py"}
    assert expected | {"loop_speed.py"} <= set(SCRIPTS)


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_as_documented(script, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    arguments = _arguments(script, tmp_path)
    result = subprocess.run(
        [sys.executable, f"benchmarks/{script}", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{script} {' '.join(arguments)} failed:\n{output[-3000:]}"
    if arguments == ["--help"]:
        assert "usage:" in result.stdout
    elif script in LAST_LINES:
        last = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
        lines = [line for line in result.stdout.splitlines() if line.startswith(LAST_LINES[script])]
        assert lines, f"{script}: no line starting {LAST_LINES[script]!r}; last line {last!r}"


@pytest.mark.slow
def test_family_protocol_2_runs_as_documented():
    """``grpo_family.py --protocol 2`` (chapter 11's round under protocol v2) has a quick mode of its own."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "benchmarks/grpo_family.py", "--quick", "--protocol", "2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert any(line.startswith("family_v2: testbeds=length,drift") for line in result.stdout.splitlines())
