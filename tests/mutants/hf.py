"""Classic wrong (and correct) ways to write the exercises of chapter 09 (TRL).

``answer_reward(prompts, completions, answer, **kwargs)``, ``completion_logps(model, sequences, prompt_mask,
eos_id, temperature=1.0)`` and ``grpo_config_kwargs(cfg, num_processes=1)``, checked by ``course_lib.checks.hf``.
"""

import catalogue_round7_09_11 as round7
import torch

from course_lib.rewards import math_answer_reward

# ---------------------------------------------------------------------------
# answer_reward
# ---------------------------------------------------------------------------


def _text(completion):
    return completion if isinstance(completion, str) else completion[-1]["content"]


def reward_answer_misnamed(prompts, completions, solution, **kwargs):
    return [None if s is None else math_answer_reward(_text(c), s) for c, s in zip(completions, solution)]


def reward_without_kwargs(prompts, completions, answer):
    return [None if a is None else math_answer_reward(_text(c), a) for c, a in zip(completions, answer)]


def reward_returns_tensor(prompts, completions, answer, **kwargs):
    return torch.tensor(
        [float("nan") if a is None else math_answer_reward(_text(c), a) for c, a in zip(completions, answer)]
    )


def reward_returns_mean(prompts, completions, answer, **kwargs):
    rewards = [0.0 if a is None else math_answer_reward(_text(c), a) for c, a in zip(completions, answer)]
    return sum(rewards) / len(rewards)


