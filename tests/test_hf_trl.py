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

from course_lib.grpo import group_advantages, grpo_loss
from course_lib.hf import data, loop
from course_lib.hf.trl_grpo import LOSS_TYPES, history_from_trl, make_trainer

pytestmark = pytest.mark.usefixtures("one_thread")

B, G, T = 2, 4, 8
MAX_LEN = 10  # TRL's max_completion_length: Dr. GRPO's constant, deliberately not T
KL_COEF = 0.1
REWARDS = torch.tensor([[1.0, 0.0, 0.5, 0.0], [0.0, 0.0, 1.0, 1.5]])  # (B, G)
AGREEMENT = {}  # loss type -> (loss difference, largest gradient difference), printed at the end


@pytest.fixture(scope="module")
def batch(tiny_qwen):
    """One fixed batch: left-padded prompts, completions of several lengths ended by EOS, old and ref log-probs."""
    model, tokenizer = loop.load_model_and_tokenizer(str(tiny_qwen))
    prompts = [data.format_prompt(q, tokenizer) for q, _ in data.load_problems(n=B)]
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    g = torch.Generator().manual_seed(0)
    completion_ids = torch.randint(2, len(tokenizer), (B * G, T), generator=g)  # (N, T), no EOS/PAD
    for row, length in enumerate([8, 3, 5, 1, 8, 6, 2, 4]):  # EOS at length - 1, PAD after it
        if length < T or row == 0:
            completion_ids[row, length - 1] = tokenizer.eos_token_id
            completion_ids[row, length:] = tokenizer.pad_token_id
    mask = loop.completion_mask(completion_ids, tokenizer.eos_token_id)
    prompt_ids = enc["input_ids"].repeat_interleave(G, 0)
    prompt_mask = enc["attention_mask"].repeat_interleave(G, 0)
    with torch.no_grad():
        logp = loop.completion_log_probs(model, prompt_ids, prompt_mask, completion_ids, mask)  # (N, T)
    # Old and reference policies a little away from the current one: ratios spread past the clip range.
    logp_old = logp + 0.3 * torch.randn(logp.shape, generator=g)
    logp_ref = logp + 0.3 * torch.randn(logp.shape, generator=g)
    return dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion_ids=completion_ids,
                completion_mask=mask, logp_old=logp_old, logp_ref=logp_ref)


def _trl_and_course(tiny_qwen, tmp_path, batch, loss_agg, with_old=True, **overrides):
    """The loss and gradients of TRL's compute_loss and of the course's grpo_loss, same model, same batch."""
    config = loop.HFGRPOConfig(prompts_per_step=B, group_size=G, max_new_tokens=MAX_LEN, kl_coef=KL_COEF,
                               clip_eps=0.2, loss_agg=loss_agg, epochs_per_batch=2 if with_old else 1)
    trainer = make_trainer(str(tiny_qwen), data.load_problems(n=B), config, str(tmp_path), progress=False,
                           **overrides)
    assert trainer.loss_type == LOSS_TYPES[loss_agg] and trainer.beta == KL_COEF
    trainer.current_gradient_accumulation_steps = 1  # what Trainer.train sets before each step
    model = trainer.model
    model.train()
    mask = batch["completion_mask"]
    inputs = {
        "prompt_ids": batch["prompt_ids"], "prompt_mask": batch["prompt_mask"],
        "completion_ids": batch["completion_ids"], "completion_mask": mask,
        "advantages": group_advantages(REWARDS).flatten(),  # (N,): TRL takes the advantages precomputed
        "ref_per_token_logps": batch["logp_ref"],
        "num_items_in_batch": mask.sum(),  # DAPO's normaliser: valid tokens of the whole generation batch
    }
    if with_old:  # with num_iterations == 1 TRL leaves it out and uses per_token_logps.detach()
        inputs["old_per_token_logps"] = batch["logp_old"]
    params = [p for p in model.parameters() if p.requires_grad]

    model.zero_grad()
    trl_loss = trainer.compute_loss(model, inputs)
    trl_loss.backward()
    trl_grads = [p.grad.clone() for p in params]

    model.zero_grad()
    logp = loop.completion_log_probs(model, batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], mask)
    logp_old = batch["logp_old"] if with_old else logp.detach()
    course_loss, info = grpo_loss(logp.view(B, G, T), logp_old.view(B, G, T), batch["logp_ref"].view(B, G, T),
                                  REWARDS, mask.view(B, G, T), clip_eps=0.2, kl_coef=KL_COEF, kl_kind="k3",
                                  loss_agg=loss_agg, max_len=MAX_LEN)
    course_loss.backward()
    course_grads = [p.grad.clone() for p in params]
    return trl_loss.detach(), course_loss.detach(), trl_grads, course_grads, info, logp, logp_old


