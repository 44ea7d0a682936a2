"""Does the course's ``grpo_loss`` compute what TRL computes? One fixed batch, both losses, both gradients.

TRL's side is TRL's own code: ``GRPOTrainer.compute_loss`` on a prepared batch (the dict its
``_generate_and_score_completions`` would hand it), with its fused log-prob head. The course's
side is :func:`course_lib.lm_sampling.token_logps` and :func:`course_lib.grpo.grpo_loss`.
Both run on the same model object, so any difference is a difference of maths or of bookkeeping.

Chapter 11 does the same for the GRPO family (:data:`TRL_FAMILY`): each TRL ``loss_type``, GSPO's
``importance_sampling_level="sequence"``, ``RLOOTrainer``'s loss and the experimental ``GMPOTrainer``'s, against
the course's ``course_lib.family`` pieces (:func:`family_loss`, :func:`rloo_trl_and_course`,
:func:`gmpo_trl_and_course`).

Shapes: ``B`` prompts, ``G`` completions each, ``N = B * G``, ``P`` prompt tokens, ``T`` completion tokens.
"""

from __future__ import annotations

import torch

from course_lib import family, lm_sampling
from course_lib.grpo import aggregate_loss, group_advantages, grpo_loss, kl_estimate
from course_lib.hf import data
from course_lib.masked import masked_sum
from course_lib.ppo import clipped_surrogate


def fixed_batch(
    model,
    tokenizer,
    B: int = 2,
    G: int = 4,
    T: int = 8,
    lengths=(8, 3, 5, 1, 8, 6, 2, 4),
    spread: float = 0.3,
    seed: int = 0,
) -> dict:
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
    mask = lm_sampling.completion_mask(completion_ids, tokenizer.eos_token_id).long()  # (N, T)
    prompt_ids = enc["input_ids"].repeat_interleave(G, 0)  # (N, P)
    prompt_mask = enc["attention_mask"].repeat_interleave(G, 0)  # (N, P)
    with torch.no_grad():
        logp = lm_sampling.token_logps(model, prompt_ids, prompt_mask, completion_ids)  # (N, T)
    rewards = torch.randint(0, 3, (B, G), generator=g).float() / 2  # (B, G), in {0, 0.5, 1}
    rewards[:, 0], rewards[:, 1] = 1.0, 0.0  # every group has some spread: non-zero advantages
    return dict(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        completion_ids=completion_ids,
        completion_mask=mask,
        rewards=rewards,
        logp_old=logp + spread * torch.randn(logp.shape, generator=g),
        logp_ref=logp + spread * torch.randn(logp.shape, generator=g),
    )


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
    from course_lib.hf.trl_contract import LOSS_TYPES

    loss_agg = {trl: course for course, trl in LOSS_TYPES.items()}[trainer.loss_type]
    rewards, mask = batch["rewards"], batch["completion_mask"]
    B, G = rewards.shape
    T = mask.shape[1]
    extra = {}

    def course_loss(logp, logp_old):
        loss, extra["info"] = grpo_loss(
            logp.view(B, G, T),
            logp_old.view(B, G, T),
            batch["logp_ref"].view(B, G, T),
            rewards,
            mask.view(B, G, T),
            clip_eps=trainer.epsilon_low,
            clip_eps_high=trainer.epsilon_high,
            kl_coef=trainer.beta,
            kl_kind="k3",
            loss_agg=loss_agg,
            max_len=trainer.max_completion_length,
        )
        return loss

    result = _compare(trainer, batch, group_advantages(rewards).flatten(), course_loss, with_old)
    return {**result, **extra}