def reward_answer_per_prompt(prompts, completions, answer, **kwargs):
    distinct = [p for i, p in enumerate(prompts) if prompts.index(p) == i]
    G = len(completions) // len(distinct)
    return [
        None if answer[i // G] is None else math_answer_reward(_text(c), answer[i // G])
        for i, c in enumerate(completions)
    ]


def reward_one_per_prompt(prompts, completions, answer, **kwargs):
    firsts = [i for i, p in enumerate(prompts) if prompts.index(p) == i]
    return [math_answer_reward(_text(completions[i]), answer[i]) for i in firsts]


def reward_str_of_messages(prompts, completions, answer, **kwargs):
    return [
        None if a is None else math_answer_reward(c if isinstance(c, str) else str(c), a)
        for c, a in zip(completions, answer)
    ]


def reward_plain_text_only(prompts, completions, answer, **kwargs):
    return [None if a is None else math_answer_reward(c, a) for c, a in zip(completions, answer)]


def reward_first_message(prompts, completions, answer, **kwargs):
    texts = [c if isinstance(c, str) else c[0]["content"] for c in completions]
    return [None if a is None else math_answer_reward(t, a) for t, a in zip(texts, answer)]


def reward_joins_messages(prompts, completions, answer, **kwargs):
    texts = [c if isinstance(c, str) else "\n".join(m["content"] for m in c) for c in completions]
    return [None if a is None else math_answer_reward(t, a) for t, a in zip(texts, answer)]


def reward_none_is_zero(prompts, completions, answer, **kwargs):
    return [0.0 if a is None else math_answer_reward(_text(c), a) for c, a in zip(completions, answer)]


def reward_none_unhandled(prompts, completions, answer, **kwargs):
    return [math_answer_reward(_text(c), a) for c, a in zip(completions, answer)]


def reward_keyword_only(*, completions, answer, **kwargs):
    """Correct: keyword-only parameters, prompts left in **kwargs, ints for rewards."""
    out = []
    for completion, truth in zip(completions, answer):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        out.append(None if truth is None else int(math_answer_reward(text, truth)))
    return out


def reward_all_from_kwargs(**kwargs):
    """Correct: everything read from kwargs, a tuple returned."""
    return tuple(
        None if a is None else math_answer_reward(_text(c), a) for c, a in zip(kwargs["completions"], kwargs["answer"])
    )


# ---------------------------------------------------------------------------
# completion_logps
# ---------------------------------------------------------------------------


def _logps(
    model,
    sequences,
    prompt_mask,
    eos_id,
    temperature=1.0,
    *,
    shift=1,
    attend=True,
    scale="logits",
    mask="first",
    no_grad=False,
    attention_tail="ones",
    first_position=0,
):
    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    is_eos = (completion == eos_id).long()
    first = (is_eos.cumsum(-1) - is_eos) == 0
    tail = first.long() if attention_tail == "mask" else torch.ones_like(completion)
    attention = torch.cat([prompt_mask.long(), tail], dim=1)
    with torch.set_grad_enabled(not no_grad):
        positions = None
        if attend and first_position is not None:  # as generate() counts them: 0 at the first real token
            positions = (attention.cumsum(-1) - 1).clamp(min=0) + first_position
        logits = model(input_ids=sequences, attention_mask=attention if attend else None, position_ids=positions).logits
        logits = logits[:, P - shift : sequences.shape[1] - shift]
        if scale == "logits":
            logits = logits / temperature
        logp = torch.log_softmax(logits, -1)
        if scale == "logp":
            logp = logp / temperature
        logp = logp.gather(-1, completion.unsqueeze(-1)).squeeze(-1)
    masks = {
        "first": first,
        "without_eos": is_eos.cumsum(-1) == 0,
        "all": torch.ones_like(first),
        "not_eos": completion != eos_id,
    }
    return logp, masks[mask].float()


def logps_no_shift(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, shift=0)


def logps_mask_without_eos(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, mask="without_eos")


def logps_mask_after_eos(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, mask="all")


def logps_mask_not_eos(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, mask="not_eos")


def logps_no_attention_mask(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, attend=False)


def logps_no_position_ids(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, first_position=None)


def logps_no_temperature(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, scale="none")


def logps_temperature_on_logp(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, scale="logp")


def logps_no_grad(model, sequences, prompt_mask, eos_id, temperature=1.0):
    return _logps(model, sequences, prompt_mask, eos_id, temperature, no_grad=True)


def logps_whole_sequence(model, sequences, prompt_mask, eos_id, temperature=1.0):
    attention = torch.cat([prompt_mask.long(), torch.ones_like(sequences[:, prompt_mask.shape[1] :])], dim=1)
    logits = model(input_ids=sequences, attention_mask=attention).logits[:, :-1] / temperature
    logp = torch.log_softmax(logits, -1).gather(-1, sequences[:, 1:, None]).squeeze(-1)
    return logp, _logps(model, sequences, prompt_mask, eos_id, temperature)[1]


def logps_attention_masks_after_eos(model, sequences, prompt_mask, eos_id, temperature=1.0):
    """Correct: TRL's attention mask, cat([prompt_mask, completion_mask]) (differs only after EOS)."""
    return _logps(model, sequences, prompt_mask, eos_id, temperature, attention_tail="mask")


def logps_with_positions_and_loop(model, sequences, prompt_mask, eos_id, temperature=1.0):
    """Correct: explicit position ids, a Python loop for the mask, cross_entropy for the log-probs."""
    P = prompt_mask.shape[1]
    attention = torch.cat([prompt_mask.long(), torch.ones_like(sequences[:, P:])], dim=1)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention, position_ids=positions).logits
    logits = logits[:, P - 1 : -1].float() / temperature
    completion = sequences[:, P:]
    logp = -torch.nn.functional.cross_entropy(logits.transpose(1, 2), completion, reduction="none")
    mask = torch.zeros(completion.shape)
    for b in range(completion.shape[0]):
        for t in range(completion.shape[1]):
            mask[b, t] = 1.0
            if completion[b, t] == eos_id:
                break
    return logp, mask


# ---------------------------------------------------------------------------
# grpo_config_kwargs
# ---------------------------------------------------------------------------

_LOSS = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}


_SWITCHES = {
    "algo": "grpo",
    "adv_estimator": "grpo",
    "policy_loss": "clip",
    "dynamic_sampling": False,
    "overlong_cache": 0,
    "kl_placement": "loss",
    "whiten_advantages": False,
}


