"""Issue 44's classes of wrong answers, one mutant each, for tests/test_mutants.py.

Written as the students of the issue wrote them (a reward-to-go never reversed, returns taken before the loop,
the clip's sides swapped, a value loss over numel, Bessel's correction twice, EOS found with argmax or roll, ...);
tests/test_fresh_class.py measures the same classes as a table.
"""

import torch


def rtg_last_reward_twice(rewards, gamma):
    out = torch.zeros_like(rewards)
    running = rewards[..., -1]
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        out[..., t] = running
    return out


def rtg_never_reversed(rewards, gamma):
    out, running = [], torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        out.append(running)
    return torch.stack(out, dim=-1)


def gae_returns_before_loop(rewards, values, dones, last_values, gamma, lam):
    adv = torch.zeros_like(rewards)
    returns = adv + values  # taken before the loop fills adv
    running = torch.zeros_like(last_values)
    next_value = last_values
    d = dones.to(rewards.dtype)
    for t in reversed(range(rewards.shape[-1])):
        delta = rewards[..., t] + gamma * (1 - d[..., t]) * next_value - values[..., t]
        running = delta + gamma * lam * (1 - d[..., t]) * running
        adv[..., t] = running
        next_value = values[..., t]
    return adv, returns


def surrogate_sides_swapped(logp, logp_old, adv, clip_eps, clip_eps_high=None):
    high = clip_eps if clip_eps_high is None else clip_eps_high
    ratio = torch.exp(logp - logp_old.detach())
    clipped = torch.clamp(ratio, 1 - high, 1 + clip_eps)
    return -torch.min(ratio * adv.detach(), clipped * adv.detach())


def value_loss_numel(values, returns, values_old=None, clip_eps=None, mask=None):
    m = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    error = (values - returns.detach()) ** 2
    if clip_eps is not None:
        v_clip = values_old.detach() + (values - values_old.detach()).clamp(-clip_eps, clip_eps)
        error = torch.max(error, (v_clip - returns.detach()) ** 2)
    return 0.5 * (error * m).sum() / m.numel()


def value_loss_half_twice(values, returns, values_old=None, clip_eps=None, mask=None):
    m = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    error = 0.5 * (values - returns.detach()) ** 2
    if clip_eps is not None:
        v_clip = values_old.detach() + (values - values_old.detach()).clamp(-clip_eps, clip_eps)
        error = torch.max(error, 0.5 * (v_clip - returns.detach()) ** 2)
    return 0.5 * (error * m).sum() / m.sum()