def _compare(trainer, batch: dict, advantages, course_loss, with_old: bool = True) -> dict:
    """TRL's ``compute_loss`` on the prepared batch, then ``course_loss(logp, logp_old)`` on the same model."""
    mask = batch["completion_mask"]
    trainer.current_gradient_accumulation_steps = 1  # what Trainer.train sets before each step
    model = trainer.model
    model.train()
    inputs = {
        "prompt_ids": batch["prompt_ids"],
        "prompt_mask": batch["prompt_mask"],
        "completion_ids": batch["completion_ids"],
        "completion_mask": mask,
        "advantages": advantages,  # (N,): TRL takes them precomputed
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
    logp = lm_sampling.token_logps(model, batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"])
    logp_old = batch["logp_old"] if with_old else logp.detach()
    course = course_loss(logp, logp_old)
    course.backward()
    course_grads = [p.grad.clone() for p in params]
    model.zero_grad()
    return {
        "trl_loss": trl_loss.item(),
        "course_loss": course.item(),
        "loss_diff": abs(trl_loss.item() - course.item()),
        "grad_diff": max((a - b).abs().max().item() for a, b in zip(trl_grads, course_grads)),
        "grad_max": max(a.abs().max().item() for a in trl_grads),
        "ratio_is_one": bool(torch.equal(torch.exp(logp - logp_old), torch.ones_like(logp))),
    }


# ---------------------------------------------------------------------------
# Chapter 11: the GRPO family, variant by variant, against TRL's GRPOTrainer
# ---------------------------------------------------------------------------

# Each variant TRL 1.16 implements, as the GRPOConfig fields that select it (beside make_trainer's).
TRL_FAMILY = {
    "GRPO": {"loss_type": "grpo"},
    "DAPO (clip-higher, token mean)": {"loss_type": "dapo", "epsilon_high": 0.28},
    "BNPO (token mean of the local batch)": {"loss_type": "bnpo"},
    "Dr. GRPO": {"loss_type": "dr_grpo", "scale_rewards": "none"},
    "GSPO": {"loss_type": "grpo", "importance_sampling_level": "sequence"},
    "LUSPO (GSPO, each response weighed by its length)": {
        "loss_type": "luspo",
        "importance_sampling_level": "sequence",
    },
    "CISPO": {"loss_type": "cispo", "epsilon_high": 5.0},
    "CISPO, the cap binding": {"loss_type": "cispo", "epsilon_high": 1.1},
    "SAPO": {"loss_type": "sapo"},
}

# TRL's loss_type -> the course's aggregate_loss mode and max_len (None: T; "max_completion_length": TRL's).
AGGREGATION = {
    "grpo": ("seq-mean-token-mean", None),
    "sapo": ("seq-mean-token-mean", None),
    "dapo": ("token-mean", None),
    "bnpo": ("token-mean", None),
    "cispo": ("token-mean", None),
    "dr_grpo": ("seq-mean-token-sum-norm", "max_completion_length"),
    "luspo": ("seq-mean-token-sum-norm", 1),  # the sum over each response's tokens, then the mean
}

# What one has and the other lacks, for the chapter's table.
TRL_LACKS = {
    "RLOO in GRPOTrainer": "RLOOTrainer has it, with its own loss (a PPO clip on summed sequence log-probs)",
    "REINFORCE++(-baseline)": "scale_rewards='batch' divides by the raw rewards' std, not the centred ones'",
    "DAPO's dynamic sampling": "it logs frac_reward_zero_std but keeps those groups; no refill",
    "PPO with a value model": "not in GRPOTrainer",
}
COURSE_LACKS = {"vespo": "VESPO's Gamma-shaped sequence weights (arXiv 2602.10693)"}

# Variants TRL ships outside GRPOTrainer's loss types, each compared by its own function here.
TRL_EXPERIMENTAL = {
    "GMPO": "trl.experimental.gmpo.GMPOTrainer (GMPOConfig: epsilon 0.4 in log space; verl: loss_mode='geo_mean')",
}


def family_loss(trainer, logp, logp_old, logp_ref, adv, mask):
    """The course's loss for the variant a TRL ``GRPOTrainer`` is set to: a family per-token loss, k3, aggregation.

    Args:
        trainer: its ``loss_type``, ``importance_sampling_level``, ``epsilon_low``/``epsilon_high``,
            ``beta`` and ``max_completion_length`` choose the variant.
        logp, logp_old, logp_ref, mask: ``[N, T]``.
        adv: ``[N]`` one advantage per completion.
    """
    kind, low, high = trainer.loss_type, trainer.epsilon_low, trainer.epsilon_high
    adv_tokens = adv[:, None].expand_as(logp)  # (N, T)
    if trainer.importance_sampling_level == "sequence":
        if kind not in ("grpo", "bnpo", "dapo", "dr_grpo", "luspo"):
            raise ValueError(f"trainer: the sequence level is compared for the clipped losses only, not {kind!r}")
        per_token = family.gspo_loss(logp, logp_old, adv, mask, low, high)
    elif kind == "cispo":
        per_token = family.cispo_loss(logp, logp_old, adv_tokens, clip_eps_high=high - 1.0)  # TRL caps at epsilon_high
    elif kind == "sapo":
        per_token = family.sapo_loss(
            logp, logp_old, adv_tokens, trainer.args.sapo_temperature_pos, trainer.args.sapo_temperature_neg
        )
    else:
        per_token = clipped_surrogate(logp, logp_old, adv_tokens, low, high)
    per_token = per_token + trainer.beta * kl_estimate(logp, logp_ref.detach(), "k3")
    mode, max_len = AGGREGATION[kind]
    max_len = trainer.max_completion_length if max_len == "max_completion_length" else max_len
    return aggregate_loss(per_token, mask, mode, max_len)


def trl_and_course_family(trainer, batch: dict, with_old: bool = True) -> dict:
    """Like :func:`trl_and_course`, with :func:`family_loss` on the course's side (any TRL loss_type but vespo).

    The result also holds ``outside_clip``: the fraction of valid tokens (of responses, at the sequence
    level) whose ratio is outside the clip range (above the cap, for CISPO).
    """
    adv = group_advantages(batch["rewards"], normalize_std=trainer.scale_rewards != "none").flatten()  # (N,)
    mask, seen = batch["completion_mask"], {}

    def course_loss(logp, logp_old):
        with torch.no_grad():  # how often the batch leaves the clip range: the comparison must reach the clip
            if trainer.importance_sampling_level == "sequence":
                ratio, valid = torch.exp(family.gspo_sequence_log_ratio(logp, logp_old, mask)), mask.sum(-1) > 0
            else:
                ratio, valid = torch.exp(logp - logp_old), mask > 0
            low = 0.0 if trainer.loss_type == "cispo" else 1.0 - trainer.epsilon_low
            high = trainer.epsilon_high if trainer.loss_type == "cispo" else 1.0 + trainer.epsilon_high
            seen["outside_clip"] = ((ratio < low) | (ratio > high))[valid].float().mean().item()
        return family_loss(trainer, logp, logp_old, batch["logp_ref"], adv, mask)

    return {**_compare(trainer, batch, adv, course_loss, with_old), **seen}


def trl_loss_types() -> list[str]:
    """The loss types the installed TRL lists in ``GRPOConfig.loss_type``'s help."""
    import re

    from trl import GRPOConfig

    help_text = GRPOConfig.__dataclass_fields__["loss_type"].metadata["help"]
    supported = help_text[help_text.index("Supported values are") :].split(". ")[0]
    return re.findall(r"'(\w+)'", supported)


def make_rloo_trainer(
    model: str,
    problems,
    output_dir: str,
    group_size: int,
    reward_weights: dict = data.DEFAULT_REWARD_WEIGHTS,
    **overrides,
):
    """TRL's ``RLOOTrainer`` on the course's prompts and rewards (CPU, quiet), for the RLOO agreement."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import RLOOConfig, RLOOTrainer

    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.padding_side = "left"
    functions, weights = data.trl_reward_functions(reward_weights)
    kwargs = dict(
        output_dir=output_dir,
        per_device_train_batch_size=2 * group_size,
        num_generations=group_size,
        max_completion_length=8,
        beta=0.0,
        max_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        disable_tqdm=True,
        dataloader_num_workers=0,
        reward_weights=weights,
        save_strategy="no",
    )
    kwargs.update(overrides)
    dataset = Dataset.from_dict(
        {"prompt": [data.format_prompt(q, tokenizer) for q, _ in problems], "answer": [str(a) for _, a in problems]}
    )
    return RLOOTrainer(
        model=model,
        reward_funcs=functions,
        args=RLOOConfig(**kwargs),
        train_dataset=dataset,
        processing_class=tokenizer,
    )


def rloo_trl_and_course(trainer, batch: dict) -> dict:
    """TRL's RLOO loss and the course's, value and gradient, on :func:`fixed_batch` with the course's RLOO advantages.

    TRL's ``RLOOTrainer`` clips the ratio of whole sequences, ``exp(sum_t logp - sum_t logp_old)``,
    and averages over completions: the course writes it as PPO's ``clipped_surrogate`` on the
    summed log-probs (one "action" per completion).
    """
    mask = batch["completion_mask"]
    adv = family.rloo_advantages(batch["rewards"]).flatten()  # (N,)
    inputs_extra = {"old_logps": torch.where(mask > 0, batch["logp_old"], 0.0).sum(-1), "advantages": adv}
    trainer_inputs = {k: batch[k] for k in ("prompt_ids", "prompt_mask", "completion_ids")}
    trainer_inputs.update(completion_mask=mask, **inputs_extra)
    trainer.model.train()
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    trainer.model.zero_grad()
    trl_loss = trainer.compute_loss(trainer.model, trainer_inputs)
    trl_loss.backward()
    trl_grads = [p.grad.clone() for p in params]
    trainer.model.zero_grad()
    logp = lm_sampling.token_logps(trainer.model, batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"])
    seq_logp = masked_sum(logp, mask, dim=-1)[0]  # (N,)
    course = clipped_surrogate(
        seq_logp, inputs_extra["old_logps"], adv, trainer.epsilon_low, trainer.epsilon_high
    ).mean()
    course.backward()
    course_grads = [p.grad.clone() for p in params]
    trainer.model.zero_grad()
    return {
        "trl_loss": trl_loss.item(),
        "course_loss": course.item(),
        "loss_diff": abs(trl_loss.item() - course.item()),
        "grad_diff": max((a - b).abs().max().item() for a, b in zip(trl_grads, course_grads)),
        "grad_max": max(a.abs().max().item() for a in trl_grads),
    }


def make_gmpo_trainer(model: str, problems, config, output_dir: str, **overrides):
    """TRL's experimental ``GMPOTrainer`` (``trl.experimental.gmpo``) on the course's prompts and rewards."""
    from trl.experimental.gmpo import GMPOConfig, GMPOTrainer

    from course_lib.hf.trl_grpo import make_trainer

    return make_trainer(
        model,
        problems,
        config,
        output_dir,
        progress=False,
        trainer_class=GMPOTrainer,
        config_class=GMPOConfig,
        **overrides,
    )


def gmpo_trl_and_course(trainer, batch: dict, with_old: bool = True) -> dict:
    """TRL's GMPO loss (``GMPOTrainer._compute_loss``) and the course's, value and gradient, on :func:`fixed_batch`.

    The course's side is :func:`course_lib.family.gmpo_loss` (its clip range in log space, as TRL's
    ``epsilon``/``epsilon_high``) plus ``beta`` times k3 at every token, averaged over each completion's tokens and
    then over completions (``seq-mean-token-mean``): TRL's sequence-averaged KL added to each sequence's loss. The
    result also holds ``outside_clip``, the share of valid tokens whose log-ratio is outside the range.
    """
    adv = group_advantages(batch["rewards"]).flatten()  # (N,)
    mask, seen = batch["completion_mask"], {}
    low, high = trainer.epsilon_low, trainer.epsilon_high

    def course_loss(logp, logp_old):
        with torch.no_grad():
            log_ratio = (logp - logp_old)[mask > 0]
            seen["outside_clip"] = ((log_ratio < -low) | (log_ratio > high)).float().mean().item()
        per_token = family.gmpo_loss(logp, logp_old, adv, mask, low, high)  # (N, T)
        per_token = per_token + trainer.beta * kl_estimate(logp, batch["logp_ref"].detach(), "k3")
        return aggregate_loss(per_token, mask, "seq-mean-token-mean")

    return {**_compare(trainer, batch, adv, course_loss, with_old), **seen}