def _refuse(cfg, num_processes, switches=True, sizes=True):
    """ValueError for what GRPOConfig cannot express: another switch than GRPO's, sizes that do not split."""
    for name, default in _SWITCHES.items() if switches else ():
        if getattr(cfg, name) != default:
            raise ValueError(f"cfg.{name}: no GRPOConfig field for {getattr(cfg, name)!r}")
    B, G, M = cfg.prompts_per_step, cfg.group_size, cfg.num_minibatches
    per_process = B * G // M // num_processes
    if sizes and (B * G % M or B * G // M % num_processes or per_process % (cfg.micro_batch_size or per_process)):
        raise ValueError("num_processes: the completions do not split evenly")


def _config(cfg, num_processes=1, *, switches=True, sizes=True, divide=int.__floordiv__, **changes):
    _refuse(cfg, num_processes, switches, sizes)
    B, G, K, M = cfg.prompts_per_step, cfg.group_size, cfg.update_epochs, cfg.num_minibatches
    per_process = divide(divide(B * G, M), num_processes)
    micro = cfg.micro_batch_size or per_process
    kwargs = dict(
        num_generations=G,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=divide(per_process, micro),
        steps_per_generation=M * divide(per_process, micro),
        num_iterations=K,
        max_steps=cfg.iterations * K * M,
        max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        learning_rate=cfg.lr,
        warmup_steps=cfg.warmup_iterations * K * M,
        max_grad_norm=cfg.max_grad_norm,
        lr_scheduler_type={"constant": "constant_with_warmup" if cfg.warmup_iterations else "constant"}.get(
            cfg.lr_schedule, cfg.lr_schedule
        ),
        beta=cfg.kl_coef,
        use_bias_correction_kl=False,
        epsilon=cfg.clip_eps,
        epsilon_high=cfg.clip_eps_high,
        loss_type=_LOSS[cfg.loss_agg],
        scale_rewards="group" if cfg.normalize_std else "none",
        mask_truncated_completions=cfg.overlong_filter,
        seed=cfg.seed,
    )
    for key, value in changes.items():
        if value is None:
            kwargs.pop(key)
        else:
            kwargs[key] = value(cfg, kwargs) if callable(value) else value
    return kwargs


def config_true_division(cfg, num_processes=1):
    """/ where // is meant: every count a float (16.0), which TRL's trainer cannot take."""
    return _config(cfg, num_processes, divide=lambda a, b: a / b)


def config_accumulation_whole_minibatch(cfg, num_processes=1):
    def whole(c, k):
        return c.prompts_per_step * c.group_size // c.num_minibatches // k["per_device_train_batch_size"]

    return _config(
        cfg,
        num_processes,
        gradient_accumulation_steps=whole,
        steps_per_generation=lambda c, k: c.num_minibatches * whole(c, k),
    )


def config_drops_switches(cfg, num_processes=1):
    return _config(cfg, num_processes, switches=False)


def config_refuses_adv_estimator_only(cfg, num_processes=1):
    """Issue 44's student: refuses the switch the notebook shows (adv_estimator), drops every other one."""
    if cfg.adv_estimator != _SWITCHES["adv_estimator"]:
        raise ValueError(f"cfg.adv_estimator: no GRPOConfig field for {cfg.adv_estimator!r}")
    return _config(cfg, num_processes, switches=False)


def config_floors_uneven_sizes(cfg, num_processes=1):
    return _config(cfg, num_processes, sizes=False)


def config_batch_in_prompts(cfg, num_processes=1):
    return _config(
        cfg, num_processes, per_device_train_batch_size=lambda c, k: k["per_device_train_batch_size"] // c.group_size
    )


def config_max_steps_rounds(cfg, num_processes=1):
    return _config(cfg, num_processes, max_steps=lambda c, k: c.iterations)


def config_max_steps_epochs_only(cfg, num_processes=1):
    return _config(cfg, num_processes, max_steps=lambda c, k: c.iterations * c.update_epochs)


def config_warmup_in_rounds(cfg, num_processes=1):
    return _config(cfg, num_processes, warmup_steps=lambda c, k: c.warmup_iterations)


def config_no_steps_per_generation(cfg, num_processes=1):
    return _config(cfg, num_processes, steps_per_generation=None)


def config_processes_forgotten(cfg, num_processes=1):
    return _config(cfg, 1)


def config_loss_type_unset(cfg, num_processes=1):
    return _config(cfg, num_processes, loss_type=None)


def config_loss_names_swapped(cfg, num_processes=1):
    return _config(
        cfg, num_processes, loss_type=lambda c, k: {"grpo": "dapo", "dapo": "grpo"}.get(k["loss_type"], k["loss_type"])
    )


def config_loss_agg_passed_through(cfg, num_processes=1):
    return _config(cfg, num_processes, loss_type=lambda c, k: c.loss_agg)


def config_beta_unset(cfg, num_processes=1):
    return _config(cfg, num_processes, beta=None)


def config_bias_correction_left_on(cfg, num_processes=1):
    return _config(cfg, num_processes, use_bias_correction_kl=None)


def config_constant_ignores_warmup(cfg, num_processes=1):
    return _config(cfg, num_processes, lr_scheduler_type=lambda c, k: c.lr_schedule)


def config_course_names(cfg, num_processes=1):
    return {**_config(cfg, num_processes), "group_size": cfg.group_size}


def config_explicit_defaults_and_bools(cfg, num_processes=1):
    """Correct: scale_rewards as a bool (TRL converts it), epsilon_high left None, defaults spelled out."""
    kwargs = _config(
        cfg,
        num_processes,
        scale_rewards=lambda c, k: c.normalize_std,
        epsilon_high=lambda c, k: c.clip_eps_high if c.clip_eps_high is not None else None,
    )
    kwargs["top_k"] = 0  # TRL's default: the whole distribution
    if kwargs["epsilon_high"] is None:
        kwargs.pop("epsilon_high")
    return kwargs


def config_accumulation_left_default(cfg, num_processes=1):
    """Correct: gradient_accumulation_steps left at its default where it is 1, no warm-up key when there is none."""
    kwargs = _config(cfg, num_processes)
    if kwargs["gradient_accumulation_steps"] == 1:
        kwargs.pop("gradient_accumulation_steps")
    if kwargs["warmup_steps"] == 0:
        kwargs.pop("warmup_steps")
    return kwargs


MUTANTS = [
    ("answer_reward", reward_answer_misnamed, "call it answer"),
    ("answer_reward", reward_without_kwargs, "**kwargs"),
    ("answer_reward", reward_returns_tensor, "list"),
    ("answer_reward", reward_returns_mean, "one reward per completion"),
    ("answer_reward", reward_answer_per_prompt, "answer[i // G]"),
    ("answer_reward", reward_one_per_prompt, "one reward per distinct prompt"),
    ("answer_reward", reward_str_of_messages, "str() of it"),
    ("answer_reward", reward_plain_text_only, "completion[-1]['content']"),
    ("answer_reward", reward_first_message, "not the first"),
    ("answer_reward", reward_joins_messages, "every message of the completion joined"),
    ("answer_reward", reward_none_is_zero, "a punishment"),
    ("answer_reward", reward_none_unhandled, "return None for them"),
    ("completion_logps", logps_no_shift, "no shift"),
    ("completion_logps", logps_mask_without_eos, "leaves out the EOS"),
    ("completion_logps", logps_mask_after_eos, "after EOS"),
    ("completion_logps", logps_mask_not_eos, "token != EOS"),
    ("completion_logps", logps_no_attention_mask, "attention mask is ignored"),
    ("completion_logps", logps_no_position_ids, "positions count the left padding"),
    ("completion_logps", logps_no_temperature, "no temperature"),
    ("completion_logps", logps_temperature_on_logp, "divides the log-probs"),
    ("completion_logps", logps_no_grad, "no gradient"),
    ("completion_logps", logps_whole_sequence, "shape"),
    ("grpo_config_kwargs", config_true_division, "is a float: GRPOConfig's"),
    ("grpo_config_kwargs", config_accumulation_whole_minibatch, "gradient_accumulation_steps counts one process's"),
    ("grpo_config_kwargs", config_drops_switches, "cannot express"),
    ("grpo_config_kwargs", config_refuses_adv_estimator_only, "only adv_estimator is refused"),
    ("grpo_config_kwargs", config_floors_uneven_sizes, "rounded down"),
    ("grpo_config_kwargs", config_batch_in_prompts, "counts completions, not prompts"),
    ("grpo_config_kwargs", config_max_steps_rounds, "not the course's rounds"),
    ("grpo_config_kwargs", config_max_steps_epochs_only, "forgets the minibatches"),
    ("grpo_config_kwargs", config_warmup_in_rounds, "warmup_steps counts optimiser steps"),
    ("grpo_config_kwargs", config_no_steps_per_generation, "steps_per_generation is not set"),
    ("grpo_config_kwargs", config_processes_forgotten, "processes are forgotten"),
    ("grpo_config_kwargs", config_loss_type_unset, "loss_type is not set"),
    ("grpo_config_kwargs", config_loss_names_swapped, "names are swapped"),
    ("grpo_config_kwargs", config_loss_agg_passed_through, "not one of TRL's names"),
    ("grpo_config_kwargs", config_beta_unset, "beta is not set"),
    ("grpo_config_kwargs", config_bias_correction_left_on, "use_bias_correction_kl"),
    ("grpo_config_kwargs", config_constant_ignores_warmup, "constant_with_warmup"),
    ("grpo_config_kwargs", config_course_names, "no field 'group_size'"),
]


def logps_with_trl_gather(model, sequences, prompt_mask, eos_id, temperature=1.0):
    """Correct: TRL's selective_log_softmax for the gather, which this exercise allows (chapter 02's own, in TRL)."""
    from trl.trainer.utils import selective_log_softmax

    P = prompt_mask.shape[1]
    completion = sequences[:, P:]
    attention = torch.cat([prompt_mask.long(), torch.ones_like(completion)], dim=1)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention, position_ids=positions).logits
    logp = selective_log_softmax(logits[:, P - 1 : -1].float() / temperature, completion)
    is_eos = (completion == eos_id).long()
    return logp, ((is_eos.cumsum(-1) - is_eos) == 0).float()


