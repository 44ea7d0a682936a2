"""Chapter 09: the course's GRPO loss agrees with the loss TRL's GRPOTrainer computes, and TRL trains the tiny model.

The agreement tests drive TRL's own code (``GRPOTrainer.compute_loss`` on a prepared batch, its
fused log-prob head included) rather than re-deriving its formula: if a TRL release changes its
loss, these tests say so.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import torch

from course_lib.hf import agreement, data, loop
from course_lib.hf.trl_contract import LOSS_TYPES
from course_lib.hf.trl_grpo import history_from_trl, make_trainer

pytestmark = pytest.mark.usefixtures("one_thread")

B, G, T = 2, 4, 8
MAX_LEN = 10  # TRL's max_completion_length: Dr. GRPO's constant, deliberately not T


@pytest.fixture(scope="module")
def batch(tiny_qwen):
    model, tokenizer = loop.load_model_and_tokenizer(str(tiny_qwen))
    return agreement.fixed_batch(model, tokenizer, B=B, G=G, T=T)


def _compare(tiny_qwen, tmp_path, batch, loss_agg, with_old=True, **overrides):
    config = loop.HFGRPOConfig(
        rl=loop.hf_rl_config(
            prompts_per_step=B,
            group_size=G,
            max_new_tokens=MAX_LEN,
            kl_coef=0.1,
            clip_eps=0.2,
            loss_agg=loss_agg,
            update_epochs=2 if with_old else 1,
        )
    )
    trainer = make_trainer(str(tiny_qwen), data.load_problems(n=B), config, str(tmp_path), progress=False, **overrides)
    assert trainer.loss_type == LOSS_TYPES[loss_agg] and trainer.beta == 0.1
    return agreement.trl_and_course(trainer, batch, with_old=with_old)


def test_fixed_batch_has_masks_of_every_length(batch):
    assert batch["completion_mask"].sum(-1).tolist() == [8, 3, 5, 1, 8, 6, 2, 4]
    assert (batch["rewards"].std(-1) > 0).all()


@pytest.mark.parametrize("loss_agg", list(LOSS_TYPES))
def test_course_loss_equals_trl_loss_and_gradients(tiny_qwen, tmp_path, batch, loss_agg):
    result = _compare(tiny_qwen, tmp_path, batch, loss_agg)
    print(
        f"\n{LOSS_TYPES[loss_agg]}: loss TRL {result['trl_loss']:.6f} course {result['course_loss']:.6f}; "
        f"|loss diff| {result['loss_diff']:.1e}, max |grad diff| {result['grad_diff']:.1e} "
        f"(largest grad {result['grad_max']:.1e})"
    )
    assert result["info"]["clip_fraction"] > 0  # the batch exercises the clip
    assert result["loss_diff"] < 1e-6 and result["grad_diff"] < 1e-6 * max(1.0, result["grad_max"])


def test_clip_higher_agrees_too(tiny_qwen, tmp_path, batch):
    """DAPO's clip-higher: TRL's epsilon_high is the course's clip_eps_high."""
    result = _compare(tiny_qwen, tmp_path, batch, "token-mean", epsilon_high=0.28)
    assert result["loss_diff"] < 1e-6 and result["grad_diff"] < 1e-6


@pytest.mark.parametrize("loss_agg", list(LOSS_TYPES))
def test_one_iteration_means_ratio_exactly_one(tiny_qwen, tmp_path, batch, loss_agg):
    """num_iterations=1: TRL takes logp_old = logp.detach(); the ratio is exactly 1 and nothing is clipped."""
    result = _compare(tiny_qwen, tmp_path, batch, loss_agg, with_old=False)
    assert result["ratio_is_one"] and result["info"]["clip_fraction"] == 0.0
    assert result["loss_diff"] < 1e-6 and result["grad_diff"] < 1e-6


def test_trl_default_kl_correction_changes_the_gradient_not_the_value(tiny_qwen, tmp_path, batch):
    """TRL's default use_bias_correction_kl=True multiplies k3 by the ratio: at ratio 1 the same loss, but a
    different gradient (the ratio's own gradient is grad logp, times the KL). trl_grpo turns it off."""
    result = _compare(tiny_qwen, tmp_path, batch, "seq-mean-token-mean", with_old=False, use_bias_correction_kl=True)
    assert result["loss_diff"] < 1e-6 and result["grad_diff"] > 1e-4


def test_two_trl_steps_on_cpu_change_the_weights(tiny_qwen, tmp_path):
    from transformers import AutoModelForCausalLM

    # The length reward varies within every group, so the first step already has a gradient.
    config = loop.HFGRPOConfig(
        rl=loop.hf_rl_config(iterations=2, prompts_per_step=2, group_size=4, max_new_tokens=6, update_epochs=1),
        reward_weights={"length": 1.0, "answer": 1.0},
        save_every=2,
    )
    trainer = make_trainer(str(tiny_qwen), data.load_problems(n=4), config, str(tmp_path), progress=False)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 2
    changed = [name for name, p in trainer.model.named_parameters() if not torch.equal(before[name], p)]
    assert changed, "two TRL steps left every weight unchanged"
    assert len(history_from_trl(trainer).mean_reward) == 2
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "checkpoint-2")  # save_steps = save_every * epochs
    torch.testing.assert_close(
        dict(saved.named_parameters())[changed[0]], dict(trainer.model.named_parameters())[changed[0]]
    )


@pytest.mark.parametrize("num_iterations", [1, 2])
def test_trl_pipeline_old_logps_and_advantages_are_the_course_ones(tiny_qwen, tmp_path, num_iterations):
    """Inside a real TRL step: with num_iterations=1 TRL hands its loss no logp_old (so the ratio is exactly 1);
    with more it does. And its advantages are the course's group_advantages of the course's rewards
    (TRL's std is Bessel-corrected like torch.std; its eps is 1e-4, the course's default 1e-6)."""
    from course_lib.grpo import group_advantages

    config = loop.HFGRPOConfig(
        rl=loop.hf_rl_config(
            iterations=1, prompts_per_step=2, group_size=4, max_new_tokens=6, update_epochs=num_iterations
        ),
        reward_weights={"length": 1.0, "answer_format": 0.5},
    )
    trainer = make_trainer(str(tiny_qwen), data.load_problems(n=4), config, str(tmp_path), progress=False)
    seen, compute_loss = [], trainer.compute_loss

    def recording_compute_loss(model, inputs, *args, **kwargs):
        seen.append({k: v.detach().clone() if torch.is_tensor(v) else v for k, v in inputs.items()})
        return compute_loss(model, inputs, *args, **kwargs)

    trainer.compute_loss = recording_compute_loss
    trainer.train()
    assert len(seen) == num_iterations
    assert ("old_per_token_logps" in seen[0]) == (num_iterations > 1)
    inputs, tokenizer = seen[0], trainer.processing_class
    texts = tokenizer.batch_decode(inputs["completion_ids"], skip_special_tokens=True)
    rewards = torch.tensor(data.score(texts, ["0"] * len(texts), config.reward_weights))  # (N,)
    # TRL shuffles the rows after scoring: regroup them by prompt.
    prompts = [tuple(row[m.bool()].tolist()) for row, m in zip(inputs["prompt_ids"], inputs["prompt_mask"])]
    for prompt in set(prompts):
        rows = [i for i, p in enumerate(prompts) if p == prompt]
        assert len(rows) == 4
        expected = group_advantages(rewards[rows][None, :], eps=1e-4)[0]
        torch.testing.assert_close(inputs["advantages"][rows], expected, atol=1e-5, rtol=1e-5)