@pytest.mark.parametrize("loss_agg", list(LOSS_TYPES))
def test_course_loss_equals_trl_loss_and_gradients(tiny_qwen, tmp_path, batch, loss_agg):
    trl_loss, course_loss, trl_grads, course_grads, info, _, _ = _trl_and_course(tiny_qwen, tmp_path, batch, loss_agg)
    assert info["clip_fraction"] > 0  # the batch exercises the clip
    grad_diff = max((a - b).abs().max().item() for a, b in zip(trl_grads, course_grads))
    grad_scale = max(a.abs().max().item() for a in trl_grads)
    AGREEMENT[LOSS_TYPES[loss_agg]] = (abs(trl_loss - course_loss).item(), grad_diff, grad_scale)
    print(f"\n{LOSS_TYPES[loss_agg]}: loss TRL {trl_loss.item():.6f} course {course_loss.item():.6f}; "
          f"|loss diff| {abs(trl_loss - course_loss).item():.2e}, max |grad diff| {grad_diff:.2e} "
          f"(largest grad {grad_scale:.2e})")
    torch.testing.assert_close(course_loss, trl_loss, atol=1e-5, rtol=1e-5)
    for a, b in zip(trl_grads, course_grads):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("loss_agg", list(LOSS_TYPES))
def test_one_iteration_means_ratio_exactly_one(tiny_qwen, tmp_path, batch, loss_agg):
    """num_iterations=1: TRL takes logp_old = logp.detach(); the ratio is exactly 1 and nothing is clipped."""
    trl_loss, course_loss, trl_grads, course_grads, info, logp, logp_old = _trl_and_course(
        tiny_qwen, tmp_path, batch, loss_agg, with_old=False)
    assert torch.equal(torch.exp(logp - logp_old), torch.ones_like(logp))
    assert info["clip_fraction"] == 0.0
    torch.testing.assert_close(course_loss, trl_loss, atol=1e-5, rtol=1e-5)
    for a, b in zip(trl_grads, course_grads):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-4)


def test_trl_default_kl_correction_changes_the_gradient_not_the_value(tiny_qwen, tmp_path, batch):
    """TRL's default use_bias_correction_kl=True multiplies k3 by the ratio: at ratio 1 the same loss, but a
    different gradient (the ratio's own gradient is grad logp, times the KL). trl_grpo turns it off."""
    trl_loss, course_loss, trl_grads, course_grads, *_ = _trl_and_course(
        tiny_qwen, tmp_path, batch, "seq-mean-token-mean", with_old=False, use_bias_correction_kl=True)
    torch.testing.assert_close(course_loss, trl_loss, atol=1e-5, rtol=1e-5)
    assert max((a - b).abs().max().item() for a, b in zip(trl_grads, course_grads)) > 1e-4


def test_two_trl_steps_on_cpu_change_the_weights(tiny_qwen, tmp_path):
    from transformers import AutoModelForCausalLM

    # The length reward varies within every group, so the first step already has a gradient.
    config = loop.HFGRPOConfig(steps=2, prompts_per_step=2, group_size=4, max_new_tokens=6, epochs_per_batch=1,
                               reward_weights={"length": 1.0, "answer": 1.0}, save_every=2)
    trainer = make_trainer(str(tiny_qwen), data.load_problems(n=4), config, str(tmp_path), progress=False)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 2
    changed = [name for name, p in trainer.model.named_parameters() if not torch.equal(before[name], p)]
    assert changed, "two TRL steps left every weight unchanged"
    history = history_from_trl(trainer)
    assert len(history.mean_reward) == 2
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "checkpoint-2")  # save_steps=save_every*epochs
    torch.testing.assert_close(dict(saved.named_parameters())[changed[0]], dict(trainer.model.named_parameters())[changed[0]])