def advantages_bessel_twice(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(-1, keepdim=True)
    centred = torch.where((rewards == rewards[..., :1]).all(-1, keepdim=True), 0.0, centred)
    G = rewards.shape[-1]
    if not normalize_std or G == 1:
        return centred
    std = rewards.std(-1, keepdim=True) * (G / (G - 1)) ** 0.5
    return centred / (std + eps)


def advantages_clamped_std(rewards, normalize_std=True, eps=1e-6):
    centred = rewards - rewards.mean(-1, keepdim=True)
    centred = torch.where((rewards == rewards[..., :1]).all(-1, keepdim=True), 0.0, centred)
    if not normalize_std or rewards.shape[-1] == 1:
        return centred
    return centred / rewards.std(-1, keepdim=True).clamp(min=eps)


def mask_argmax(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    first = is_eos.argmax(dim=-1, keepdim=True)  # 0 when a row has no EOS at all
    positions = torch.arange(completion_ids.shape[-1])
    return (positions <= first).float()


def mask_roll(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    after = is_eos.roll(1, dims=-1).cumsum(-1)  # the last EOS wraps around to the front
    return (after == 0).float()


def rloo_divides_by_g(rewards):
    G = rewards.shape[-1]
    return rewards - (rewards.sum(-1, keepdim=True) - rewards) / G


MUTANTS = [
    ("reward_to_go", rtg_last_reward_twice, "the last reward is counted twice"),
    ("reward_to_go", rtg_never_reversed, "reverse time order"),
    ("compute_gae", gae_returns_before_loop, "before the loop filled the advantages"),
    ("clipped_surrogate", surrogate_sides_swapped, "two sides are swapped"),
    ("value_loss", value_loss_numel, "mask.numel()"),
    ("value_loss", value_loss_half_twice, "0.5 is applied twice"),
    ("group_advantages", advantages_bessel_twice, "Bessel's correction is applied twice"),
    ("group_advantages", advantages_clamped_std, "floored at eps"),
    ("completion_mask", mask_argmax, "argmax"),
    ("completion_mask", mask_roll, "roll, which wraps around"),
    ("rloo_advantages", rloo_divides_by_g, "divided by G"),
]


def cispo_one_eps(logp, logp_old, adv, clip_eps_high, clip_eps=None):
    """Issue 44's student: one eps for both bounds, so clip_eps != clip_eps_high goes unnoticed."""
    ratio = torch.exp(logp.detach() - logp_old.detach())
    low = 0.0 if clip_eps is None else 1 - clip_eps_high
    weight = ratio.clamp(min=low, max=1 + clip_eps_high)
    return -(weight * adv.detach() * logp)


MUTANTS.append(("cispo_loss", cispo_one_eps, "the lower bound uses clip_eps_high"))


def kl_in_float32(logp, logp_ref, kind):
    """Issue 44's student: a float32 answer to float64 inputs (the docstring promises the input's dtype)."""
    log_r = (logp_ref - logp).float()
    return {"k1": -log_r, "k2": 0.5 * log_r**2, "k3": torch.expm1(log_r) - log_r}[kind]


MUTANTS.append(("kl_estimate", kl_in_float32, "is a float32 tensor; the exercise asks for a float64 tensor"))


def answer_reward_as_strings(prompts, completions, answer, **kwargs):
    """Issue 44's student: 'Answer: 12.0' against '12' compared as text."""
    rewards = []
    for completion, truth in zip(completions, answer):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        said = None
        if "Answer:" in text:
            said = text.rsplit("Answer:", 1)[-1].strip()
        elif "\\boxed{" in text:
            said = text.rsplit("\\boxed{", 1)[-1].split("}")[0]
        rewards.append(None if truth is None else float(said == truth))
    return rewards


MUTANTS.append(("answer_reward", answer_reward_as_strings, "compared as strings"))


def logps_mask_from_first_eos_of_sequence(model, sequences, prompt_mask, eos_id, temperature=1.0):
    """Issue 44's student: the completion mask found from the first EOS of the whole sequence, which is the
    prompt's left padding when the tokenizer pads with EOS."""
    P = prompt_mask.shape[1]
    attention = torch.cat([prompt_mask.long(), torch.ones_like(sequences[:, P:])], dim=1)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=attention, position_ids=positions).logits.float()
    logp = torch.log_softmax(logits[:, P - 1 : -1] / temperature, dim=-1)
    logp = logp.gather(-1, sequences[:, P:, None]).squeeze(-1)
    is_eos = (sequences == eos_id).long()
    mask = ((is_eos.cumsum(-1) - is_eos) == 0).float()[:, P:]
    return logp, mask


MUTANTS.append(("completion_logps", logps_mask_from_first_eos_of_sequence, "in the whole sequence, prompt included"))


# Kinds the docstrings state (issue 44, item 1: `check_dtype` on every check). Each of these has the right values.


def mask_as_bool(completion_ids, eos_id):
    """A bool mask where the docstring promises a float32 one (the comparison's own dtype, never converted)."""
    is_eos = (completion_ids == eos_id).long()
    return (torch.cumsum(is_eos, dim=-1) - is_eos) == 0


MUTANTS.append(("completion_mask", mask_as_bool, "is a bool tensor; the exercise asks for a float32 tensor"))


def surrogate_loss_tensor_diagnostics(logp, logp_old, adv, clip_eps, mask=None, clip_eps_high=None):
    """Right values, but the diagnostics left as tensors where the docstring promises numbers (no `.item()`)."""
    high_eps = clip_eps if clip_eps_high is None else clip_eps_high
    valid = torch.ones_like(logp, dtype=torch.bool) if mask is None else mask.bool()
    zero = torch.zeros_like(logp)
    ratio = torch.exp(torch.where(valid, logp, zero) - torch.where(valid, logp_old.detach(), zero))
    adv = torch.where(valid, adv.detach(), zero)
    per_token = -torch.min(ratio * adv, ratio.clamp(1 - clip_eps, 1 + high_eps) * adv)
    count = valid.sum().clamp(min=1)
    loss = (per_token * valid).sum() / count
    with torch.no_grad():
        r = torch.where(valid, ratio, torch.ones_like(ratio))
        low, high = r < 1 - clip_eps, r > 1 + high_eps
        info = {
            "clip_fraction": ((low | high) & valid).sum() / count,
            "clip_active_fraction": (((high & (adv > 0)) | (low & (adv < 0))) & valid).sum() / count,
            "approx_kl": ((r - 1) - torch.log(r)).sum() / count,
        }
    return loss, info


MUTANTS.append(("clipped_surrogate_loss", surrogate_loss_tensor_diagnostics, "the exercise asks for a Python number"))


def aggregate_in_float32(per_token, mask, mode, max_len=None):
    """The per-token losses cast to float32 on the way (a `.float()` to be safe), so float64 inputs lose digits."""
    per_token = per_token.float()
    mask = mask.to(per_token.dtype)
    lengths = mask.sum(-1)
    kept = torch.where(mask > 0, per_token, 0.0)  # padding may hold inf: selected, not multiplied
    if mode == "token-mean":
        return kept.sum() / mask.sum().clamp(min=1)
    divisor = lengths.clamp(min=1) if mode == "seq-mean-token-mean" else (max_len or per_token.shape[-1])
    return (kept.sum(-1) / divisor).mean()


MUTANTS.append(("aggregate_loss", aggregate_in_float32, "is a float32 tensor; the exercise asks for a float64 tensor"))


def memory_bytes_as_floats(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    """Bits turned into bytes with `/ 8`: the right counts, each a float where the docstring promises an int."""
    bits = {"fp64": 64, "fp32": 32, "bf16": 16, "fp16": 16}
    w, o = bits[weights_dtype] / 8, bits[optimizer_dtype] / 8
    adam = 2 * o + (o if w < o else 0)
    account = {
        "actor": 2 * w * n_params_actor,
        "critic": 2 * w * n_params_critic,
        "reference": w * n_params_ref,
        "reward": w * n_params_reward,
        "optimizer": (n_params_actor + n_params_critic) * adam,
    }
    account["total"] = sum(account.values())
    return account


MUTANTS.append(("memory_accounting", memory_bytes_as_floats, "is a Python number; the exercise asks for a Python int"))


# The classes the fifth class (written blind) found, and class four's that were still generic; each written here
# as its own student would, apart from the checks' catalogue.


def log_probs_fixed_axis(logits, tokens):
    """log_softmax over dim=1: the vocabulary for (T, V) logits, the token axis for (B, T, V)."""
    return torch.log_softmax(logits, dim=1).gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1)


MUTANTS.append(("gather_log_probs", log_probs_fixed_axis, "normalises over dim=1"))


def mask_counted_along_dim1(completion_ids, eos_id):
    """The running EOS count along dim=1, the tokens only for (B, L) ids."""
    is_eos = (completion_ids == eos_id).long()
    return ((is_eos.cumsum(1) - is_eos) == 0).float()


MUTANTS.append(("completion_mask", mask_counted_along_dim1, "taken along dim=1"))


def aggregate_drops_empty(per_token, mask, mode, max_len=None):
    """seq-mean-token-mean over the non-empty responses only."""
    m = mask.to(per_token.dtype)
    valid = torch.where(m > 0, per_token, torch.zeros_like(per_token))
    lengths = m.sum(-1)
    if mode == "token-mean":
        return valid.sum() / lengths.sum().clamp(min=1)
    if mode == "seq-mean-token-sum-norm":
        return (valid.sum(-1) / (per_token.shape[-1] if max_len is None else max_len)).mean()
    kept = lengths > 0
    return (valid.sum(-1)[kept] / lengths[kept]).sum() / kept.sum().clamp(min=1)


MUTANTS.append(("aggregate_loss", aggregate_drops_empty, "left out of the mean over responses"))


def reinforce_indexes_with_int_mask(logp, deltas, mask=None):
    """per_token[mask] with the mask as given: a long mask picks rows."""
    per_token = -(deltas.detach().unsqueeze(-1) * logp)
    if mask is None:
        return per_token.mean()
    return per_token[mask].sum() / mask.sum().clamp(min=1)


MUTANTS.append(("reinforce_loss", reinforce_indexes_with_int_mask, "picks rows 0 and 1"))


def sort_reward_isin(prompt, response):
    """torch.isin over the whole batch of responses."""
    inclusion = torch.isin(prompt, response).sum(-1)
    return (inclusion + (response[..., 1:] >= response[..., :-1]).sum(-1)).float()


MUTANTS.append(("sort_inclusion_ordering_reward", sort_reward_isin, "torch.isin(prompt, response)"))


def value_loss_huber_everywhere(values, returns, values_old=None, clip_eps=None, mask=None):
    """F.smooth_l1_loss for both errors."""
    huber = torch.nn.functional.smooth_l1_loss
    valid = torch.ones_like(values) if mask is None else mask.to(values.dtype)
    error = huber(values, returns.detach(), reduction="none")
    if clip_eps is not None:
        old = values_old.detach()
        clipped = old + (values - old).clamp(-clip_eps, clip_eps)
        error = torch.maximum(error, huber(clipped, returns.detach(), reduction="none"))
    return (error * valid).sum() / valid.sum()


MUTANTS.append(("value_loss", value_loss_huber_everywhere, "Huber loss"))


def td_residuals_whole_residual_cut(rewards, values, dones, last_values, gamma):
    """The whole residual multiplied by (1 - done), not only its bootstrap."""
    next_values = torch.cat([values[..., 1:], last_values.unsqueeze(-1)], dim=-1)
    alive = 1 - dones.to(rewards.dtype)
    return (rewards + gamma * next_values - values) * alive


MUTANTS.append(("td_residuals", td_residuals_whole_residual_cut, "wrong only where `dones` is 1"))
