"""Chapter 11: the GRPO family's losses agree with TRL 1.16's, value and gradient, on one fixed batch.

As chapter 09's tests (tests/test_hf_trl.py), these drive TRL's own code (``GRPOTrainer.compute_loss``,
``RLOOTrainer.compute_loss`` and a real ``RLOOTrainer`` step for its advantages), so a TRL release that
changes a loss, or adds a loss type, makes them say so.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import torch

from course_lib import family
from course_lib.hf import agreement, data, loop
from course_lib.hf.trl_grpo import make_trainer

pytestmark = pytest.mark.usefixtures("one_thread")

B, G, T = 2, 4, 8
MAX_LEN = 10  # TRL's max_completion_length: Dr. GRPO's constant, deliberately not T


@pytest.fixture(scope="module")
def batch(tiny_qwen):
    model, tokenizer = loop.load_model_and_tokenizer(str(tiny_qwen))
    return agreement.fixed_batch(model, tokenizer, B=B, G=G, T=T)


def _grpo_trainer(tiny_qwen, tmp_path, **settings):
    config = loop.HFGRPOConfig(
        rl=loop.hf_rl_config(
            prompts_per_step=B, group_size=G, max_new_tokens=MAX_LEN, kl_coef=0.1, clip_eps=0.2, update_epochs=2
        )
    )
    return make_trainer(str(tiny_qwen), data.load_problems(n=B), config, str(tmp_path), progress=False, **settings)


def test_every_trl_loss_type_is_compared_or_listed_as_missing():
    compared = {settings["loss_type"] for settings in agreement.TRL_FAMILY.values()}
    assert set(agreement.trl_loss_types()) == compared | set(agreement.COURSE_LACKS)
    assert set(agreement.AGGREGATION) == compared


@pytest.mark.parametrize("variant", list(agreement.TRL_FAMILY))
def test_family_loss_equals_trl_value_and_gradient(tiny_qwen, tmp_path, batch, variant):
    trainer = _grpo_trainer(tiny_qwen, tmp_path, **agreement.TRL_FAMILY[variant])
    result = agreement.trl_and_course_family(trainer, batch)
    print(
        f"\n{variant}: loss TRL {result['trl_loss']:.6f} course {result['course_loss']:.6f}; "
        f"|loss diff| {result['loss_diff']:.1e}, max |grad diff| {result['grad_diff']:.1e} "
        f"(largest grad {result['grad_max']:.1e})"
    )
    assert result["grad_max"] > 1e-3  # the batch has a gradient to compare
    if variant not in ("SAPO", "CISPO"):  # SAPO has no clip; CISPO's cap of 5 is far from these ratios
        assert result["outside_clip"] > 0, "the batch never reaches the clip: the comparison would miss it"
    assert result["loss_diff"] < 1e-6 and result["grad_diff"] < 1e-6 * max(1.0, result["grad_max"])


def test_cispo_course_epsilon_is_trl_cap_minus_one(batch):
    """TRL's CISPO caps the ratio at epsilon_high itself; the course at 1 + clip_eps_high. Passing TRL's number
    unchanged is the classic slip: a different loss."""
    adv = family.rloo_advantages(batch["rewards"]).flatten()
    logp_old, mask = batch["logp_old"], batch["completion_mask"]
    logp = logp_old + 0.3
    right = family.cispo_loss(logp, logp_old, adv[:, None].expand_as(logp), clip_eps_high=0.1)
    slip = family.cispo_loss(logp, logp_old, adv[:, None].expand_as(logp), clip_eps_high=1.1)
    assert not torch.allclose(right[mask > 0], slip[mask > 0])  # and right is what agrees with TRL's 1.1 above


def test_rloo_loss_equals_trl_rlootrainer(tiny_qwen, tmp_path, batch):
    trainer = agreement.make_rloo_trainer(str(tiny_qwen), data.load_problems(n=B), str(tmp_path), group_size=G)
    result = agreement.rloo_trl_and_course(trainer, batch)
    print(f"\nRLOO: |loss diff| {result['loss_diff']:.1e}, max |grad diff| {result['grad_diff']:.1e}")
    assert result["grad_max"] > 1e-3
    assert result["loss_diff"] < 1e-6 and result["grad_diff"] < 1e-6 * max(1.0, result["grad_max"])


@pytest.mark.parametrize("normalize_advantages", [False, True])
def test_rloo_advantages_inside_a_real_trl_step(tiny_qwen, tmp_path, normalize_advantages):
    """TRL's RLOOTrainer computes its advantages from the rewards of its own samples: they are the course's
    rloo_advantages; with normalize_advantages=True, whitened over the batch, they are REINFORCE++-baseline's
    (the RLOO advantage is G/(G-1) times the centred one, so TRL's eps 1e-4 is the course's eps times G/(G-1))."""
    weights = {"length": 1.0, "answer_format": 0.5}
    trainer = agreement.make_rloo_trainer(
        str(tiny_qwen),
        data.load_problems(n=4),
        str(tmp_path),
        group_size=G,
        reward_weights=weights,
        normalize_advantages=normalize_advantages,
    )
    seen, compute_loss = [], trainer.compute_loss

    def recording_compute_loss(model, inputs, *args, **kwargs):
        seen.append({k: v.detach().clone() if torch.is_tensor(v) else v for k, v in inputs.items()})
        return compute_loss(model, inputs, *args, **kwargs)

    trainer.compute_loss = recording_compute_loss
    trainer.train()
    inputs, tokenizer = seen[0], trainer.processing_class
    texts = tokenizer.batch_decode(inputs["completion_ids"], skip_special_tokens=True)
    rewards = torch.tensor(data.score(texts, ["0"] * len(texts), weights))  # (N,)
    prompts = [tuple(row[m.bool()].tolist()) for row, m in zip(inputs["prompt_ids"], inputs["prompt_mask"])]
    groups = [[i for i, p in enumerate(prompts) if p == prompt] for prompt in dict.fromkeys(prompts)]
    assert [len(rows) for rows in groups] == [G, G]
    table = torch.stack([rewards[rows] for rows in groups])  # (B, G)
    got = torch.stack([inputs["advantages"][rows] for rows in groups])  # (B, G)
    assert table.std(-1).gt(0).any(), "no reward spread: the comparison would be trivial"
    if normalize_advantages:
        expected = family.reinforce_pp_advantages(table, eps=1e-4 * (G - 1) / G)
    else:
        expected = family.rloo_advantages(table)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("settings", [{}, {"epsilon": 0.2, "epsilon_high": 0.3}])
def test_gmpo_loss_equals_trl_experimental_gmpotrainer(tiny_qwen, tmp_path, batch, settings):
    """TRL 1.16 ships GMPO as an experimental trainer (trl/experimental/gmpo): its loss, value and gradient, is the
    course's gmpo_loss with k3 at every token and the mean over each completion's tokens, then over completions;
    GMPOConfig's epsilon (0.4 by default, the paper's) is in log space, as the course's clip_eps."""
    config = loop.HFGRPOConfig(
        rl=loop.hf_rl_config(
            prompts_per_step=B, group_size=G, max_new_tokens=MAX_LEN, kl_coef=0.1, clip_eps=0.4, update_epochs=2
        )
    )
    trainer = agreement.make_gmpo_trainer(str(tiny_qwen), data.load_problems(n=B), config, str(tmp_path), **settings)
    assert type(trainer).__name__ == "GMPOTrainer"
    result = agreement.gmpo_trl_and_course(trainer, batch)
    print(f"\nGMPO {settings}: |loss diff| {result['loss_diff']:.1e}, max |grad diff| {result['grad_diff']:.1e}")
    assert result["grad_max"] > 1e-3 and result["outside_clip"] > 0, "the batch must reach the clip"
    assert result["loss_diff"] < 1e-6 and result["grad_diff"] < 1e-6 * max(1.0, result["grad_max"])
