"""Classic wrong (and correct) ways to write the Monte-Carlo policy gradient of chapter 02.

``mc_policy_gradient(logits[V], reward_per_action[V], n_samples, generator) -> [V]``, checked by
``course_lib.checks.mc_gradient.check_mc_policy_gradient``. Each wrong one samples exactly as the
exercise asks, so its mistake is diagnosed by name; the last ones sample another way.
"""

import torch
from catalogue_round7_00_04 import (
    r02_mc_autograd,
    w02_mc_baseline,
    w02_mc_divides_by_n_minus_one,
    w02_mc_float32,
    w02_mc_mean_reward_times_mean_score,
    w02_mc_one_hot_no_classes,
    w02_mc_probs_as_weights,
    w02_mc_reward_of_index,
    w02_mc_score_log_pi,
    w02_mc_score_pi_of_action,
    w02_mc_score_softmax_grad_wrt_a,
)


def _sample(logits, n_samples, generator):
    pi = torch.softmax(logits, dim=-1)
    return pi, torch.multinomial(pi, n_samples, replacement=True, generator=generator)


def _onehot(actions, V, dtype):
    return torch.nn.functional.one_hot(actions, V).to(dtype)


# ---------------------------------------------------------------------------
# Wrong
# ---------------------------------------------------------------------------


def mc_without_log(logits, reward_per_action, n_samples, generator):
    # r * grad pi(a) instead of r * grad log pi(a).
    pi, a = _sample(logits, n_samples, generator)
    grad_pi = pi[a, None] * (_onehot(a, len(pi), pi.dtype) - pi)
    return (reward_per_action[a, None] * grad_pi).mean(0)


def mc_loss_gradient(logits, reward_per_action, n_samples, generator):
    # The gradient of the loss -r log pi, not of the objective.
    pi, a = _sample(logits, n_samples, generator)
    return -(reward_per_action[a, None] * (_onehot(a, len(pi), pi.dtype) - pi)).mean(0)


def mc_divided_twice(logits, reward_per_action, n_samples, generator):
    pi, a = _sample(logits, n_samples, generator)
    return (reward_per_action[a, None] * (_onehot(a, len(pi), pi.dtype) - pi)).mean(0) / n_samples


def mc_summed(logits, reward_per_action, n_samples, generator):
    pi, a = _sample(logits, n_samples, generator)
    return (reward_per_action[a, None] * (_onehot(a, len(pi), pi.dtype) - pi)).sum(0)


def mc_no_onehot(logits, reward_per_action, n_samples, generator):
    pi, a = _sample(logits, n_samples, generator)
    return (reward_per_action[a, None] * (1.0 - pi)).mean(0)


def mc_greedy_action_score(logits, reward_per_action, n_samples, generator):
    # The score of the argmax action, whatever was sampled.
    pi, a = _sample(logits, n_samples, generator)
    best = logits.argmax().expand(n_samples)
    return (reward_per_action[a, None] * (_onehot(best, len(pi), pi.dtype) - pi)).mean(0)


def mc_whole_reward_vector(logits, reward_per_action, n_samples, generator):
    # (n, V) * (V,) broadcasts: each coordinate gets its own action's reward, not the sampled one's.
    pi, a = _sample(logits, n_samples, generator)
    return (reward_per_action * (_onehot(a, len(pi), pi.dtype) - pi)).mean(0)


def mc_exact_instead(logits, reward_per_action, n_samples, generator):
    pi = torch.softmax(logits, dim=-1)
    return pi * (reward_per_action - (pi * reward_per_action).sum())


def mc_one_sample(logits, reward_per_action, n_samples, generator):
    pi, a = _sample(logits, 1, generator)
    return (reward_per_action[a, None] * (_onehot(a, len(pi), pi.dtype) - pi)).mean(0)


def mc_global_rng(logits, reward_per_action, n_samples, generator):
    pi = torch.softmax(logits, dim=-1)
    a = torch.multinomial(pi, n_samples, replacement=True)  # ignores the generator
    return (reward_per_action[a, None] * (_onehot(a, len(pi), pi.dtype) - pi)).mean(0)


def mc_autograd_of_probability(logits, reward_per_action, n_samples, generator):
    # Autograd through pi(a) rather than log pi(a): the log is forgotten, another way.
    logits = logits.detach().clone().requires_grad_(True)
    pi = torch.softmax(logits, dim=-1)
    a = torch.multinomial(pi.detach(), n_samples, replacement=True, generator=generator)
    (reward_per_action[a] * pi[a]).mean().backward()
    return logits.grad


def _inverse_cdf(pi, n_samples, generator):
    # Another valid way to sample (uniforms through the inverse CDF): other samples than multinomial's.
    u = torch.rand(n_samples, generator=generator, dtype=pi.dtype)
    return torch.searchsorted(pi.cumsum(0), u).clamp(max=len(pi) - 1)


def mc_inverse_cdf_without_log(logits, reward_per_action, n_samples, generator):
    # Samples drawn another way, and no log: only the statistical test can catch it (bias).
    pi = torch.softmax(logits, dim=-1)
    a = _inverse_cdf(pi, n_samples, generator)
    return (reward_per_action[a, None] * pi[a, None] * (_onehot(a, len(pi), pi.dtype) - pi)).mean(0)


