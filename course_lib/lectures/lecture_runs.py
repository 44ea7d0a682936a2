"""The long training runs of lecture notebooks 05, 06 and 07, precomputed: how they are stored and loaded.

A run of a few hundred Adam steps drifts between CPUs (a different BLAS kernel rounds differently, and
the trajectory follows the rounding), so a notebook whose checked outputs hung on one would print
other numbers on another machine. ``benchmarks/lecture_05.py``, ``lecture_06.py`` and ``lecture_07.py``
run each notebook's long cells once, with exactly the notebook's settings, and write
``course_lib/lectures/data/lecture_0N.json``; the notebook loads it (:func:`load_lecture_runs`) and
draws it with its usual plotting calls, and trains live only for a few steps.

In the file a history (``PPOHistory``, ``PGHistory``, ``GRPOHistory``) is a dict
``{"history": class name, "fields": {name: list}}`` (:func:`history_to_json`); the trained model is
not stored, what a notebook reads from it (a final greedy reward, an entropy) is stored beside it.
NaN (a PPO rollout in which no episode ended) is stored as ``null``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from importlib import resources

from course_lib.trainers.grpo_trainer import GRPOHistory
from course_lib.trainers.pg_trainer import PGHistory
from course_lib.trainers.ppo_trainer import PPOHistory

HISTORIES = {cls.__name__: cls for cls in (PPOHistory, PGHistory, GRPOHistory)}
"""The history classes a file may hold, by name."""

NOTEBOOKS = ("05", "06", "07")


def rounded(value, digits: int = 4):
    """``value`` (a number, or nested lists of numbers) rounded to ``digits`` significant digits; NaN -> None.

    Integers stay integers: a greedy reward of 5 is stored as ``5``, not ``5.0``.
    """
    if isinstance(value, (list, tuple)):
        return [rounded(v, digits) for v in value]
    value = float(value)
    if math.isnan(value):
        return None
    if value.is_integer() and abs(value) < 2**53:
        return int(value)
    return float(f"{value:.{digits}g}")


def history_to_json(history, digits: int = 4, fields=None) -> dict:
    """A history as JSON-ready lists, rounded: ``fields`` (every list field when None); the model is dropped."""
    if type(history).__name__ not in HISTORIES:
        raise ValueError(f"history: expected one of {sorted(HISTORIES)}, got {type(history).__name__}")
    lists = [f.name for f in dataclasses.fields(history) if isinstance(getattr(history, f.name), list)]
    if fields is not None:
        unknown = sorted(set(fields) - set(lists))
        if unknown:
            raise ValueError(f"fields: {unknown} are not list fields of {type(history).__name__} ({lists})")
        lists = [name for name in lists if name in fields]
    fields = {name: rounded(getattr(history, name), digits) for name in lists}
    if isinstance(history, (PGHistory, GRPOHistory)):
        fields["max_reward"] = history.max_reward  # plots draw it as the dashed line
    return {"history": type(history).__name__, "fields": fields}


def _nan(value):
    if isinstance(value, list):
        return [_nan(v) for v in value]
    return math.nan if value is None else value


def history_from_json(data: dict):
    """The history :func:`history_to_json` stored (``model`` is None; ``null`` becomes NaN)."""
    if not isinstance(data, dict) or data.get("history") not in HISTORIES:
        raise ValueError(f"data: expected {{'history': one of {sorted(HISTORIES)}, 'fields': ...}}")
    return HISTORIES[data["history"]](**{name: _nan(value) for name, value in data["fields"].items()})


def _histories(value):
    """Every stored history inside ``value`` (dicts and lists, walked recursively) made an object again."""
    if isinstance(value, dict):
        if "history" in value and "fields" in value:
            return history_from_json(value)
        return {key: _histories(v) for key, v in value.items()}
    if isinstance(value, list):
        return [_histories(v) for v in value]
    return value


def load_lecture_runs(notebook: str, path=None) -> dict:
    """The precomputed runs of lecture notebook ``notebook`` (``"05"``, ``"06"`` or ``"07"``), histories as objects.

    Reads ``course_lib/lectures/data/lecture_<notebook>.json`` (or ``path``), written by
    ``benchmarks/lecture_<notebook>.py``. Its ``meta`` block says which script wrote it, with
    which torch, and how long it took.

    - ``"05"``: ``cartpole`` (the ``PPOHistory`` of 30 updates), ``pitfalls`` (``{label: PPOHistory}``,
      15 updates each), ``lm`` (``{label: PPOHistory}``, 60 updates each) and ``lm_tokens`` (one response
      of the ``kl_coef = 0.5`` run after training: ``prompt``, ``response``, ``score``, ``rewards``,
      ``values``, ``advantages``, one number per token).
    - ``"06"``: ``pg_runs`` (``{deltas mode: [PGHistory per seed]}``), ``grpo_runs``
      (``{ablation: [GRPOHistory per seed]}``), and ``pg_finals``, ``grpo_finals`` under the same keys:
      ``{"greedy": [per seed], "entropy": [per seed], "answers": [per seed: B greedy responses]}`` of the
      trained models.
    - ``"07"``: ``sorting`` (``iterations``, ``group_size``) and ``cartpole`` (``max_steps``, ``group_size``,
      ``num_groups``), each with ``runs``: ``{"GRPO": [curve per seed], "PPO": [...]}``, the curves of
      :mod:`course_lib.lectures.compare` (their ``seconds``: CPU seconds of the training thread), as
      :func:`course_lib.plotting.plot_budget_curves` takes them.
    """
    if notebook not in NOTEBOOKS:
        raise ValueError(f"notebook: expected one of {NOTEBOOKS}, got {notebook!r}")
    if path is None:
        text = resources.files("course_lib.lectures").joinpath("data", f"lecture_{notebook}.json").read_text()
    else:
        with open(path) as file:
            text = file.read()
    data = json.loads(text)
    return {"meta": data["meta"], **{key: _histories(value) for key, value in data.items() if key != "meta"}}