VARIANTS = [
    ("completion_logps", logps_with_trl_gather),
    ("answer_reward", reward_keyword_only),
    ("answer_reward", reward_all_from_kwargs),
    ("completion_logps", logps_attention_masks_after_eos),
    ("completion_logps", logps_with_positions_and_loop),
    ("grpo_config_kwargs", config_explicit_defaults_and_bools),
    ("grpo_config_kwargs", config_accumulation_left_default),
]

# Round seven (chapter 09): the new wrong answers of tests/catalogue_round7_09_11.py, each named by its check.
MUTANTS += [
    ("completion_logps", round7.g09_logps_attend_everything, "all ones"),
    ("completion_logps", round7.g09_logps_mask_cumsum_at_most_one, "cumsum(is_eos) <= 1"),
    ("grpo_config_kwargs", round7.g09_config_micro_defaults_to_one, "micro_batch_size None"),
    ("grpo_config_kwargs", round7.g09_config_dapo_default_high, "DAPO's 0.28"),
    ("completion_logps", round7.h09_logps_every_eos_kept, "to the last EOS"),
    ("completion_logps", round7.h09_logps_mask_from_pad, "'token != PAD'"),
    ("grpo_config_kwargs", round7.h09_config_warmup_without_minibatches, "warmup_steps forgets num_minibatches"),
    ("grpo_config_kwargs", round7.h09_config_max_steps_times_processes, "multiplied by num_processes"),
    ("grpo_config_kwargs", round7.h09_config_epochs_times_minibatches, "num_iterations is the number of epochs"),
    ("answer_reward", round7.w09_reward_last_number, "last number"),
    ("answer_reward", round7.w09_reward_substring, "appears somewhere"),
    ("answer_reward", round7.w09_reward_arguments_swapped, "arguments are swapped"),
    ("answer_reward", round7.w09_reward_scores_prompts, "prompts are scored"),
    ("answer_reward", round7.w09_reward_skips_missing_answers, "left out"),
    ("answer_reward", round7.w09_reward_first_answer_marker, "first 'Answer:'"),
    ("answer_reward", round7.w09_reward_plus_minus_one, "gets -1"),
    ("answer_reward", round7.w09_reward_whole_text_equal, "whole completion"),
    ("completion_logps", round7.w09_logps_tokens_shifted, "score the token before"),
    ("completion_logps", round7.w09_logps_softmax_over_time, "time axis"),
    ("completion_logps", round7.w09_logps_times_temperature, "multiplied by the temperature"),
    ("completion_logps", round7.w09_logps_returns_mask_first, "wrong order"),
    ("completion_logps", round7.w09_logps_bool_mask, "not a float tensor"),
    ("completion_logps", round7.w09_logps_attention_from_pad, "PAD id"),
    ("completion_logps", round7.w09_logps_mask_one_past_eos, "to the second"),
    ("completion_logps", round7.w09_logps_positions_ignore_padding, "positions count the left padding"),
    ("grpo_config_kwargs", round7.w09_config_no_temperature, "temperature is left at TRL's default"),
    ("grpo_config_kwargs", round7.w09_config_no_overlong_filter, "mask_truncated_completions is left at TRL's default"),
    ("grpo_config_kwargs", round7.w09_config_epsilon_high_as_cap, "not the cap"),
    ("grpo_config_kwargs", round7.w09_config_num_generations_is_b, "num_generations is the group size"),
    ("grpo_config_kwargs", round7.w09_config_micro_batch_ignored, "micro_batch_size is ignored"),
    ("grpo_config_kwargs", round7.w09_config_steps_per_generation_is_m, "steps_per_generation counts forward passes"),
    ("grpo_config_kwargs", round7.w09_config_token_mean_is_bnpo, "'bnpo'"),
    ("grpo_config_kwargs", round7.w09_config_max_steps_counts_forward_passes, "max_steps counts optimiser steps"),
    ("grpo_config_kwargs", round7.w09_config_warmup_ratio, "warmup_ratio"),
]
VARIANTS += [
    ("grpo_config_kwargs", round7.r09_config_constant_with_zero_warmup),
]
