"""Where the course meets TRL: the three things a ``GRPOTrainer`` user writes or must understand.

Chapter 09's exercises, each the reference its check compares a student's function with:

1. :func:`answer_reward`: a reward function in TRL's calling convention. ``GRPOTrainer`` calls every
   reward function with keyword arguments only: ``prompts``, ``completions``, ``completion_ids``, every
   other column of the dataset under its own name (``answer`` here), and ``trainer_state``,
   ``log_extra``, ``log_metric`` (TRL 1.16, ``GRPOTrainer._calculate_rewards``). It wants a list with one
   float per completion back, ``None`` where the function has nothing to say (TRL turns it into NaN and
   leaves it out of the sum over reward functions).
2. :func:`completion_logps`: what TRL's ``_get_per_token_logps`` computes from ``model.generate``'s
   output: the completion mask (through the first EOS) and the per-token log-probs of the completion,
   one forward pass over the left-padded prompt and the completion, logits shifted by one, divided by
   the sampling temperature. It is the course's :func:`course_lib.lm_sampling.completion_mask` and
   :func:`course_lib.lm_sampling.token_logps`, called on the two halves of the sequences.
3. :func:`grpo_config_kwargs`: a course config (:class:`course_lib.lm_rl_config.LMRLConfig`) as the keyword
   arguments of TRL's ``GRPOConfig``. TRL counts completions, not prompts, and optimiser steps, not
   rounds: one round of ``B`` prompts, ``G`` completions each, ``K`` epochs of ``M`` minibatches is
   ``B * G / M`` completions per optimiser step and ``K * M`` optimiser steps.

Shapes: ``B`` prompts (or sequences), ``G`` completions per prompt, ``P`` prompt tokens (left-padded),
``L`` completion tokens, ``V`` vocabulary.
"""

from __future__ import annotations

import torch

from course_lib import _validate
from course_lib.lm_rl import LMRLConfig
from course_lib.lm_sampling import completion_mask, token_logps
from course_lib.rewards import math_answer_reward

# course loss_agg -> TRL loss_type: the three aggregations of chapter 06 under TRL's names
LOSS_TYPES = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}


# ---------------------------------------------------------------------------
# 1. A reward function as TRL calls it
# ---------------------------------------------------------------------------


