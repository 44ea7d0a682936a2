"""One translation into TRL's ``GRPOConfig``: ``trl_contract.grpo_config_kwargs`` (chapter 09's exercise).

``trl_grpo.trl_config`` and ``learning.trl_config`` build on it and hand ``GRPOConfig`` the keyword arguments they
handed it when each carried its own copy of the arithmetic, for every config the course uses (the tests', the
benchmarks', notebook 09's). ``trl_translations_before.json`` holds those arguments, captured from the copies
(main at db32877) with ``python tests/test_trl_translators.py``.
"""

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from course_lib import lm_rl
from course_lib.hf import learning, loop, trl_grpo
from course_lib.hf.trl_contract import LOSS_TYPES, grpo_config_kwargs

BEFORE = Path(__file__).with_name("trl_translations_before.json")

# Arguments the shared translation spells out where trl_grpo's copy left TRL's default: the same GRPOConfig.
SPELLED_OUT = {"warmup_steps", "mask_truncated_completions"}


def _hf(**fields):
    """An HFGRPOConfig from flat fields: its own (``save_every``, ``reward_weights``), the rest the loop's."""
    own = {}
    for name in ("save_every", "reward_weights"):
        if name in fields:
            own[name] = fields.pop(name)
    return loop.HFGRPOConfig(rl=loop.hf_rl_config(**fields), **own)


def _hf_cases():
    """{name: (HFGRPOConfig, trl_config's other arguments)}: the configs trl_grpo.trl_config is called with."""
    quiet = {"progress": False}
    cases = {}
    for agg in LOSS_TYPES:
        cases[f"test_hf_mapping {agg}"] = (
            _hf(
                group_size=4,
                prompts_per_step=3,
                update_epochs=2,
                clip_eps=0.3,
                kl_coef=0.05,
                max_new_tokens=12,
                clip_eps_high=0.28,
                temperature=0.9,
                top_p=0.95,
                lr=2e-5,
                max_grad_norm=0.5,
                iterations=7,
                save_every=3,
                normalize_std=False,
                loss_agg=agg,
            ),
            {},
        )
        for epochs in (1, 2):
            cases[f"test_hf_trl compare {agg} {epochs}"] = (
                _hf(
                    prompts_per_step=2,
                    group_size=4,
                    max_new_tokens=10,
                    kl_coef=0.1,
                    clip_eps=0.2,
                    loss_agg=agg,
                    update_epochs=epochs,
                ),
                quiet,
            )
        cases[f"notebook 09 agreement {agg}"] = (
            _hf(prompts_per_step=2, group_size=4, max_new_tokens=10, kl_coef=0.1, loss_agg=agg),
            quiet,
        )
    cases["test_hf_trl overrides"] = (
        _hf(prompts_per_step=2, group_size=4, max_new_tokens=10, kl_coef=0.1, loss_agg="token-mean", update_epochs=2),
        {**quiet, "epsilon_high": 0.28, "use_bias_correction_kl": True},
    )
    cases["test_hf_trl two steps"] = (
        _hf(
            iterations=2,
            prompts_per_step=2,
            group_size=4,
            max_new_tokens=6,
            update_epochs=1,
            reward_weights={"length": 1.0, "answer": 1.0},
            save_every=2,
        ),
        quiet,
    )
    for epochs in (1, 2):
        cases[f"test_hf_trl pipeline {epochs}"] = (
            _hf(
                iterations=1,
                prompts_per_step=2,
                group_size=4,
                max_new_tokens=6,
                update_epochs=epochs,
                reward_weights={"length": 1.0, "answer_format": 0.5},
            ),
            quiet,
        )
    family = dict(prompts_per_step=2, group_size=4, max_new_tokens=10, kl_coef=0.1, update_epochs=2)
    cases["test_family_trl grpo"] = (_hf(**family, clip_eps=0.2), quiet)
    cases["test_family_trl gmpo"] = (_hf(**family, clip_eps=0.4), {**quiet, "epsilon": 0.2})
    cases["hf_loops benchmark"] = (
        _hf(
            iterations=10, prompts_per_step=4, group_size=8, update_epochs=2, lr=3e-3, max_new_tokens=12, save_every=10
        ),
        quiet,
    )
    cases["notebook 09 run"] = (
        _hf(
            iterations=8,
            prompts_per_step=4,
            group_size=8,
            update_epochs=2,
            lr=3e-3,
            max_new_tokens=12,
            kl_coef=0.04,
            save_every=4,
            seed=0,
        ),
        quiet,
    )
    cases["notebook 09 one pass"] = (
        _hf(prompts_per_step=2, group_size=4, max_new_tokens=10, kl_coef=0.1, update_epochs=1),
        quiet,
    )
    cases["defaults on two GPUs"] = (_hf(), {"device": "cuda", "num_processes": 2})
    return cases


def _lm_rl_cases():
    """{name: LMRLConfig}: the configs learning.trl_config is called with (chapter 09's runs and its test)."""
    return {
        "hf_learning benchmark": learning.chapter_09_config().rl,
        "test_hf_export": lm_rl.LMRLConfig(
            iterations=10, prompts_per_step=6, group_size=4, update_epochs=3, lr=2e-3, kl_coef=0.02, max_new_tokens=4
        ),
    }


def translations() -> dict:
    """{case: the keyword arguments handed to GRPOConfig}, GRPOConfig itself replaced by ``dict`` meanwhile."""
    import trl

    real, trl.GRPOConfig = trl.GRPOConfig, dict
    try:
        out = {}
        for name, (config, extra) in _hf_cases().items():
            out[f"trl_grpo, {name}"] = trl_grpo.trl_config(config, "OUT", **extra)
        for name, rl in _lm_rl_cases().items():
            out[f"learning, {name}"] = learning.trl_config(rl, "OUT", pad_id=13)
            out[f"trl_contract, {name}"] = grpo_config_kwargs(rl)
        out["trl_contract, defaults"] = grpo_config_kwargs(lm_rl.LMRLConfig())
        return out
    finally:
        trl.GRPOConfig = real


def test_every_translation_hands_grpo_config_what_it_did_before():
    trl = pytest.importorskip("trl")
    before = json.loads(BEFORE.read_text())
    now = json.loads(json.dumps(translations()))  # tuples as lists, as stored
    assert sorted(now) == sorted(before)
    defaults = {f.name: f.default for f in dataclasses.fields(trl.GRPOConfig)}
    for case, kwargs in now.items():
        spelled_out = set(kwargs) - set(before[case])
        assert spelled_out <= SPELLED_OUT, f"{case}: new arguments {sorted(spelled_out - SPELLED_OUT)}"
        assert {k: kwargs[k] for k in spelled_out} == {k: defaults[k] for k in spelled_out}, case
        assert {k: v for k, v in kwargs.items() if k not in spelled_out} == before[case], case


def test_trl_grpo_leaves_the_upper_clip_to_trl_when_the_course_has_none():
    """Deliberate: epsilon_high=None, so an override of epsilon alone (GMPO's log-space range) moves both sides."""
    kwargs = translations()
    assert kwargs["trl_grpo, notebook 09 run"]["epsilon_high"] is None
    assert kwargs["trl_contract, defaults"]["epsilon_high"] == 0.2


if __name__ == "__main__":  # capture: python tests/test_trl_translators.py (run on the code to compare with)
    lines = [f"{json.dumps(name)}: {json.dumps(kwargs, sort_keys=True)}" for name, kwargs in translations().items()]
    BEFORE.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"wrote {len(lines)} cases to {BEFORE}", file=sys.stderr)
