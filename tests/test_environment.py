"""The conda environment file installs exactly the packages pyproject.toml declares."""

from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _pyproject_requirements() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    return {r.replace(" ", "") for r in requirements}


def _environment_requirements() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, "environment.yml should have exactly one pip: section"
    return {r.replace(" ", "") for r in pip_sections[0]}


def test_environment_yml_matches_pyproject():
    in_pyproject, in_environment = _pyproject_requirements(), _environment_requirements()
    assert in_pyproject - in_environment == set(), "add these to environment.yml"
    assert in_environment - in_pyproject == set(), "add these to pyproject.toml or drop them"


def test_torch_is_pinned_everywhere():
    assert "torch==2.13.0" in _pyproject_requirements()
    assert "torch==2.13.0" in _environment_requirements()


def test_hugging_face_stack_is_pinned_everywhere():
    """Chapter 09's transformers, TRL and accelerate are pinned (exact versions) in both files."""
    for name in ("transformers", "trl", "accelerate"):
        pinned = {r for r in _pyproject_requirements() if r.startswith(name + "==")}
        assert len(pinned) == 1, f"pin {name} with == in pyproject.toml"
        assert pinned <= _environment_requirements()