def completion_text(completion) -> str:
    """The text of one completion as TRL passes it: a string, or a conversation (a list of messages).

    With a conversational dataset (prompts are lists of ``{"role", "content"}`` messages) TRL 1.16 passes
    each completion as a list of messages too, ``[{"role": "assistant", "content": "..."}]``, longer when
    tools were called; the final answer is in the last message.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return completion[-1].get("content") or ""
    raise ValueError(f"completions: expected strings or lists of messages, got {type(completion).__name__}")


def answer_reward(prompts: list, completions: list, answer: list, **kwargs) -> list[float | None]:
    """TRL's reward function for a dataset with an ``answer`` column: 1.0 for a correct final answer, else 0.0.

    TRL calls it with keyword arguments only: ``prompts``, ``completions``, ``completion_ids``, each other
    dataset column under its own name (here ``answer``) and its own ``trainer_state``, ``log_extra`` and
    ``log_metric``; ``**kwargs`` takes every one this function does not use. Each list holds one entry per
    completion, ``B * G`` in all: TRL has already repeated every prompt and every column ``G`` times, so
    ``answer[i]`` belongs to ``completions[i]``.

    Args:
        prompts: ``B * G`` prompts (strings, or lists of messages).
        completions: ``B * G`` completions: strings, or lists of messages (the last one holds the answer).
        answer: ``B * G`` reference answers (strings); ``None`` where the row has no answer.

    Returns:
        One reward per completion: ``math_answer_reward`` of its text (chapter 01's answer extraction), or
        ``None`` where ``answer`` is ``None`` (TRL reads None as "no reward", NaN, left out of the sum).
    """
    if len(answer) != len(completions):
        raise ValueError(f"answer: expected one per completion ({len(completions)}), got {len(answer)}")
    return [
        None if truth is None else math_answer_reward(completion_text(completion), str(truth))
        for completion, truth in zip(completions, answer)
    ]


# ---------------------------------------------------------------------------
# 2. The completion mask and per-token log-probs from model.generate's output
# ---------------------------------------------------------------------------


def _check_generated(sequences, prompt_mask) -> None:
    """``sequences`` are ``(B, P + L)`` integer ids and ``prompt_mask`` their ``(B, P)`` prompt part's mask."""
    _validate.require_tensor("sequences", sequences, floating=False, min_dim=2)
    _validate.require_tensor("prompt_mask", prompt_mask, floating=False, min_dim=2)
    if sequences.is_floating_point() or sequences.dim() != 2:
        raise ValueError(f"sequences: expected (B, P + L) integer ids, got {sequences.dtype} {tuple(sequences.shape)}")
    B, T = sequences.shape
    if prompt_mask.dim() != 2 or prompt_mask.shape[0] != B or prompt_mask.shape[1] >= T:
        raise ValueError(
            f"prompt_mask: expected shape ({B}, P) with P < {T} (the prompt part of sequences), "
            f"got {tuple(prompt_mask.shape)}"
        )


def completion_logps(
    model, sequences: torch.Tensor, prompt_mask: torch.Tensor, eos_id: int, temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs and the completion mask of ``model.generate``'s output, as TRL computes them.

    ``generate`` returns the left-padded prompts with the completions after them; the first ``P`` columns
    are the prompt (``P = prompt_mask.shape[1]``). One forward pass over the whole sequence, with an
    attention mask that hides the left padding (and the positions that go with it, for a model that does not
    derive them from the mask); the logits at
    ``P - 1 + t``, divided by ``temperature``, score completion token ``t``.

    Args:
        model: a ``transformers`` causal LM.
        sequences: ``(B, P + L)`` integer ids, prompt then completion.
        prompt_mask: ``(B, P)`` the prompt's attention mask, 0 on the left padding.
        eos_id: the id of EOS.
        temperature: the sampling temperature (log-probs are those of the distribution sampled from).

    Returns:
        ``(logp, mask)``: ``(B, L)`` log-probs (differentiable), ``(B, L)`` float mask, 1 through the first EOS.
    """
    _check_generated(sequences, prompt_mask)
    P = prompt_mask.shape[1]
    prompt_ids, completion_ids = sequences[:, :P], sequences[:, P:]  # (B, P), (B, L)
    logp = token_logps(model, prompt_ids, prompt_mask, completion_ids, temperature=temperature)  # (B, L)
    return logp, completion_mask(completion_ids, eos_id)


# ---------------------------------------------------------------------------
# 3. A course config as GRPOConfig's keyword arguments
# ---------------------------------------------------------------------------


def _check_translatable(cfg: LMRLConfig) -> None:
    """TRL's GRPOTrainer has no critic and none of the course's other switches: refuse rather than drop them."""
    if not isinstance(cfg, LMRLConfig):
        raise ValueError(f"cfg: expected a course_lib.lm_rl_config.LMRLConfig, got {type(cfg).__name__}")
    cfg.validate()
    for name, supported in (
        ("algo", "grpo"),
        ("adv_estimator", "grpo"),
        ("policy_loss", "clip"),
        ("dynamic_sampling", False),
        ("overlong_cache", 0),
        ("kl_placement", "loss"),
        ("whiten_advantages", False),
    ):
        if getattr(cfg, name) != supported:
            raise ValueError(
                f"cfg.{name}: this translation covers GRPO's defaults ({name}={supported!r}), "
                f"got {getattr(cfg, name)!r}"
            )


def grpo_config_kwargs(cfg: LMRLConfig, num_processes: int = 1) -> dict:
    """The keyword arguments of TRL's ``GRPOConfig`` that train like ``course_lib.lm_rl.train`` with ``cfg``.

    Bookkeeping, not maths, differs. One course round samples ``B * G`` completions and takes
    ``update_epochs * num_minibatches`` optimiser steps on them; in TRL:

    - ``per_device_train_batch_size`` counts completions per process per forward pass: one minibatch is
      ``B * G / num_minibatches`` completions, split over the processes and, with ``micro_batch_size``,
      into ``gradient_accumulation_steps`` forward passes;
    - ``steps_per_generation`` forward passes share one generated batch (``B * G`` completions, ``B``
      prompts); ``num_iterations`` is the number of epochs over it;
    - ``max_steps`` counts optimiser steps: ``iterations * update_epochs * num_minibatches``; the warm-up too.

    Args:
        cfg: the course's hyperparameters (GRPO with PPO's clip; the other switches have no TRL field here).
        num_processes: data-parallel processes (``accelerate launch --num_processes``).

    Returns:
        A dict for ``GRPOConfig(output_dir=..., **kwargs)``.
    """
    _check_translatable(cfg)
    _validate.require_int("num_processes", num_processes, minimum=1)
    B, G, K, M = cfg.prompts_per_step, cfg.group_size, cfg.update_epochs, cfg.num_minibatches
    minibatch = B * G // M  # completions per optimiser step, all processes together
    per_process = minibatch // num_processes
    micro = cfg.micro_batch_size or per_process  # completions per forward pass
    if B * G % M or minibatch % num_processes or per_process % micro:
        raise ValueError(
            f"num_processes: B * G = {B * G} completions must split into num_minibatches={M} "
            f"minibatches, each over num_processes={num_processes} processes in micro-batches of "
            f"micro_batch_size={cfg.micro_batch_size}"
        )
    accumulation = per_process // micro  # forward passes per optimiser step
    steps_per_round = K * M  # optimiser steps on one generated batch
    schedule = (
        cfg.lr_schedule
        if cfg.lr_schedule != "constant"
        else ("constant_with_warmup" if cfg.warmup_iterations else "constant")
    )  # HF's "constant" ignores warm-up
    return dict(
        num_generations=G,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=M * accumulation,
        num_iterations=K,
        max_steps=cfg.iterations * steps_per_round,
        max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        learning_rate=cfg.lr,
        lr_scheduler_type=schedule,
        warmup_steps=cfg.warmup_iterations * steps_per_round,
        max_grad_norm=cfg.max_grad_norm,
        beta=cfg.kl_coef,
        # TRL multiplies its k3 term by pi_theta / pi_old by default; the course's (DeepSeekMath's) does not.
        use_bias_correction_kl=False,
        epsilon=cfg.clip_eps,
        epsilon_high=cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high,
        loss_type=LOSS_TYPES[cfg.loss_agg],
        scale_rewards="group" if cfg.normalize_std else "none",
        mask_truncated_completions=cfg.overlong_filter,  # DAPO's overlong filter
        seed=cfg.seed,
    )
