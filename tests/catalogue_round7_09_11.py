"""Round seven's brainstorm for chapters 09 to 11: new plausible wrong answers, written to widen what the checks name.

Each student is a function with its exercise's signature. ``ROWS`` lists them with the ground truth, as the class
files do: whether the answer is right, and, for a wrong one, one sentence saying exactly what the student did wrong.
None of these repeats a mistake of the catalogue or of classes four to six as it stood before round seven; each
imitates one kind of student (a port of TRL, verl or OpenRLHF conventions, an off-by-one, a Python-number or numpy
habit, a wrong axis, a paper formula misread, a careless edge case, a dtype, in-place or detach slip).

``tests/run_class_four.py --students catalogue_round7_09_11`` runs each exercise's check on each student once, as
its check cell does; ``tests/test_catalogue_round7_09_11.py`` asserts that every wrong one is rejected and named.
This module holds no tests (pytest does not collect it): it is data.
"""

import math
import re

import numpy as np
import torch

from course_lib.lm_rl import LMRLConfig
from course_lib.rewards import math_answer_reward

# ---------------------------------------------------------------------------------------------------------------
# Chapter 09: answer_reward
# ---------------------------------------------------------------------------------------------------------------


def _text(completion):
    if isinstance(completion, str):
        return completion
    return completion[-1]["content"]


