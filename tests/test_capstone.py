"""Tests of course_lib.lectures.capstone: the warm-up, the split, evaluation, and runs through the one LM RL loop."""

import copy
import dataclasses

import pytest

from course_lib import lm_rl
from course_lib.lectures.capstone import (
    PPO_CHANGES,
    CapstoneConfig,
    accuracy,
    run,
    sample_table,
    sft,
    sft_loss,
    warm_up,
)
from course_lib.tasks import AdditionTask
from course_lib.tiny_lm import TinyLM, TinyLMConfig


def _small(seed=0):
    task = AdditionTask(1)  # prompts "3+4=", answers "7" or "12"
    lm = TinyLM(TinyLMConfig(vocab_size=14, block_size=7, n_layer=1, n_head=2, d_model=16), seed=seed)
    return task, lm


def _small_config():
    return CapstoneConfig(
        n_digits=1,
        n_demos=20,
        n_heldout=20,
        n_val=10,
        sft_steps=5,
        d_model=16,
        eval_every=1,
        rl=lm_rl.LMRLConfig(iterations=2, prompts_per_step=4, group_size=4, update_epochs=1),
    )


def test_sft_lowers_the_loss_on_the_demonstrations():
    task, lm = _small()
    prompts, completions = task.demonstrations(task.all_pairs())
    before = sft_loss(lm, prompts, completions, task.tokenizer.eos_id).item()
    losses = sft(lm, prompts, completions, task.tokenizer.eos_id, steps=60, lr=1e-2)
    assert len(losses) == 60 and losses[-1] < 0.5 * before


def test_the_split_keeps_test_and_validation_prompts_out_of_training():
    cfg = _small_config()
    _, _, split, _ = warm_up(cfg, seed=0)
    heldout, val, train = map(set, (split["heldout"], split["val"], split["train"]))
    assert len(heldout) == 20 and len(val) == 10
    assert not (heldout & val) and not (heldout & train) and not (val & train)
    assert set(split["demos"]) <= train
    assert warm_up(cfg, seed=1)[2]["heldout"] == split["heldout"], "every seed is tested on the same prompts"


def test_accuracy_and_sample_table_agree():
    cfg = _small_config()
    lm, task, split, _ = warm_up(cfg, seed=0)
    rows = sample_table(lm, task, split["heldout"][:5])
    acc = accuracy(lm, task, split["heldout"][:5])
    assert abs(acc - sum(c == a + "$" for _, c, a in rows) / 5) < 1e-9


def test_short_grpo_and_ppo_runs_record_their_evaluations():
    cfg = _small_config()
    lm, task, split, _ = warm_up(cfg, seed=0)
    grpo = run(copy.deepcopy(lm), task, split, cfg, algo="grpo")
    assert grpo["eval"]["completions"] == [0, 16, 32] and len(grpo["mean_reward"]) == 2
    assert grpo["lr"] == [cfg.rl.lr, cfg.rl.lr / 2]  # linear decay towards 0
    ppo = run(copy.deepcopy(lm), task, split, cfg, algo="ppo")
    assert ppo["eval"]["completions"] == [0, 16, 32] and len(ppo["value_loss"]) == 2
    assert ppo["lr"] == pytest.approx([cfg.rl.lr / 21, 2 * cfg.rl.lr / 21])  # rising over a 20-round lr warm-up
    assert CapstoneConfig().rl.clip_eps_high == 0.28
    assert PPO_CHANGES["clip_eps_high"] is None and PPO_CHANGES["warmup_iterations"] == 20  # clipped symmetrically
    val = run(copy.deepcopy(lm), task, split, dataclasses.replace(cfg, eval_every=2), eval_on="val", iterations=2)
    assert len(val["eval"]["score"]) == 2


def test_the_warm_up_stops_at_its_validation_target():
    cfg = dataclasses.replace(_small_config(), sft_steps=100, sft_target=0.0)  # reached at the first check
    _, _, _, losses = warm_up(cfg, seed=0)
    assert len(losses) == 10, "checked every 10 steps, stopped at the first check"
    cfg = dataclasses.replace(cfg, sft_target=1.01)  # never reached: every step runs
    assert len(warm_up(cfg, seed=0)[3]) == 100
