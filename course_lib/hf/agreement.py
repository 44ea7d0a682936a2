"""Does the course's ``grpo_loss`` compute what TRL computes? One fixed batch, both losses, both gradients.

TRL's side is TRL's own code: ``GRPOTrainer.compute_loss`` on a prepared batch (the dict its
``_generate_and_score_completions`` would hand it), with its fused log-prob head. The course's
side is :func:`course_lib.lm_rl.token_logps` and :func:`course_lib.grpo.grpo_loss`.
Both run on the same model object, so any difference is a difference of maths or of bookkeeping.

Shapes: ``B`` prompts, ``G`` completions each, ``N = B * G``, ``P`` prompt tokens, ``T`` completion tokens.
"""

from __future__ import annotations

import torch

from course_lib.grpo import group_advantages, grpo_loss
from course_lib import lm_rl
from course_lib.hf import data


def fixed_batch(model, tokenizer, B: int = 2, G: int = 4, T: int = 8, lengths=(8, 3, 5, 1, 8, 6, 2, 4),
                spread: float = 0.3, seed: int = 0) -> dict:
    """A batch with everything TRL's loss needs, seeded.

    Completions are random tokens ending in EOS after ``lengths[i]`` tokens (PAD after it; a
    length of ``T`` with no EOS is a cut-off completion). ``logp_old`` and ``logp_ref`` are the
    current log-probs plus Gaussian noise of std ``spread``: ratios spread past the clip range.

    Returns:
        A dict of ``[N, P]`` ``prompt_ids``, ``prompt_mask``, ``[N, T]`` ``completion_ids``,
        ``completion_mask``, ``logp_old``, ``logp_ref``, and ``[B, G]`` ``rewards``.
    """
    if len(lengths) != B * G:
        raise ValueError(f"lengths: expected B * G = {B * G} completion lengths, got {len(lengths)}")
    prompts = [data.format_prompt(question, tokenizer) for question, _ in data.load_problems(n=B, seed=seed)]
    enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left")
    g = torch.Generator().manual_seed(seed)
    special = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    completion_ids = torch.randint(0, len(tokenizer), (B * G, T), generator=g)  # (N, T)
    for bad in special:  # no stray EOS or PAD in the middle of a completion
        completion_ids[completion_ids == bad] = max(special) + 1
    for row, length in enumerate(lengths):
        if length < T:
            completion_ids[row, length - 1] = tokenizer.eos_token_id
            completion_ids[row, length:] = tokenizer.pad_token_id
    mask = lm_rl.completion_mask(completion_ids, tokenizer.eos_token_id).long()  # (N, T)
    prompt_ids = enc["input_ids"].repeat_interleave(G, 0)  # (N, P)
    prompt_mask = enc["attention_mask"].repeat_interleave(G, 0)  # (N, P)
    with torch.no_grad():
        logp = lm_rl.token_logps(model, prompt_ids, prompt_mask, completion_ids)  # (N, T)
    rewards = torch.randint(0, 3, (B, G), generator=g).float() / 2  # (B, G), in {0, 0.5, 1}
    rewards[:, 0], rewards[:, 1] = 1.0, 0.0  # every group has some spread: non-zero advantages
    return dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion_ids=completion_ids,
                completion_mask=mask, rewards=rewards,
                logp_old=logp + spread * torch.randn(logp.shape, generator=g),
                logp_ref=logp + spread * torch.randn(logp.shape, generator=g))


def trl_and_course(trainer, batch: dict, with_old: bool = True) -> dict:
    """Loss and gradients from TRL's ``compute_loss`` and from the course's ``grpo_loss``, same model, same batch.

    Args:
        trainer: a TRL ``GRPOTrainer`` (``course_lib.hf.trl_grpo.make_trainer``); its ``loss_type``,
            ``beta``, ``epsilon`` and ``max_completion_length`` set the course's arguments.
        batch: :func:`fixed_batch`.
        with_old: pass ``logp_old``; without it TRL (as with ``num_iterations=1``) takes
            ``per_token_logps.detach()``, and so does the course here.

    Returns:
        A dict: ``trl_loss``, ``course_loss`` (floats), ``loss_diff``, ``grad_diff`` (largest
        absolute difference over all parameters), ``grad_max`` (largest gradient entry),
        ``ratio_is_one`` (every course ratio exactly 1), ``info`` (the course's diagnostics).
    """
    from course_lib.hf.trl_grpo import LOSS_TYPES

    loss_agg = {trl: course for course, trl in LOSS_TYPES.items()}[trainer.loss_type]
    rewards, mask = batch["rewards"], batch["completion_mask"]
    B, G = rewards.shape
    T = mask.shape[1]
    trainer.current_gradient_accumulation_steps = 1  # what Trainer.train sets before each step
    model = trainer.model
    model.train()
    inputs = {
        "prompt_ids": batch["prompt_ids"], "prompt_mask": batch["prompt_mask"],
        "completion_ids": batch["completion_ids"], "completion_mask": mask,
        "advantages": group_advantages(rewards).flatten(),  # (N,): TRL takes them precomputed
        "ref_per_token_logps": batch["logp_ref"],
        "num_items_in_batch": mask.sum(),  # DAPO's normaliser: the valid tokens of the generation batch
    }
    if with_old:
        inputs["old_per_token_logps"] = batch["logp_old"]
    params = [p for p in model.parameters() if p.requires_grad]

    model.zero_grad()
    trl_loss = trainer.compute_loss(model, inputs)
    trl_loss.backward()
    trl_grads = [p.grad.clone() for p in params]

    model.zero_grad()
    logp = lm_rl.token_logps(model, batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"])
    logp_old = batch["logp_old"] if with_old else logp.detach()
    course_loss, info = grpo_loss(
        logp.view(B, G, T), logp_old.view(B, G, T), batch["logp_ref"].view(B, G, T), rewards, mask.view(B, G, T),
        clip_eps=trainer.epsilon_low, clip_eps_high=trainer.epsilon_high, kl_coef=trainer.beta, kl_kind="k3",
        loss_agg=loss_agg, max_len=trainer.max_completion_length,
    )
    course_loss.backward()
    course_grads = [p.grad.clone() for p in params]
    model.zero_grad()
    return {
        "trl_loss": trl_loss.item(), "course_loss": course_loss.item(),
        "loss_diff": abs(trl_loss.item() - course_loss.item()),
        "grad_diff": max((a - b).abs().max().item() for a, b in zip(trl_grads, course_grads)),
        "grad_max": max(a.abs().max().item() for a in trl_grads),
        "ratio_is_one": bool(torch.equal(torch.exp(logp - logp_old), torch.ones_like(logp))),
        "info": info,
    }
