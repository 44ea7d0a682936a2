"""The repository stands on its own: a clone is all a reader or a contributor has.

Nothing tracked points at the folder beside the repository that the course was once written from (a clone does not
have it): the design and the conventions a contributor needs are in ``docs/design.md`` and ``CONTRIBUTING.md``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Spelled in two pieces, so that this file does not match itself.
OUTSIDE = r"\.\./" + "shared"


def _git_grep(pattern: str, repo: Path = ROOT) -> list[str]:
    """The lines of tracked files (and untracked, unignored ones) that match ``pattern``, as ``path:line:text``."""
    done = subprocess.run(
        ["git", "grep", "--untracked", "-n", "-E", pattern],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: no match
    return done.stdout.splitlines()


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_nothing_points_outside_the_repository():
    assert _git_grep(OUTSIDE) == []


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_the_search_finds_a_pointer_when_there_is_one(tmp_path):
    # The check itself, in a scratch repository: the same search finds the line CONTRIBUTING.md used to open with.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "CONTRIBUTING.md").write_text("Read `" + "../" + "shared/DESIGN.md` first.\n")
    (tmp_path / "README.md").write_text("Nothing outside.\n")
    assert [line.split(":")[0] for line in _git_grep(OUTSIDE, tmp_path)] == ["CONTRIBUTING.md"]


def test_contributing_points_at_the_design():
    assert "(docs/design.md)" in (ROOT / "CONTRIBUTING.md").read_text()
    assert (ROOT / "docs" / "design.md").is_file()
