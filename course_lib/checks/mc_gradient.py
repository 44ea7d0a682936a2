"""Exercise check of chapter 02: a Monte-Carlo estimate of the policy gradient.

The checks import the reference implementations of ``course_lib.lectures.mc_gradient``; the maths module never
imports its checks, so the file a student opens is the maths alone.
"""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference, forget_pass, record_pass, recording
from course_lib.checks.mc_statistics import _SAMPLING, _call_student, _statistical_check
from course_lib.lectures.mc_gradient import mc_policy_gradient
from course_lib.policy_gradient import expected_reward_gradient


def check_mc_policy_gradient(fn) -> bool:
    """Check a student's ``mc_policy_gradient(logits, reward_per_action, n_samples, generator)``.

    Three stages:

    1. the same seed must give the same estimate (the generator is used);
    2. with the same seed, the estimate must equal the reference's on a grid of
       cases (the exercise prescribes the sampling call, so the samples agree), and
       a mismatch that matches a classic mistake is named;
    3. a mismatch that matches no known mistake gets a statistical second look: an
       estimator whose samples were drawn some other valid way is accepted when it is
       unbiased (the mean of many small-n estimates is the exact gradient) and its
       error shrinks like ``1 / sqrt(n)`` at the rate the exact variance predicts.
    """
    name = "mc_policy_gradient"
    forget_pass(fn)  # until this run of the check passes
    if not callable(fn):
        raise AssertionError(f"{name}: expected a function, got {type(fn).__name__}")
    logits0 = torch.tensor([0.5, -1.0, 1.5, 0.0], dtype=torch.float64)
    rewards0 = torch.tensor([1.0, 0.0, 3.0, -2.0], dtype=torch.float64)

    # 1. Reproducible: the generator must drive the sampling.
    first = _call_student(fn, name, logits0, rewards0, 16, 7)
    second = _call_student(fn, name, logits0, rewards0, 16, 7)
    if not torch.equal(first, second):
        raise AssertionError(
            f"{name}: two calls with generators seeded alike gave different estimates; draw the actions "
            f"with the generator you are given: {_SAMPLING}"
        )
    # The docstring's other promise: generator=None samples with the global RNG (it is not an error).
    _call_student(fn, name, logits0, rewards0, 16, None)

    # 2. Same seed, same samples: compare values with the reference.
    g = torch.Generator().manual_seed(5)

    def case(description, V, n, scale=1.0, logits=None, rewards=None, seed=0):
        if logits is None:
            logits = scale * torch.randn(V, generator=g, dtype=torch.float64)
        if rewards is None:
            rewards = torch.randn(V, generator=g, dtype=torch.float64)
        return Case(description, {"logits": logits, "reward_per_action": rewards, "n_samples": n, "seed": seed})

    cases = [
        case("V=4 actions, n=1 sample", 4, 1, seed=1),
        case("V=4 actions, n=10 samples", 4, 10, seed=2),
        case("V=2 actions, n=100 samples", 2, 100, seed=3),
        case("V=6 actions, n=1000 samples, peaked policy (logits scaled by 3)", 6, 1000, scale=3.0, seed=4),
        case(
            "V=5, uniform policy (logits all 0), reward 1 on action 2 only, n=50",
            5,
            50,
            logits=torch.zeros(5, dtype=torch.float64),
            rewards=torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0], dtype=torch.float64),
            seed=5,
        ),
        case(
            "V=3, every reward equal to 2 (the exact gradient is 0, the estimate is not), n=20",
            3,
            20,
            rewards=torch.full((3,), 2.0, dtype=torch.float64),
            seed=6,
        ),
        case(
            "V=3, negative rewards, n=30", 3, 30, rewards=torch.tensor([-1.0, -2.0, -0.5], dtype=torch.float64), seed=7
        ),
        case(
            "V=4, the last action almost never drawn (logit -9), n=5: every output still has one entry per action",
            4,
            5,
            logits=torch.tensor([1.0, 0.5, 0.0, -9.0], dtype=torch.float64),
            seed=8,
        ),
    ]

    def seeded(f):
        def run(logits, reward_per_action, n_samples, seed):
            return f(logits, reward_per_action, n_samples, torch.Generator().manual_seed(seed))

        return run

    def sampled(logits, n_samples, generator):
        pi = torch.softmax(logits, dim=-1)
        return pi, torch.multinomial(pi, n_samples, replacement=True, generator=generator)

    def no_log(logits, reward_per_action, n_samples, generator):
        pi, a = sampled(logits, n_samples, generator)
        onehot = torch.nn.functional.one_hot(a, len(pi)).to(pi.dtype)
        return (reward_per_action[a, None] * pi[a, None] * (onehot - pi)).mean(0)

    def flipped(logits, reward_per_action, n_samples, generator):
        return -mc_policy_gradient(logits, reward_per_action, n_samples, generator)

    def twice_divided(logits, reward_per_action, n_samples, generator):
        return mc_policy_gradient(logits, reward_per_action, n_samples, generator) / n_samples

    def summed(logits, reward_per_action, n_samples, generator):
        return mc_policy_gradient(logits, reward_per_action, n_samples, generator) * n_samples

    def no_onehot(logits, reward_per_action, n_samples, generator):
        pi, a = sampled(logits, n_samples, generator)
        return (reward_per_action[a, None] * (1.0 - pi)).mean(0)

    def onehot_only(logits, reward_per_action, n_samples, generator):
        pi, a = sampled(logits, n_samples, generator)
        onehot = torch.nn.functional.one_hot(a, len(pi)).to(pi.dtype)
        return (reward_per_action[a, None] * onehot).mean(0)

    def log_pi_weighted(logits, reward_per_action, n_samples, generator):
        pi, a = sampled(logits, n_samples, generator)
        onehot = torch.nn.functional.one_hot(a, len(pi)).to(pi.dtype)
        return (reward_per_action[a, None] * torch.log(pi[a, None]) * onehot).mean(0)

    def minus_pi_only(logits, reward_per_action, n_samples, generator):
        pi, a = sampled(logits, n_samples, generator)
        return (reward_per_action[a, None] * (-pi)).mean(0)

    def greedy_action(logits, reward_per_action, n_samples, generator):
        pi, a = sampled(logits, n_samples, generator)
        onehot = torch.nn.functional.one_hot(logits.argmax().expand(n_samples), len(pi)).to(pi.dtype)
        return (reward_per_action[a, None] * (onehot - pi)).mean(0)

    def all_rewards(logits, reward_per_action, n_samples, generator):
        pi, a = sampled(logits, n_samples, generator)
        onehot = torch.nn.functional.one_hot(a, len(pi)).to(pi.dtype)
        return (reward_per_action * (onehot - pi)).mean(0)

    def exact(logits, reward_per_action, n_samples, generator):
        return expected_reward_gradient(logits, reward_per_action)

    def one_sample(logits, reward_per_action, n_samples, generator):
        return mc_policy_gradient(logits, reward_per_action, 1, generator)

    def score_of(logits, a, score):
        """Each sample's score, written the ways students write it: the right one and its slips."""
        pi = torch.softmax(logits, dim=-1)
        onehot = torch.nn.functional.one_hot(a, len(pi)).to(pi.dtype)
        if score == "pi_of_action":
            return onehot - pi[a, None]
        if score == "diagonal":
            return onehot * (1 - pi)
        if score == "log_pi":
            return onehot - torch.log_softmax(logits, dim=-1)
        if score == "logits":
            return onehot - logits
        return onehot - pi

    def score_slip(score):
        def wrong(logits, reward_per_action, n_samples, generator):
            _, a = sampled(logits, n_samples, generator)
            return (reward_per_action[a, None] * score_of(logits, a, score)).mean(0)

        return wrong

    def n_minus_one(logits, reward_per_action, n_samples, generator):
        _, a = sampled(logits, n_samples, generator)
        return (reward_per_action[a, None] * score_of(logits, a, "right")).sum(0) / max(n_samples - 1, 1)

    def product_of_means(logits, reward_per_action, n_samples, generator):
        _, a = sampled(logits, n_samples, generator)
        return reward_per_action[a].mean() * score_of(logits, a, "right").mean(0)

    def pi_weighted_sum(logits, reward_per_action, n_samples, generator):
        pi, a = sampled(logits, n_samples, generator)
        return (reward_per_action[a, None] * pi[a, None] * score_of(logits, a, "right")).sum(0)

    def sample_mean_baseline(logits, reward_per_action, n_samples, generator):
        _, a = sampled(logits, n_samples, generator)
        centred = reward_per_action[a] - reward_per_action[a].mean()  # (n,): the sample's own reward included
        return (centred[:, None] * score_of(logits, a, "right")).mean(0)

    def narrow_one_hot(logits, reward_per_action, n_samples, generator):
        pi, a = sampled(logits, n_samples, generator)
        onehot = torch.nn.functional.one_hot(a).to(pi.dtype)  # (n, max(a) + 1): no num_classes
        return (reward_per_action[a, None] * (onehot - pi[: onehot.shape[-1]])).mean(0)

    def reward_by_position(logits, reward_per_action, n_samples, generator):
        _, a = sampled(logits, n_samples, generator)
        rewards = reward_per_action[torch.arange(n_samples) % len(logits)]  # (n,): by the sample's index
        return (rewards[:, None] * score_of(logits, a, "right")).mean(0)

    mistakes = [
        Mistake(message, seeded(wrong))
        for message, wrong in [
            (
                "you weighted grad pi(a), not grad log pi(a): the log-derivative trick divides by pi(a), "
                "grad log pi(a) = grad pi(a) / pi(a) = onehot(a) - pi; drop the extra factor pi[a]",
                no_log,
            ),
            (
                "the sign is flipped: return the gradient of the expected reward, r[a] * (onehot(a) - pi), "
                "not of the loss -r[a] * log pi(a)",
                flipped,
            ),
            (
                "you divided by n_samples twice (a .mean() and then / n_samples): average the n terms once",
                twice_divided,
            ),
            ("you summed the n terms: average them (.mean(dim=0)) so the estimate does not grow with n", summed),
            (
                "the one-hot is missing: grad_logits log pi(a) = onehot(a) - pi, the sampled action's entry gets "
                "1 - pi[a], every other entry -pi[j]",
                no_onehot,
            ),
            (
                "the score is written as onehot(a) without its -pi term: grad_logits log pi(a) = onehot(a) - pi (the "
                "gradient of log-softmax); without -pi the estimate is biased",
                onehot_only,
            ),
            (
                "you weighted log pi(a) itself; the estimate weights its gradient, the score onehot(a) - pi",
                log_pi_weighted,
            ),
            ("the one-hot is missing: grad_logits log pi(a) = onehot(a) - pi, not -pi", minus_pi_only),
            (
                "you used the gradient of log pi of the most likely action (argmax), not of the sampled one: "
                "use onehot(a) for each sampled a",
                greedy_action,
            ),
            (
                "each sample must be weighted by the reward of its own action, reward_per_action[a], not by the "
                "whole reward vector",
                all_rewards,
            ),
            (
                "you returned the exact gradient; the exercise asks for a Monte-Carlo estimate from n_samples "
                "sampled actions",
                exact,
            ),
            ("you used one sample, whatever n_samples is: average over all n_samples sampled actions", one_sample),
            (
                "your score subtracts pi[a], the sampled action's probability, from every entry; the score of a "
                "softmax is onehot(a) - pi, the whole vector of probabilities",
                score_slip("pi_of_action"),
            ),
            (
                "your score is onehot(a) * (1 - pi): only the sampled action's entry; every other entry j of the "
                "score is -pi[j] (the gradient of log pi(a) moves every logit): onehot(a) - pi",
                score_slip("diagonal"),
            ),
            (
                "your score subtracts log pi; the score of a softmax is onehot(a) - pi, the probabilities "
                "themselves (the gradient of log_softmax(logits)[a])",
                score_slip("log_pi"),
            ),
            (
                "your score subtracts the logits; it subtracts the probabilities, pi = softmax(logits): the "
                "score of a softmax is onehot(a) - pi",
                score_slip("logits"),
            ),
            (
                "you divided the sum of the n terms by n - 1: a Monte-Carlo estimate is their plain mean, "
                "divided by n (Bessel's n - 1 is for a variance)",
                n_minus_one,
            ),
            (
                "you multiplied the mean reward by the mean score: the mean of a product is not the product of "
                "the means; average r[a] * (onehot(a) - pi) sample by sample",
                product_of_means,
            ),
            (
                "you weighted each sample by pi(a) as well and summed: sampling from pi already weights each "
                "action by its probability; average r[a] * (onehot(a) - pi) over the samples",
                pi_weighted_sum,
            ),
            (
                "you subtracted the mean reward of the samples (a baseline), or, giving the same numbers, used "
                "the actions' frequencies in the samples in place of pi; the exercise averages r[a] * (onehot(a) - "
                "pi) with pi = softmax(logits), and either way each sample's own reward biases the estimate",
                sample_mean_baseline,
            ),
            (
                "F.one_hot(a) without num_classes is only as wide as the largest action drawn, so an action never "
                "drawn at the end is missing: pass num_classes=len(logits)",
                narrow_one_hot,
            ),
            (
                "each sample is weighted by the reward of the action at its index (reward_per_action[i]), not of "
                "the action it drew: use reward_per_action[a] for the sampled a",
                reward_by_position,
            ),
        ]
    ]
    try:
        passed = check_against_reference(
            seeded(fn), seeded(mc_policy_gradient), cases, name=name, mistakes=mistakes, check_dtype=True
        )
    except NotImplementedError:
        raise
    except AssertionError as error:
        first_line = str(error).split("\n")[0]
        if any(m.message in str(error) for m in mistakes) or "raised" in first_line:
            raise
        if (
            "has shape" in first_line or "the exercise asks for" in first_line
        ):  # a wrong shape or kind: no sampling explains it
            raise
        _statistical_check(fn, name, str(error))
        recording.report(
            f"\u2714 {name}: unbiased, with an error that shrinks like 1/sqrt(n) (your samples differ "
            f"from those of {_SAMPLING}, so the values were checked statistically)."
        )
        record_pass(name, fn)
        return True
    if recording.is_recording():  # the grading kernel does not judge: record what the statistical check asks too
        try:
            _statistical_check(fn, name, "the grader compares the values")
        except AssertionError:
            pass  # the grader replays it, and says so if the exact comparison does not settle it first
    record_pass(name, fn)  # the student's function, not the seeded wrapper the comparison ran
    return passed