def mc_inverse_cdf_first_only(logits, reward_per_action, n_samples, generator):
    # Samples drawn another way, unbiased, but only the first one is used: its error never shrinks.
    pi = torch.softmax(logits, dim=-1)
    a = _inverse_cdf(pi, n_samples, generator)[:1]
    return (reward_per_action[a, None] * (_onehot(a, len(pi), pi.dtype) - pi)).mean(0)


# ---------------------------------------------------------------------------
# Correct
# ---------------------------------------------------------------------------


def mc_autograd(logits, reward_per_action, n_samples, generator):
    # The REINFORCE surrogate: autograd of mean(r[a] * log pi(a)).
    logits = logits.detach().clone().requires_grad_(True)
    a = torch.multinomial(torch.softmax(logits.detach(), -1), n_samples, replacement=True, generator=generator)
    (reward_per_action[a] * torch.log_softmax(logits, -1)[a]).mean().backward()
    return logits.grad


def mc_counts(logits, reward_per_action, n_samples, generator):
    # Count each action once: sum_a (count_a / n) * r_a * (onehot(a) - pi).
    pi, a = _sample(logits, n_samples, generator)
    freq = torch.bincount(a, minlength=len(pi)).to(pi.dtype) / n_samples  # (V,)
    weights = freq * reward_per_action  # (V,)
    return weights - pi * weights.sum()


def mc_inverse_cdf(logits, reward_per_action, n_samples, generator):
    # Other samples than the reference's: accepted statistically.
    pi = torch.softmax(logits, dim=-1)
    a = _inverse_cdf(pi, n_samples, generator)
    return (reward_per_action[a, None] * (_onehot(a, len(pi), pi.dtype) - pi)).mean(0)


def mc_loop_one_at_a_time(logits, reward_per_action, n_samples, generator):
    # Other samples than the reference's (one multinomial call per sample): accepted statistically.
    pi = torch.softmax(logits, dim=-1)
    total = torch.zeros_like(logits)
    for _ in range(n_samples):
        a = torch.multinomial(pi, 1, generator=generator)[0]
        total += reward_per_action[a] * (_onehot(a, len(pi), pi.dtype) - pi)
    return total / n_samples


def mc_onehot_without_minus_pi(logits, reward_per_action, n_samples, generator):
    # The score written as onehot(a), forgetting the -pi of the log-softmax's gradient.
    pi, a = _sample(logits, n_samples, generator)
    return (reward_per_action[a, None] * _onehot(a, len(pi), pi.dtype)).mean(0)


MUTANTS = [
    ("mc_policy_gradient", mc_without_log, "grad log pi(a)"),
    ("mc_policy_gradient", mc_loss_gradient, "sign is flipped"),
    ("mc_policy_gradient", mc_divided_twice, "twice"),
    ("mc_policy_gradient", mc_summed, "summed"),
    ("mc_policy_gradient", mc_no_onehot, "one-hot is missing"),
    ("mc_policy_gradient", mc_onehot_without_minus_pi, "without its -pi term"),
    ("mc_policy_gradient", mc_greedy_action_score, "most likely action"),
    ("mc_policy_gradient", mc_whole_reward_vector, "its own action"),
    ("mc_policy_gradient", mc_exact_instead, "exact gradient"),
    ("mc_policy_gradient", mc_one_sample, "one sample"),
    ("mc_policy_gradient", mc_global_rng, "generator"),
    ("mc_policy_gradient", mc_autograd_of_probability, "grad log pi(a)"),
    ("mc_policy_gradient", mc_inverse_cdf_without_log, "biased"),
    ("mc_policy_gradient", mc_inverse_cdf_first_only, "mean squared error"),
]

VARIANTS = [
    ("mc_policy_gradient", mc_autograd),
    ("mc_policy_gradient", mc_counts),
    ("mc_policy_gradient", mc_loop_one_at_a_time),
    ("mc_policy_gradient", mc_inverse_cdf),
]


# Round seven of issue 44 (chapters 00 to 04): the wrong answers of tests/catalogue_round7_00_04.py, each
# named by the mistake it makes, and its right variants.
MUTANTS += [
    ("mc_policy_gradient", w02_mc_score_pi_of_action, "your score subtracts pi[a], the sampled"),
    ("mc_policy_gradient", w02_mc_score_log_pi, "your score subtracts log pi; the score of a"),
    ("mc_policy_gradient", w02_mc_divides_by_n_minus_one, "you divided the sum of the n terms by n - 1:"),
    ("mc_policy_gradient", w02_mc_one_hot_no_classes, "F.one_hot(a) without num_classes is only as"),
    ("mc_policy_gradient", w02_mc_float32, "output is a float32 tensor; the exercise"),
    ("mc_policy_gradient", w02_mc_mean_reward_times_mean_score, "you multiplied the mean reward by the mean"),
    ("mc_policy_gradient", w02_mc_probs_as_weights, "you weighted each sample by pi(a) as well"),
    ("mc_policy_gradient", w02_mc_reward_of_index, "each sample is weighted by the reward of the"),
]

VARIANTS += [
    ("mc_policy_gradient", r02_mc_autograd),
]

# Wave two of round seven, written after the fixes for wave one.
MUTANTS += [
    ("mc_policy_gradient", w02_mc_baseline, "you subtracted the mean reward of the"),
]

# Wave three of round seven, written after the fixes for wave two.
MUTANTS += [
    ("mc_policy_gradient", w02_mc_score_softmax_grad_wrt_a, "your score is onehot(a) * (1 - pi): only the"),
]