def w09_reward_last_number(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        numbers = re.findall(r"-?\d+(?:\.\d+)?", _text(completion).replace(",", ""))
        said = numbers[-1] if numbers else None
        rewards.append(float(said is not None and float(said) == float(truth)))
    return rewards


def w09_reward_substring(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        rewards.append(None if truth is None else float(str(truth) in _text(completion)))
    return rewards


def w09_reward_arguments_swapped(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        rewards.append(None if truth is None else math_answer_reward(str(truth), _text(completion)))
    return rewards


def w09_reward_scores_prompts(prompts, completions, answer, **kwargs):
    rewards = []
    for prompt, truth in zip(prompts, answer):
        rewards.append(None if truth is None else math_answer_reward(_text(prompt), str(truth)))
    return rewards


def w09_reward_skips_missing_answers(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is not None:
            rewards.append(math_answer_reward(_text(completion), str(truth)))
    return rewards


def w09_reward_first_answer_marker(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        text = _text(completion)
        if "Answer:" in text:
            said = text.split("Answer:")[1].strip()
            text = f"Answer: {said}"
        rewards.append(math_answer_reward(text, str(truth)))
    return rewards


def w09_reward_plus_minus_one(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        right = math_answer_reward(_text(completion), str(truth))
        rewards.append(1.0 if right == 1.0 else -1.0)
    return rewards


def w09_reward_whole_text_equal(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        said = _text(completion).strip()
        rewards.append(None if truth is None else float(said == str(truth).strip()))
    return rewards


def w09_reward_last_assistant_message(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if isinstance(completion, str):
            text = completion
        else:
            text = [m["content"] for m in completion if m["role"] == "assistant"][-1]
        rewards.append(None if truth is None else math_answer_reward(text, str(truth)))
    return rewards


# ---------------------------------------------------------------------------------------------------------------
# Chapter 09: completion_logps
# ---------------------------------------------------------------------------------------------------------------


def _first_eos_mask(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    return ((is_eos.cumsum(-1) - is_eos) == 0).float()


def _scaled_logits(model, sequences, prompt_mask, temperature):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    return logits[:, P - 1 : -1].float() / temperature


def w09_logps_tokens_shifted(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    logits = _scaled_logits(model, sequences, prompt_mask, temperature)
    logp_all = torch.log_softmax(logits, dim=-1)
    scored = sequences[:, P - 1 : -1]  # one token early
    logp = logp_all.gather(-1, scored.unsqueeze(-1)).squeeze(-1)
    return logp, _first_eos_mask(sequences[:, P:], eos_id)


def w09_logps_softmax_over_time(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    logits = _scaled_logits(model, sequences, prompt_mask, temperature)
    logp_all = torch.log_softmax(logits, dim=1)
    logp = logp_all.gather(-1, sequences[:, P:].unsqueeze(-1)).squeeze(-1)
    return logp, _first_eos_mask(sequences[:, P:], eos_id)


def w09_logps_times_temperature(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    logits = _scaled_logits(model, sequences, prompt_mask, 1.0) * temperature
    logp = torch.log_softmax(logits, dim=-1).gather(-1, sequences[:, P:].unsqueeze(-1)).squeeze(-1)
    return logp, _first_eos_mask(sequences[:, P:], eos_id)


def w09_logps_returns_mask_first(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    logits = _scaled_logits(model, sequences, prompt_mask, temperature)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, sequences[:, P:].unsqueeze(-1)).squeeze(-1)
    return _first_eos_mask(sequences[:, P:], eos_id), logp


def w09_logps_bool_mask(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    logits = _scaled_logits(model, sequences, prompt_mask, temperature)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, sequences[:, P:].unsqueeze(-1)).squeeze(-1)
    return logp, _first_eos_mask(sequences[:, P:], eos_id).bool()


def w09_logps_attention_from_pad(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    pad_id = model.config.pad_token_id
    attention_mask = (sequences != pad_id).long()  # every PAD hidden, and nothing else
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    logits = logits[:, P - 1 : -1].float() / temperature
    logp = torch.log_softmax(logits, dim=-1).gather(-1, sequences[:, P:].unsqueeze(-1)).squeeze(-1)
    return logp, _first_eos_mask(sequences[:, P:], eos_id)


def w09_logps_mask_one_past_eos(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    logits = _scaled_logits(model, sequences, prompt_mask, temperature)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, sequences[:, P:].unsqueeze(-1)).squeeze(-1)
    is_eos = (sequences[:, P:] == eos_id).long()
    mask = (is_eos.cumsum(-1) - is_eos) <= 1  # "through the EOS", counted one too far
    return logp, mask.float()


def w09_logps_positions_ignore_padding(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    attention_mask = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    position_ids = torch.arange(sequences.shape[1]).expand_as(sequences)
    logits = model(input_ids=sequences, attention_mask=attention_mask, position_ids=position_ids).logits
    logits = logits[:, P - 1 : -1].float() / temperature
    logp = torch.log_softmax(logits, dim=-1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    return logp, _first_eos_mask(completion_ids, eos_id)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 09: grpo_config_kwargs
# ---------------------------------------------------------------------------------------------------------------

_LOSS_TYPES = {"seq-mean-token-mean": "grpo", "token-mean": "dapo", "seq-mean-token-sum-norm": "dr_grpo"}


def _config(cfg, num_processes=1):
    """A right translation, written out; each wrong student below changes one thing of it."""
    defaults = LMRLConfig()
    for switch in ("algo", "adv_estimator", "policy_loss", "dynamic_sampling", "overlong_cache", "kl_placement"):
        if getattr(cfg, switch) != getattr(defaults, switch):
            raise ValueError(f"cfg.{switch} has no GRPOConfig field")
    if cfg.whiten_advantages:
        raise ValueError("cfg.whiten_advantages has no GRPOConfig field")
    completions = cfg.prompts_per_step * cfg.group_size
    if completions % cfg.num_minibatches:
        raise ValueError("num_minibatches does not split B * G")
    minibatch = completions // cfg.num_minibatches
    if minibatch % num_processes:
        raise ValueError("num_processes does not split a minibatch")
    per_process = minibatch // num_processes
    micro = cfg.micro_batch_size or per_process
    if per_process % micro:
        raise ValueError("micro_batch_size does not split a process's share")
    accumulation = per_process // micro
    steps = cfg.update_epochs * cfg.num_minibatches
    schedule = cfg.lr_schedule
    if schedule == "constant" and cfg.warmup_iterations:
        schedule = "constant_with_warmup"
    return {
        "num_generations": cfg.group_size,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": cfg.num_minibatches * accumulation,
        "num_iterations": cfg.update_epochs,
        "max_steps": cfg.iterations * steps,
        "max_completion_length": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "learning_rate": cfg.lr,
        "lr_scheduler_type": schedule,
        "warmup_steps": cfg.warmup_iterations * steps,
        "max_grad_norm": cfg.max_grad_norm,
        "beta": cfg.kl_coef,
        "use_bias_correction_kl": False,
        "epsilon": cfg.clip_eps,
        "epsilon_high": cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high,
        "loss_type": _LOSS_TYPES[cfg.loss_agg],
        "scale_rewards": "group" if cfg.normalize_std else "none",
        "mask_truncated_completions": cfg.overlong_filter,
        "seed": cfg.seed,
    }


def w09_config_no_temperature(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    del kwargs["temperature"]
    return kwargs


def w09_config_no_overlong_filter(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    del kwargs["mask_truncated_completions"]
    return kwargs


def w09_config_epsilon_high_as_cap(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    kwargs["epsilon_high"] = 1 + kwargs["epsilon_high"]
    return kwargs


def w09_config_num_generations_is_b(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    kwargs["num_generations"] = cfg.prompts_per_step
    return kwargs


def w09_config_micro_batch_ignored(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    per_process = cfg.prompts_per_step * cfg.group_size // cfg.num_minibatches // num_processes
    kwargs["per_device_train_batch_size"] = per_process
    kwargs["gradient_accumulation_steps"] = 1
    kwargs["steps_per_generation"] = cfg.num_minibatches
    return kwargs


def w09_config_steps_per_generation_is_m(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    kwargs["steps_per_generation"] = cfg.num_minibatches
    return kwargs


def w09_config_token_mean_is_bnpo(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    if cfg.loss_agg == "token-mean":
        kwargs["loss_type"] = "bnpo"
    return kwargs


def w09_config_max_steps_counts_forward_passes(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    kwargs["max_steps"] = kwargs["max_steps"] * kwargs["gradient_accumulation_steps"]
    return kwargs


def w09_config_warmup_ratio(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    del kwargs["warmup_steps"]
    kwargs["warmup_ratio"] = cfg.warmup_iterations / cfg.iterations
    return kwargs


def r09_config_constant_with_zero_warmup(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    if cfg.lr_schedule == "constant":
        kwargs["lr_scheduler_type"] = "constant_with_warmup"  # 0 warm-up steps: the same constant rate
    return kwargs


# ---------------------------------------------------------------------------------------------------------------
# Chapter 10: pass_at_k
# ---------------------------------------------------------------------------------------------------------------


def _broadcast(n, c, k):
    return torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.long) for x in (n, c, k)))


def w10_pass_at_k_chen_scalar_port(n, c, k):
    # Chen et al.'s numpy code, one prompt at a time
    if n - c < k:
        return torch.tensor(1.0, dtype=torch.float64)
    return torch.tensor(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)), dtype=torch.float64)


def w10_pass_at_k_all_wrong_probability(n, c, k):
    n, c, k = _broadcast(n, c, k)
    out = torch.empty(n.shape, dtype=torch.float64)
    for idx in np.ndindex(*n.shape):
        nn, cc, kk = int(n[idx]), int(c[idx]), int(k[idx])
        if nn - cc < kk:
            out[idx] = 0.0 if cc > 0 else 1.0
        else:
            out[idx] = float(np.prod(1.0 - kk / np.arange(nn - cc + 1, nn + 1)))
    return out  # the chance that every draw is wrong, not 1 minus it


def w10_pass_at_k_union_bound(n, c, k):
    n, c, k = _broadcast(n, c, k)
    return torch.clamp(k.double() * c.double() / n.double(), max=1.0)


def w10_pass_at_k_product_one_short(n, c, k):
    n, c, k = _broadcast(n, c, k)
    out = torch.empty(n.shape, dtype=torch.float64)
    for idx in np.ndindex(*n.shape):
        nn, cc, kk = int(n[idx]), int(c[idx]), int(k[idx])
        if nn - cc < kk:
            out[idx] = float(cc > 0)
        else:
            out[idx] = 1.0 - float(np.prod(1.0 - kk / np.arange(nn - cc + 1, nn)))  # stops at n - 1
    return out


def w10_pass_at_k_integer_division(n, c, k):
    n, c, k = _broadcast(n, c, k)
    j = torch.arange(int(c.max()))
    i = (n - c + 1)[..., None] + j
    factors = torch.where(j < c[..., None], 1 - torch.div(k[..., None], i, rounding_mode="floor"), 1)
    prod = factors.double().prod(-1)
    return torch.where(n - c < k, (c > 0).double(), 1.0 - prod)


def w10_pass_at_k_float32(n, c, k):
    n, c, k = _broadcast(n, c, k)
    j = torch.arange(int(c.max()), dtype=torch.float32)
    i = (n - c + 1).float()[..., None] + j
    factors = torch.where(j < c[..., None], 1.0 - k.float()[..., None] / i, torch.ones(()))
    return torch.where(n - c < k, (c > 0).float(), 1.0 - factors.prod(-1))


def w10_pass_at_k_k_minus_one(n, c, k):
    n, c, k = _broadcast(n, c, k)
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c + 1).double()[..., None] + j
    factors = torch.where(j < c[..., None], 1.0 - (k - 1).double()[..., None] / i, 1.0)  # k - 1 "others"
    return torch.where(n - c < k, (c > 0).double(), 1.0 - factors.prod(-1))


def w10_pass_at_k_python_float(n, c, k):
    if isinstance(n, int) and isinstance(c, int) and isinstance(k, int):
        if n - c < k:
            return float(c > 0)
        return 1.0 - math.comb(n - c, k) / math.comb(n, k)
    n, c, k = _broadcast(n, c, k)
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c + 1).double()[..., None] + j
    factors = torch.where(j < c[..., None], 1.0 - k.double()[..., None] / i, 1.0)
    return torch.where(n - c < k, (c > 0).double(), 1.0 - factors.prod(-1))


def r10_pass_at_k_guard_k_at_least_n(n, c, k):
    n, c, k = _broadcast(n, c, k)
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c + 1).double()[..., None] + j
    factors = torch.where(j < c[..., None], (1.0 - k.double()[..., None] / i).clamp(min=0.0), 1.0)
    # k >= n draws every sample; below it the product has a zero factor wherever n - c < k
    return torch.where(k >= n, (c > 0).double(), 1.0 - factors.prod(-1))


# ---------------------------------------------------------------------------------------------------------------
# Chapter 10: aggregation_token_weight
# ---------------------------------------------------------------------------------------------------------------


def w10_weight_per_row(length, mode, max_len=None):
    o = length.double() if not length.is_floating_point() else length
    rows = o.reshape(-1, o.shape[-1])
    N = rows.shape[-1]  # each prompt's group aggregated alone
    if mode == "seq-mean-token-mean":
        w = 1.0 / (N * rows.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(rows) / rows.sum(-1, keepdim=True).clamp(min=1)
    else:
        top = rows.max(-1, keepdim=True).values.clamp(min=1) if max_len is None else max_len
        w = torch.ones_like(rows) / (N * top)
    return torch.where(rows > 0, w, torch.zeros_like(w)).reshape(o.shape)


def w10_weight_n_from_first_axis(length, mode, max_len=None):
    o = length.double() if not length.is_floating_point() else length
    N = len(o)  # the number of prompts of a (B, G) table, not of responses
    top = o.max().clamp(min=1) if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1.0 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * top)
    return torch.where(o > 0, w, torch.zeros_like(w))


def w10_weight_empty_divides_by_zero(length, mode, max_len=None):
    o = length.double() if not length.is_floating_point() else length
    N = o.numel()
    top = o.max() if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        return 1.0 / (N * o)  # an empty response: 1 / 0
    if mode == "token-mean":
        return torch.where(o > 0, 1.0 / o.sum(), 0.0)
    return torch.where(o > 0, 1.0 / (N * top), 0.0)


def w10_weight_token_mean_empty_not_zero(length, mode, max_len=None):
    o = length.double() if not length.is_floating_point() else length
    N = o.numel()
    top = o.max().clamp(min=1) if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        return torch.where(o > 0, 1.0 / (N * o.clamp(min=1)), 0.0)
    if mode == "token-mean":
        return torch.ones_like(o) / o.sum()  # every entry, empty ones too
    return torch.where(o > 0, 1.0 / (N * top), 0.0)


def w10_weight_default_float32(length, mode, max_len=None):
    o = length.float()  # always float32
    N = o.numel()
    top = o.max().clamp(min=1) if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1.0 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * top)
    return torch.where(o > 0, w, torch.zeros_like(w))


def w10_weight_dr_grpo_mean_length(length, mode, max_len=None):
    o = length.double() if not length.is_floating_point() else length
    N = o.numel()
    top = o.mean() if max_len is None else max_len  # the average length as the constant
    if mode == "seq-mean-token-mean":
        w = 1.0 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * top)
    return torch.where(o > 0, w, torch.zeros_like(w))


def w10_weight_token_mean_normalised_per_response(length, mode, max_len=None):
    o = length.double() if not length.is_floating_point() else length
    N = o.numel()
    top = o.max().clamp(min=1) if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1.0 / (N * o.clamp(min=1))
    elif mode == "token-mean":
        w = o / o.sum()  # a response's share of the tokens, not one token's weight
    else:
        w = torch.ones_like(o) / (N * top)
    return torch.where(o > 0, w, torch.zeros_like(w))


def w10_weight_seq_mean_no_n(length, mode, max_len=None):
    o = length.double() if not length.is_floating_point() else length
    N = o.numel()
    top = o.max().clamp(min=1) if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        w = 1.0 / o.clamp(min=1) / o.sum().clamp(min=1) * o.max()  # a misread of the table
    elif mode == "token-mean":
        w = torch.ones_like(o) / o.sum()
    else:
        w = torch.ones_like(o) / (N * top)
    return torch.where(o > 0, w, torch.zeros_like(w))


# ---------------------------------------------------------------------------------------------------------------
# Chapter 10: completion_style
# ---------------------------------------------------------------------------------------------------------------


def _style(body, n_digits, totals_rule, dots_rule=r"\.+", answer_rule=r"[0-9]+"):
    if re.fullmatch(answer_rule, body):
        return "direct"
    m = re.fullmatch(r"\[([^\[\]]*)\](.*)", body)
    if m is None or not re.fullmatch(answer_rule, m.group(2)):
        return "malformed"
    inside = m.group(1)
    if re.fullmatch(dots_rule, inside):
        return "filler"
    totals = inside.split(",")
    if totals_rule(totals, n_digits):
        return "scratchpad"
    return "malformed"


def _right_totals(totals, n_digits):
    return len(totals) == n_digits and all(re.fullmatch(r"1?[0-9]", t) for t in totals)


def w10_style_prefix_match(text, n_digits=3):
    body = text.split("$")[0]
    if "$" not in text:
        return "malformed"
    if re.match(r"[0-9]+", body):  # re.match anchors at the start only
        return "direct"
    return _style(body, n_digits, _right_totals)


def w10_style_totals_not_counted(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text.split("$")[0]
    return _style(body, n_digits, lambda totals, n: all(re.fullmatch(r"1?[0-9]", t) for t in totals))


def w10_style_totals_one_per_answer_digit(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text.split("$")[0]
    return _style(body, n_digits, lambda totals, n: _right_totals(totals, n + 1))


def w10_style_fixed_dot_count(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text.split("$")[0]
    return _style(body, n_digits, _right_totals, dots_rule=r"\." * (3 * n_digits - 1))


def w10_style_empty_answer_allowed(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text.split("$")[0]
    return _style(body, n_digits, _right_totals, answer_rule=r"[0-9]*")


def w10_style_no_leading_zero_answer(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text.split("$")[0]
    return _style(body, n_digits, _right_totals, answer_rule=r"[1-9][0-9]*|0")


def w10_style_single_digit_totals(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text.split("$")[0]
    return _style(body, n_digits, lambda totals, n: len(totals) == n and all(re.fullmatch(r"[0-9]", t) for t in totals))


def w10_style_empty_brackets_are_filler(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text.split("$")[0]
    return _style(body, n_digits, _right_totals, dots_rule=r"\.*")


def w10_style_totals_up_to_18(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text.split("$")[0]
    return _style(
        body,
        n_digits,
        lambda totals, n: len(totals) == n and all(re.fullmatch(r"1?[0-9]", t) and int(t) <= 18 for t in totals),
    )


# ---------------------------------------------------------------------------------------------------------------
# Chapter 10: style_share
# ---------------------------------------------------------------------------------------------------------------


def _flat(labels):
    return np.asarray(labels, dtype=object).reshape(-1)


def w10_share_percent(labels, style):
    flat = _flat(labels)
    if flat.size == 0:
        raise ValueError("labels: empty")
    return float(100.0 * np.mean(flat == style))


def w10_share_nan_for_empty(labels, style):
    flat = _flat(labels)
    return float(np.sum(flat == style) / flat.size) if flat.size else float("nan")


def w10_share_list_compared_whole(labels, style):
    if len(labels) == 0:
        raise ValueError("labels: empty")
    return float(np.mean(labels == style))  # a list == a string is one False; only an array compares entries


def w10_share_odds(labels, style):
    flat = _flat(labels)
    if flat.size == 0:
        raise ValueError("labels: empty")
    hits = int(np.sum(flat == style))
    return float(hits / max(flat.size - hits, 1))


def w10_share_rounded(labels, style):
    flat = _flat(labels)
    if flat.size == 0:
        raise ValueError("labels: empty")
    return round(float(np.mean(flat == style)), 2)


def w10_share_floor_division(labels, style):
    flat = _flat(labels)
    if flat.size == 0:
        raise ValueError("labels: empty")
    return float(int(np.sum(flat == style)) // flat.size)


def w10_share_tensor(labels, style):
    flat = _flat(labels)
    if flat.size == 0:
        raise ValueError("labels: empty")
    return torch.tensor(np.mean(flat == style), dtype=torch.float64)


def w10_share_distinct_styles(labels, style):
    flat = _flat(labels)
    if flat.size == 0:
        raise ValueError("labels: empty")
    return float(np.sum(flat == style) / len(set(flat.tolist())))  # over the styles seen, not the completions


# ---------------------------------------------------------------------------------------------------------------
# Chapter 11: rloo_advantages
# ---------------------------------------------------------------------------------------------------------------


def w11_rloo_factor_inverted(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return (G - 1) / G * (rewards - rewards.mean(-1, keepdim=True))


def w11_rloo_precedence(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return rewards - (rewards.sum(-1, keepdim=True) - rewards) / G - 1  # / G - 1, not / (G - 1)


def w11_rloo_whole_batch(rewards):
    n = rewards.numel()
    if n == 1:
        return torch.zeros_like(rewards)
    return rewards - (rewards.sum() - rewards) / (n - 1)  # the other responses of every prompt


def w11_rloo_g_from_first_axis(rewards):
    B, G = rewards.shape
    if G == 1:
        return torch.zeros_like(rewards)
    return rewards - (rewards.sum(-1, keepdim=True) - rewards) / max(B - 1, 1)


def w11_rloo_factor_on_mean(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return rewards - G / (G - 1) * rewards.mean(-1, keepdim=True)


def w11_rloo_in_place(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return rewards.zero_()
    baseline = (rewards.sum(-1, keepdim=True) - rewards) / (G - 1)
    return rewards.sub_(baseline)


def w11_rloo_float32(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards, dtype=torch.float32)
    r = rewards.float()
    return r - (r.sum(-1, keepdim=True) - r) / (G - 1)


def w11_rloo_others_mean_only(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return (rewards.sum(-1, keepdim=True) - rewards) / (G - 1)  # the baseline alone, r_i never subtracted from


def w11_rloo_centred_then_scaled_by_g(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return G * (rewards - rewards.mean(-1, keepdim=True)) / (G + 1)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 11: gspo_sequence_log_ratio
# ---------------------------------------------------------------------------------------------------------------


def _where(x, mask):
    return torch.where(mask.bool(), x, torch.zeros_like(x))


def w11_gspo_sign_reversed(logp, logp_old, mask):
    diff = _where(logp_old.detach() - logp, mask)
    return diff.sum(-1) / mask.sum(-1).clamp(min=1)


def w11_gspo_logp_detached(logp, logp_old, mask):
    diff = _where(logp.detach() - logp_old, mask)
    return diff.sum(-1) / mask.sum(-1).clamp(min=1)


def w11_gspo_keepdim(logp, logp_old, mask):
    diff = _where(logp - logp_old.detach(), mask)
    return diff.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)


def w11_gspo_batch_token_count(logp, logp_old, mask):
    diff = _where(logp - logp_old.detach(), mask)
    return diff.sum(-1) / mask.sum().clamp(min=1)  # every valid token of the batch


def w11_gspo_numerator_unmasked(logp, logp_old, mask):
    diff = logp - logp_old.detach()
    return diff.sum(-1) / mask.sum(-1).clamp(min=1)


def w11_gspo_over_batch_axis(logp, logp_old, mask):
    diff = _where(logp - logp_old.detach(), mask)
    return diff.sum(0) / mask.sum(0).clamp(min=1)


def w11_gspo_times_length(logp, logp_old, mask):
    diff = _where(logp - logp_old.detach(), mask)
    share = mask.float().mean(-1)  # the fraction of valid tokens, not their number
    return torch.where(share > 0, diff.sum(-1) / share.clamp(min=1e-9), 0.0)


def w11_gspo_masked_fill_wrong_way(logp, logp_old, mask):
    diff = (logp - logp_old.detach()).masked_fill(mask.bool(), 0.0)  # fills the valid tokens, keeps the padding
    return diff.sum(-1) / mask.sum(-1).clamp(min=1)


def w11_gspo_float32(logp, logp_old, mask):
    diff = _where(logp.float() - logp_old.detach().float(), mask)
    return diff.sum(-1) / mask.float().sum(-1).clamp(min=1)


# ---------------------------------------------------------------------------------------------------------------
# Chapter 11: cispo_loss
# ---------------------------------------------------------------------------------------------------------------


def _weight(logp, logp_old, clip_eps_high, clip_eps=None):
    low = None if clip_eps is None else 1 - clip_eps
    return torch.exp(logp - logp_old.detach()).clamp(min=low, max=1 + clip_eps_high).detach()


def w11_cispo_mean(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    return (-_weight(logp, logp_old, clip_eps_high, clip_eps) * adv.detach() * logp).mean()


def w11_cispo_ratio_inverted(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    low = None if clip_eps is None else 1 - clip_eps
    weight = torch.exp(logp_old.detach() - logp).clamp(min=low, max=1 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w11_cispo_none_lower_bound_crash(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    weight = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps_high).detach()
    return -weight * adv.detach() * logp


def w11_cispo_times_ratio(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    weight = _weight(logp, logp_old, clip_eps_high, clip_eps)
    return -weight * adv.detach() * ratio  # the ratio where logp belongs


def w11_cispo_log_ratio_clipped(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    log_ratio = (logp - logp_old.detach()).clamp(
        min=None if clip_eps is None else -clip_eps, max=clip_eps_high
    )  # the log ratio clipped at eps, not the ratio at 1 + eps
    return -torch.exp(log_ratio).detach() * adv.detach() * logp


def w11_cispo_cap_for_positive_only(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    capped = _weight(logp, logp_old, clip_eps_high, clip_eps)
    weight = torch.where(adv > 0, capped, ratio.detach())  # PPO's habit: clip one side per sign
    return -weight * adv.detach() * logp


def w11_cispo_sequence_mean(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    return (-_weight(logp, logp_old, clip_eps_high, clip_eps) * adv.detach() * logp).mean(-1)


def w11_cispo_float32(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    weight = _weight(logp, logp_old, clip_eps_high, clip_eps).float()
    return -weight * adv.detach().float() * logp.float()


def w11_cispo_logp_old_weighted(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    weight = _weight(logp, logp_old, clip_eps_high, clip_eps)
    return -weight * adv.detach() * (logp - logp_old.detach())  # a log ratio where logp belongs


# ---------------------------------------------------------------------------------------------------------------
# Held out: written after the mistakes above were catalogued, and run once before any change for them
# ---------------------------------------------------------------------------------------------------------------


def h09_reward_own_regex(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        found = re.search(r"Answer:\s*(-?[\d.,]+)", _text(completion))
        said = float(found.group(1).replace(",", "").rstrip(".")) if found else None
        rewards.append(float(said is not None and said == float(truth)))
    return rewards


def h09_reward_int_compare(prompts, completions, answer, **kwargs):
    rewards = []
    for completion, truth in zip(completions, answer):
        if truth is None:
            rewards.append(None)
            continue
        text = _text(completion)
        said = text.rsplit("Answer:", 1)[-1].strip() if "Answer:" in text else ""
        rewards.append(float(said.isdigit() and int(said) == int(truth)))
    return rewards


def h09_logps_every_eos_kept(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    logits = _scaled_logits(model, sequences, prompt_mask, temperature)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, sequences[:, P:].unsqueeze(-1)).squeeze(-1)
    is_eos = sequences[:, P:] == eos_id
    mask = (is_eos.long().cumsum(-1) == 0) | is_eos  # before the first EOS, and every EOS
    return logp, mask.float()


def h09_logps_mask_from_pad(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    logits = _scaled_logits(model, sequences, prompt_mask, temperature)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, sequences[:, P:].unsqueeze(-1)).squeeze(-1)
    return logp, (sequences[:, P:] != model.config.pad_token_id).float()


def h09_config_warmup_without_minibatches(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    kwargs["warmup_steps"] = cfg.warmup_iterations * cfg.update_epochs
    return kwargs


def h09_config_max_steps_times_processes(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    kwargs["max_steps"] = kwargs["max_steps"] * num_processes
    return kwargs


def h09_config_epochs_times_minibatches(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    kwargs["num_iterations"] = cfg.update_epochs * cfg.num_minibatches
    return kwargs


def h10_pass_at_k_plug_in_capped(n, c, k):
    n, c, k = _broadcast(n, c, k)
    return 1.0 - (1.0 - c.double() / n.double()) ** torch.minimum(k, n).double()


def h10_pass_at_k_averaged(n, c, k):
    n, c, k = _broadcast(n, c, k)
    j = torch.arange(int(c.max()), dtype=torch.float64)
    i = (n - c + 1).double()[..., None] + j
    factors = torch.where(j < c[..., None], 1.0 - k.double()[..., None] / i, 1.0)
    per_prompt = torch.where(n - c < k, (c > 0).double(), 1.0 - factors.prod(-1))
    return per_prompt.mean()  # pass@k over the prompts, as a paper reports it


def h10_weight_token_mean_row_loop(length, mode, max_len=None):
    o = length.double() if not length.is_floating_point() else length
    N = o.numel()
    top = o.max().clamp(min=1) if max_len is None else max_len
    if mode == "token-mean":
        w = torch.empty_like(o)
        rows = o.reshape(-1, o.shape[-1])
        for r, row in enumerate(rows):
            w.view(-1, o.shape[-1])[r] = 1.0 / row.sum().clamp(min=1)
    elif mode == "seq-mean-token-mean":
        w = 1.0 / (N * o.clamp(min=1))
    else:
        w = torch.ones_like(o) / (N * top)
    return torch.where(o > 0, w, torch.zeros_like(w))


def h10_weight_nan_for_empty(length, mode, max_len=None):
    o = length.double() if not length.is_floating_point() else length
    N = o.numel()
    top = o.max().clamp(min=1) if max_len is None else max_len
    if mode == "seq-mean-token-mean":
        return 1.0 / (N * o) * (o > 0)  # inf * 0
    if mode == "token-mean":
        return torch.ones_like(o) / o.sum() * (o > 0)
    return torch.ones_like(o) / (N * top) * (o > 0)


def h10_style_leading_zero_totals(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text.split("$")[0]
    return _style(
        body, n_digits, lambda totals, n: len(totals) == n and all(re.fullmatch(r"[01]?[0-9]", t) for t in totals)
    )


def h10_style_default_two_digits(text, n_digits=2):
    if "$" not in text:
        return "malformed"
    return _style(text.split("$")[0], n_digits, _right_totals)


def h10_style_no_eos_check(text, n_digits=3):
    body = text.split("$")[0]  # a text with no EOS is read whole
    return _style(body, n_digits, _right_totals)


def h10_share_counter(labels, style):
    from collections import Counter

    flat = _flat(labels).tolist()
    if not flat:
        raise ValueError("labels: empty")
    return Counter(flat)[style] / len(labels)


def h11_rloo_mean_not_sum(rewards):
    G = rewards.shape[-1]
    if G == 1:
        return torch.zeros_like(rewards)
    return rewards - (rewards.mean(-1, keepdim=True) - rewards) / (G - 1)


def h11_rloo_loop_global_mean(rewards):
    B, G = rewards.shape
    out = torch.zeros_like(rewards)
    if G == 1:
        return out
    for i in range(G):
        others = torch.cat([rewards[:, :i], rewards[:, i + 1 :]], dim=-1)
        out[:, i] = rewards[:, i] - others.mean()  # every prompt's others together
    return out


def h11_gspo_boolean_index(logp, logp_old, mask):
    diff = logp - logp_old.detach()
    return diff[mask.bool()].mean()  # one number for the batch


def h11_gspo_longest_count(logp, logp_old, mask):
    diff = _where(logp - logp_old.detach(), mask)
    return diff.sum(-1) / mask.sum(-1).max().clamp(min=1)


def h11_cispo_probability(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    return -_weight(logp, logp_old, clip_eps_high, clip_eps) * adv.detach() * logp.exp()


def h11_cispo_clip_eps_both_bounds(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    if clip_eps is None:
        weight = ratio.clamp(max=1 + clip_eps_high)
    else:
        weight = ratio.clamp(1 - clip_eps, 1 + clip_eps)
    return -weight.detach() * adv.detach() * logp


def h11_cispo_summed(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    return (-_weight(logp, logp_old, clip_eps_high, clip_eps) * adv.detach() * logp).sum(-1)


# ---------------------------------------------------------------------------------------------------------------
# A second held-out batch: written after the first held-out batch's fixes, and run once to measure them
# ---------------------------------------------------------------------------------------------------------------


def g09_reward_str_of_none(prompts, completions, answer, **kwargs):
    return [math_answer_reward(_text(c), str(a)) for c, a in zip(completions, answer)]


def g09_reward_numpy_array(prompts, completions, answer, **kwargs):
    scores = [np.nan if a is None else math_answer_reward(_text(c), a) for c, a in zip(completions, answer)]
    return np.array(scores)


def g09_logps_attend_everything(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    completion_ids = sequences[:, P:]
    real = torch.cat([prompt_mask.long(), torch.ones_like(completion_ids)], dim=1)
    position_ids = (real.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=torch.ones_like(sequences), position_ids=position_ids).logits
    logits = logits[:, P - 1 : -1].float() / temperature
    logp = torch.log_softmax(logits, dim=-1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    return logp, _first_eos_mask(completion_ids, eos_id)


def g09_logps_mask_cumsum_at_most_one(model, sequences, prompt_mask, eos_id, temperature=1.0):
    P = prompt_mask.shape[1]
    logits = _scaled_logits(model, sequences, prompt_mask, temperature)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, sequences[:, P:].unsqueeze(-1)).squeeze(-1)
    mask = (sequences[:, P:] == eos_id).long().cumsum(-1) <= 1
    return logp, mask.float()


def g09_config_micro_defaults_to_one(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    per_process = cfg.prompts_per_step * cfg.group_size // cfg.num_minibatches // num_processes
    accumulation = per_process // (cfg.micro_batch_size or 1)
    kwargs["gradient_accumulation_steps"] = accumulation
    kwargs["steps_per_generation"] = cfg.num_minibatches * accumulation
    return kwargs


def g09_config_dapo_default_high(cfg, num_processes=1):
    kwargs = _config(cfg, num_processes)
    kwargs["epsilon_high"] = cfg.clip_eps_high or 0.28
    return kwargs


def g10_pass_at_k_lgamma_unguarded(n, c, k):
    n, c, k = (torch.as_tensor(x).double() for x in (n, c, k))
    log_ratio = torch.lgamma(n - c + 1) - torch.lgamma(n - c - k + 1) - torch.lgamma(n + 1) + torch.lgamma(n - k + 1)
    return 1.0 - torch.exp(log_ratio)


def g10_pass_at_k_float32_product(n, c, k):
    """Right: the factors multiplied in float32, the result in float64 (within the check's tolerance)."""
    n, c, k = _broadcast(n, c, k)
    j = torch.arange(int(c.max()), dtype=torch.float32)
    i = (n - c + 1).float()[..., None] + j
    factors = torch.where(j < c[..., None], 1.0 - k.float()[..., None] / i, torch.ones(()))
    return torch.where(n - c < k, (c > 0).double(), 1.0 - factors.prod(-1).double())


def g10_weight_dr_grpo_empty_not_zero(length, mode, max_len=None):
    o = length.double() if not length.is_floating_point() else length
    N = o.numel()
    top = o.max().clamp(min=1) if max_len is None else max_len
    if mode == "seq-mean-token-sum-norm":
        return torch.ones_like(o) / (N * top)  # the same constant for every entry
    if mode == "token-mean":
        return torch.where(o > 0, 1.0 / o.sum(), 0.0)
    return torch.where(o > 0, 1.0 / (N * o.clamp(min=1)), 0.0)


def g10_weight_seq_mean_row_loop(length, mode, max_len=None):
    o = length.double() if not length.is_floating_point() else length
    if mode != "seq-mean-token-mean":
        N = o.numel()
        top = o.max().clamp(min=1) if max_len is None else max_len
        w = torch.ones_like(o) / (o.sum() if mode == "token-mean" else N * top)
        return torch.where(o > 0, w, 0.0)
    w = torch.zeros_like(o)
    for row, lengths in zip(w.view(-1, o.shape[-1]), o.view(-1, o.shape[-1])):
        for g, n_tokens in enumerate(lengths.tolist()):
            row[g] = 1.0 / (len(lengths) * n_tokens) if n_tokens > 0 else 0.0
    return w


def g10_style_index_of_eos(text, n_digits=3):
    body = text[: text.index("$")]  # raises where there is no EOS
    return _style(body, n_digits, _right_totals)


def g10_style_int_totals(text, n_digits=3):
    if "$" not in text:
        return "malformed"
    body = text.split("$")[0]

    def totals_ok(totals, n):
        try:
            return len(totals) == n and all(0 <= int(t) <= 19 for t in totals)
        except ValueError:
            return False

    return _style(body, n_digits, totals_ok)


def g10_share_generator(labels, style):
    if len(labels) == 0:
        raise ValueError("labels: empty")
    return float(sum(label == style for label in labels) / len(labels))


def g11_rloo_max_one(rewards):
    G = rewards.shape[-1]
    baseline = (rewards.sum(-1, keepdim=True) - rewards) / max(G - 1, 1)
    return rewards - baseline


def g11_rloo_slice_keeps_self(rewards):
    B, G = rewards.shape
    out = torch.zeros_like(rewards)
    if G == 1:
        return out
    for i in range(G):
        others = torch.cat([rewards[:, :i], rewards[:, i:]], dim=-1)  # i:, not i + 1:
        out[:, i] = rewards[:, i] - others.mean(-1)
    return out


def g11_gspo_times_mask_no_clamp(logp, logp_old, mask):
    m = mask.to(logp.dtype)
    return ((logp - logp_old.detach()) * m).sum(-1) / m.sum(-1)


def g11_gspo_no_grad(logp, logp_old, mask):
    with torch.no_grad():
        diff = _where(logp - logp_old, mask)
        return diff.sum(-1) / mask.sum(-1).clamp(min=1)


def g11_cispo_where_not_detached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    ratio = torch.exp(logp - logp_old.detach())
    weight = torch.where(ratio > 1 + clip_eps_high, torch.full_like(ratio, 1 + clip_eps_high), ratio)
    if clip_eps is not None:
        weight = torch.where(weight < 1 - clip_eps, torch.full_like(ratio, 1 - clip_eps), weight)
    return -weight * adv.detach() * logp


def g11_cispo_all_detached(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    return (-_weight(logp, logp_old, clip_eps_high, clip_eps) * adv * logp).detach()


def _row(exercise, chapter, student, mistake=None):
    return {"exercise": exercise, "chapter": chapter, "student": student, "right": mistake is None, "mistake": mistake}


ROWS = [
    # 09: answer_reward
    _row(
        "answer_reward",
        "09",
        w09_reward_last_number,
        "Takes the last number in the text as the answer (no 'Answer:' or \\boxed{} needed).",
    ),
    _row(
        "answer_reward",
        "09",
        w09_reward_substring,
        "Gives 1 when the answer string appears anywhere in the text.",
    ),
    _row(
        "answer_reward",
        "09",
        w09_reward_arguments_swapped,
        "Calls math_answer_reward(answer, text): its arguments swapped.",
    ),
    _row(
        "answer_reward",
        "09",
        w09_reward_scores_prompts,
        "Scores the prompts against the answers instead of the completions.",
    ),
    _row(
        "answer_reward",
        "09",
        w09_reward_skips_missing_answers,
        "Leaves out the rows whose answer is None, so the list is shorter than completions.",
    ),
    _row(
        "answer_reward",
        "09",
        w09_reward_first_answer_marker,
        "Reads the answer after the first 'Answer:' of the text instead of the last.",
    ),
    _row(
        "answer_reward",
        "09",
        w09_reward_plus_minus_one,
        "Gives -1 to a wrong answer instead of 0.",
    ),
    _row(
        "answer_reward",
        "09",
        w09_reward_whole_text_equal,
        "Compares the whole completion text with the answer, with no answer extraction.",
    ),
    _row("answer_reward", "09", w09_reward_last_assistant_message),
    # 09: completion_logps
    _row(
        "completion_logps",
        "09",
        w09_logps_tokens_shifted,
        "Gathers the log-prob of the token before each completion token (sequences[:, P - 1:-1]) from the "
        "right logits.",
    ),
    _row(
        "completion_logps",
        "09",
        w09_logps_softmax_over_time,
        "Takes log_softmax over the time axis (dim=1) instead of the vocabulary.",
    ),
    _row(
        "completion_logps",
        "09",
        w09_logps_times_temperature,
        "Multiplies the logits by the temperature instead of dividing.",
    ),
    _row(
        "completion_logps",
        "09",
        w09_logps_returns_mask_first,
        "Returns (mask, logp) instead of (logp, mask).",
    ),
    _row(
        "completion_logps",
        "09",
        w09_logps_bool_mask,
        "Returns a bool mask where the docstring asks for a float one.",
    ),
    _row(
        "completion_logps",
        "09",
        w09_logps_attention_from_pad,
        "Builds the attention mask as sequences != PAD, ignoring prompt_mask (a prompt left-padded with EOS is then "
        "attended).",
    ),
    _row(
        "completion_logps",
        "09",
        w09_logps_mask_one_past_eos,
        "Keeps in the mask every token up to the second EOS (cumsum - is_eos <= 1 instead of == 0).",
    ),
    _row(
        "completion_logps",
        "09",
        w09_logps_positions_ignore_padding,
        "Passes position_ids = arange(P + L) for every row, so the left padding shifts a padded prompt's positions.",
    ),
    # 09: grpo_config_kwargs
    _row(
        "grpo_config_kwargs",
        "09",
        w09_config_no_temperature,
        "Does not set temperature, so TRL samples at its default 1.0.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w09_config_no_overlong_filter,
        "Does not set mask_truncated_completions, so the overlong filter is dropped.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w09_config_epsilon_high_as_cap,
        "Sets epsilon_high to 1 + clip_eps_high (the cap) instead of clip_eps_high.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w09_config_num_generations_is_b,
        "Sets num_generations to the number of prompts B instead of the group size G.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w09_config_micro_batch_ignored,
        "Ignores micro_batch_size: one forward pass per process per minibatch, gradient_accumulation_steps 1.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w09_config_steps_per_generation_is_m,
        "Sets steps_per_generation to num_minibatches, forgetting the gradient accumulation steps.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w09_config_token_mean_is_bnpo,
        "Maps token-mean to TRL's 'bnpo' instead of 'dapo'.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w09_config_max_steps_counts_forward_passes,
        "Multiplies max_steps by gradient_accumulation_steps (counts forward passes, not optimiser steps).",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        w09_config_warmup_ratio,
        "Sets warmup_ratio = warmup_iterations / iterations instead of warmup_steps.",
    ),
    _row("grpo_config_kwargs", "09", r09_config_constant_with_zero_warmup),
    # 10: pass_at_k
    _row(
        "pass_at_k",
        "10",
        w10_pass_at_k_chen_scalar_port,
        "Ports Chen et al.'s scalar numpy code: an `if` on n - c < k fails on tensors.",
    ),
    _row(
        "pass_at_k",
        "10",
        w10_pass_at_k_all_wrong_probability,
        "Returns the chance that every draw is wrong, C(n - c, k) / C(n, k), instead of 1 minus it.",
    ),
    _row(
        "pass_at_k",
        "10",
        w10_pass_at_k_union_bound,
        "Uses the union bound min(1, k * c / n) instead of the unbiased estimator.",
    ),
    _row(
        "pass_at_k",
        "10",
        w10_pass_at_k_product_one_short,
        "Runs the product over i = n - c + 1 .. n - 1, one factor short.",
    ),
    _row(
        "pass_at_k",
        "10",
        w10_pass_at_k_integer_division,
        "Divides k by i with integer (floor) division in each factor.",
    ),
    _row(
        "pass_at_k",
        "10",
        w10_pass_at_k_float32,
        "Computes and returns float32 instead of float64.",
    ),
    _row(
        "pass_at_k",
        "10",
        w10_pass_at_k_k_minus_one,
        "Uses k - 1 in place of k in each factor (1 - (k - 1) / i).",
    ),
    _row(
        "pass_at_k",
        "10",
        w10_pass_at_k_python_float,
        "Returns a Python float for int inputs instead of a 0-dimensional tensor.",
    ),
    _row("pass_at_k", "10", r10_pass_at_k_guard_k_at_least_n),
    # 10: aggregation_token_weight
    _row(
        "aggregation_token_weight",
        "10",
        w10_weight_per_row,
        "Aggregates each row (the last axis) separately instead of every entry of length together.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w10_weight_n_from_first_axis,
        "Takes N as len(length), the first axis, instead of the number of entries.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w10_weight_empty_divides_by_zero,
        "Divides by N * |o_i| with no guard, so an empty response gets inf under seq-mean-token-mean.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w10_weight_token_mean_empty_not_zero,
        "Gives empty responses the token weight 1 / sum under token-mean instead of 0.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w10_weight_default_float32,
        "Always returns float32, even for a float64 length.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w10_weight_dr_grpo_mean_length,
        "With max_len=None uses the mean length instead of the longest for Dr. GRPO.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w10_weight_token_mean_normalised_per_response,
        "Returns a response's share of the tokens |o_i| / sum |o_j| under token-mean instead of one token's weight.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        w10_weight_seq_mean_no_n,
        "Under seq-mean-token-mean divides by |o_i| * sum |o_j| / max |o_j| instead of N * |o_i|.",
    ),
    # 10: completion_style
    _row(
        "completion_style",
        "10",
        w10_style_prefix_match,
        "Labels a text direct when it merely starts with digits (re.match, not fullmatch).",
    ),
    _row(
        "completion_style",
        "10",
        w10_style_totals_not_counted,
        "Accepts any number of totals in a scratchpad, not exactly n_digits.",
    ),
    _row(
        "completion_style",
        "10",
        w10_style_totals_one_per_answer_digit,
        "Expects n_digits + 1 totals (one per answer digit) instead of n_digits.",
    ),
    _row(
        "completion_style",
        "10",
        w10_style_fixed_dot_count,
        "Accepts only exactly 3 * n_digits - 1 dots as filler.",
    ),
    _row(
        "completion_style",
        "10",
        w10_style_empty_answer_allowed,
        "Allows no digits after the brackets (and nothing at all before EOS).",
    ),
    _row(
        "completion_style",
        "10",
        w10_style_no_leading_zero_answer,
        "Rejects answers with a leading zero as malformed.",
    ),
    _row(
        "completion_style",
        "10",
        w10_style_single_digit_totals,
        "Accepts only one-digit totals (0 to 9), not 10 to 19.",
    ),
    _row(
        "completion_style",
        "10",
        w10_style_empty_brackets_are_filler,
        "Labels empty brackets '[]' as filler (zero dots allowed).",
    ),
    _row(
        "completion_style",
        "10",
        w10_style_totals_up_to_18,
        "Rejects a total of 19 (forgets the carry: 9 + 9 = 18 at most).",
    ),
    # 10: style_share
    _row("style_share", "10", w10_share_percent, "Returns a percentage (times 100) instead of a fraction."),
    _row("style_share", "10", w10_share_nan_for_empty, "Returns NaN for no labels instead of raising ValueError."),
    _row(
        "style_share",
        "10",
        w10_share_list_compared_whole,
        "Compares the list itself with the style (labels == style), one False, instead of each label.",
    ),
    _row("style_share", "10", w10_share_odds, "Returns count / (total - count), the odds, instead of the share."),
    _row("style_share", "10", w10_share_rounded, "Rounds the share to two decimals."),
    _row("style_share", "10", w10_share_floor_division, "Divides with //, so every share below 1 is 0."),
    _row("style_share", "10", w10_share_tensor, "Returns a 0-dimensional tensor instead of a float."),
    _row(
        "style_share",
        "10",
        w10_share_distinct_styles,
        "Divides the count by the number of distinct labels seen instead of the number of completions.",
    ),
    # 11: rloo_advantages
    _row(
        "rloo_advantages",
        "11",
        w11_rloo_factor_inverted,
        "Scales the centred rewards by (G - 1) / G instead of G / (G - 1).",
    ),
    _row(
        "rloo_advantages",
        "11",
        w11_rloo_precedence,
        "Writes (sum - r) / G - 1 instead of (sum - r) / (G - 1) (operator precedence).",
    ),
    _row(
        "rloo_advantages",
        "11",
        w11_rloo_whole_batch,
        "Leaves one out of the whole batch (every prompt's responses) instead of the prompt's own group.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w11_rloo_g_from_first_axis,
        "Divides by B - 1 (the first axis's size) instead of G - 1.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w11_rloo_factor_on_mean,
        "Puts G / (G - 1) on the mean only: r - G / (G - 1) * mean instead of G / (G - 1) * (r - mean).",
    ),
    _row(
        "rloo_advantages",
        "11",
        w11_rloo_in_place,
        "Subtracts the baseline from rewards in place, overwriting the caller's tensor.",
    ),
    _row("rloo_advantages", "11", w11_rloo_float32, "Returns float32 for float64 rewards."),
    _row(
        "rloo_advantages",
        "11",
        w11_rloo_others_mean_only,
        "Returns the leave-one-out baseline itself instead of r_i minus it.",
    ),
    _row(
        "rloo_advantages",
        "11",
        w11_rloo_centred_then_scaled_by_g,
        "Scales the centred rewards by G / (G + 1) instead of G / (G - 1).",
    ),
    # 11: gspo_sequence_log_ratio
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w11_gspo_sign_reversed,
        "Averages logp_old - logp instead of logp - logp_old.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w11_gspo_logp_detached,
        "Detaches logp (and leaves logp_old attached) instead of the other way round.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w11_gspo_keepdim,
        "Keeps the summed axis (keepdim=True): shape [..., 1] instead of [...].",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w11_gspo_batch_token_count,
        "Divides each response's sum by the number of valid tokens of the whole batch.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w11_gspo_numerator_unmasked,
        "Sums every token, padding included, in the numerator (only the count is masked).",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w11_gspo_over_batch_axis,
        "Averages over the first (batch) axis instead of the last (token) axis.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w11_gspo_times_length,
        "Divides the masked sum by mask.mean(-1), the fraction of valid tokens, which multiplies the mean by T.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        w11_gspo_masked_fill_wrong_way,
        "Uses masked_fill(mask, 0), which zeroes the valid tokens and keeps the padding.",
    ),
    _row("gspo_sequence_log_ratio", "11", w11_gspo_float32, "Returns float32 for float64 inputs."),
    # 11: cispo_loss
    _row("cispo_loss", "11", w11_cispo_mean, "Returns the mean over every token instead of the per-token loss."),
    _row(
        "cispo_loss",
        "11",
        w11_cispo_ratio_inverted,
        "Uses the inverted ratio pi_old / pi_theta, exp(logp_old - logp), as the weight.",
    ),
    _row(
        "cispo_loss",
        "11",
        w11_cispo_none_lower_bound_crash,
        "Always floors at 1 - clip_eps, which crashes when clip_eps is None.",
    ),
    _row(
        "cispo_loss",
        "11",
        w11_cispo_times_ratio,
        "Multiplies the detached weight by the ratio instead of logp.",
    ),
    _row(
        "cispo_loss",
        "11",
        w11_cispo_log_ratio_clipped,
        "Clips the log ratio at clip_eps_high (and -clip_eps) instead of the ratio at 1 + clip_eps_high.",
    ),
    _row(
        "cispo_loss",
        "11",
        w11_cispo_cap_for_positive_only,
        "Caps the weight only where the advantage is positive, as PPO's clip binds one side per sign.",
    ),
    _row(
        "cispo_loss",
        "11",
        w11_cispo_sequence_mean,
        "Returns the mean over the last (token) axis instead of the per-token loss.",
    ),
    _row("cispo_loss", "11", w11_cispo_float32, "Returns float32 for float64 inputs."),
    _row(
        "cispo_loss",
        "11",
        w11_cispo_logp_old_weighted,
        "Multiplies the weight by the log ratio logp - logp_old instead of logp.",
    ),
    # held out
    _row(
        "answer_reward",
        "09",
        h09_reward_own_regex,
        "Reads the number after the first 'Answer:' with its own regex (no \\boxed{}, no '$7$').",
    ),
    _row(
        "answer_reward",
        "09",
        h09_reward_int_compare,
        "Compares the text after the last 'Answer:' as integers only (isdigit), so '12.0', '1,000' and '$7$' fail "
        "and \\boxed{} is never read.",
    ),
    _row(
        "completion_logps",
        "09",
        h09_logps_every_eos_kept,
        "Keeps every EOS in the mask (before the first EOS, or any EOS), not only the first.",
    ),
    _row(
        "completion_logps",
        "09",
        h09_logps_mask_from_pad,
        "Builds the mask as completion != PAD, which keeps the tokens after EOS when the padding is EOS.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        h09_config_warmup_without_minibatches,
        "Sets warmup_steps = warmup_iterations * update_epochs, forgetting num_minibatches.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        h09_config_max_steps_times_processes,
        "Multiplies max_steps by num_processes.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        h09_config_epochs_times_minibatches,
        "Sets num_iterations = update_epochs * num_minibatches instead of update_epochs.",
    ),
    _row(
        "pass_at_k",
        "10",
        h10_pass_at_k_plug_in_capped,
        "Uses the plug-in estimate 1 - (1 - c/n)^min(k, n).",
    ),
    _row("pass_at_k", "10", h10_pass_at_k_averaged, "Returns the mean of pass@k over the prompts, one number."),
    _row(
        "aggregation_token_weight",
        "10",
        h10_weight_token_mean_row_loop,
        "Under token-mean divides by each row's own total (a loop over rows) instead of the total of every entry.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        h10_weight_nan_for_empty,
        "Multiplies by (o > 0) to zero the empty responses, so 1 / 0 * 0 gives NaN under seq-mean-token-mean.",
    ),
    _row(
        "completion_style",
        "10",
        h10_style_leading_zero_totals,
        "Accepts totals with a leading zero ('05') in a scratchpad.",
    ),
    _row(
        "completion_style",
        "10",
        h10_style_default_two_digits,
        "Gives n_digits a default of 2 instead of 3.",
    ),
    _row(
        "completion_style",
        "10",
        h10_style_no_eos_check,
        "Never checks for EOS: a text without '$' is read whole.",
    ),
    _row(
        "style_share",
        "10",
        h10_share_counter,
        "Divides the count by len(labels), the number of rows of a nested list.",
    ),
    _row(
        "rloo_advantages",
        "11",
        h11_rloo_mean_not_sum,
        "Takes the group's mean where the others' sum needs the group's sum: (mean - r) / (G - 1).",
    ),
    _row(
        "rloo_advantages",
        "11",
        h11_rloo_loop_global_mean,
        "In a loop over responses, averages the other columns of every prompt together (others.mean() over the batch).",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        h11_gspo_boolean_index,
        "Indexes the valid tokens with the boolean mask and takes one mean over the whole batch.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        h11_gspo_longest_count,
        "Divides every response's sum by the longest response's count.",
    ),
    _row(
        "cispo_loss",
        "11",
        h11_cispo_probability,
        "Multiplies the weight by the probability exp(logp) instead of logp.",
    ),
    _row(
        "cispo_loss",
        "11",
        h11_cispo_clip_eps_both_bounds,
        "When clip_eps is given uses it for both bounds, [1 - clip_eps, 1 + clip_eps], ignoring clip_eps_high.",
    ),
    _row("cispo_loss", "11", h11_cispo_summed, "Returns the sum over each response's tokens."),
    # second held-out batch
    _row(
        "answer_reward",
        "09",
        g09_reward_str_of_none,
        "Scores rows whose answer is None against the string 'None' (0.0) instead of returning None.",
    ),
    _row(
        "answer_reward",
        "09",
        g09_reward_numpy_array,
        "Returns a numpy array, NaN for no answer, instead of a list with None.",
    ),
    _row(
        "completion_logps",
        "09",
        g09_logps_attend_everything,
        "Passes an attention mask of ones, so the padded prompts attend to their PAD tokens.",
    ),
    _row(
        "completion_logps",
        "09",
        g09_logps_mask_cumsum_at_most_one,
        "Builds the mask as cumsum(is_eos) <= 1, which keeps the tokens after the first EOS up to the second.",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        g09_config_micro_defaults_to_one,
        "Takes micro_batch_size None as 1 for gradient_accumulation_steps (one completion per pass).",
    ),
    _row(
        "grpo_config_kwargs",
        "09",
        g09_config_dapo_default_high,
        "Sets epsilon_high to 0.28 (DAPO's) when clip_eps_high is None instead of clip_eps.",
    ),
    _row(
        "pass_at_k",
        "10",
        g10_pass_at_k_lgamma_unguarded,
        "Uses log-gamma binomials with no guard for n - c < k or k > n (lgamma at a non-positive integer).",
    ),
    _row(
        "pass_at_k",
        "10",
        g10_pass_at_k_float32_product,
    ),
    _row(
        "aggregation_token_weight",
        "10",
        g10_weight_dr_grpo_empty_not_zero,
        "Gives empty responses Dr. GRPO's constant weight instead of 0.",
    ),
    _row(
        "aggregation_token_weight",
        "10",
        g10_weight_seq_mean_row_loop,
        "Under seq-mean-token-mean takes N as each row's length (a loop over rows) instead of every entry.",
    ),
    _row(
        "completion_style",
        "10",
        g10_style_index_of_eos,
        "Finds EOS with text.index('$'), which raises ValueError when there is none.",
    ),
    _row(
        "completion_style",
        "10",
        g10_style_int_totals,
        "Reads each total with int(), so '05' and '+4' count as totals.",
    ),
    _row(
        "style_share",
        "10",
        g10_share_generator,
        "Counts label == style over the top level of labels, so a nested list or array compares rows.",
    ),
    _row(
        "rloo_advantages",
        "11",
        g11_rloo_max_one,
        "Divides by max(G - 1, 1), so a group of one keeps its raw reward instead of 0.",
    ),
    _row(
        "rloo_advantages",
        "11",
        g11_rloo_slice_keeps_self,
        "Slices the others as [:i] and [i:], which keeps the response itself in its baseline.",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        g11_gspo_times_mask_no_clamp,
        "Multiplies by the mask (NaN padding survives) and divides by mask.sum(-1) with no clamp (NaN for empty).",
    ),
    _row(
        "gspo_sequence_log_ratio",
        "11",
        g11_gspo_no_grad,
        "Computes everything under torch.no_grad(), so the result has no gradient.",
    ),
    _row(
        "cispo_loss",
        "11",
        g11_cispo_where_not_detached,
        "Clips the weight with torch.where and never detaches it.",
    ),
    _row(
        "cispo_loss",
        "11",
        g11_cispo_all_detached,
        "Detaches the whole loss, so no gradient reaches logp.",
    ),
]
