"""Known wrong versions of the course's formulas, each beside the right one, with its consequence measured.

Every function here is either a deliberately wrong implementation (its docstring says which formula it
computes instead of which) or a small measurement that runs a wrong and a right version side by side.
Chapters 05 and 06 call them in their "bugs in the wild" sections:

- :func:`surrogate_gradient_table` and :func:`train_bandit_ppo`: the ratio written ``pi_old / pi_theta``;
- :func:`sequence_ratio_stats`: one ratio per sequence, ``prod_t pi_theta / pi_old``, against per-token
  ratios and against GSPO's length-normalised sequence ratio (Zheng et al. 2025);
- :func:`compute_gae_buggy`: GAE with its recursion over the batch axis, with a ``values[:, 1:]`` slice that
  drops the last step, or with no done mask;
- :func:`variance_conventions`: the variances of the two-state example under every usual convention;
- :func:`population_std_advantages`: group advantages divided by the population std (``np.std``);
- :func:`mixed_state_group_estimates`: "groups" whose members come from different states.

Shapes: ``B`` episodes or prompts, ``G`` group, ``T`` steps or tokens, ``V`` actions or vocabulary.
"""

from __future__ import annotations

import numpy as np
import torch

from course_lib import _validate
from course_lib.gae import compute_gae
from course_lib.grpo import group_advantages
from course_lib.ppo import clipped_surrogate

# ---------------------------------------------------------------------------
# 1. The inverted ratio pi_old / pi_theta
# ---------------------------------------------------------------------------


def inverted_ratio_surrogate(
    logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor, clip_eps: float
) -> torch.Tensor:
    """WRONG: PPO's per-element loss with the ratio upside down, ``r' = pi_old / pi_theta = exp(logp_old - logp)``.

    ``-min(r' A, clip(r', 1 - eps, 1 + eps) A)``. Its gradient in ``logp`` is ``+r' A`` where the right one is
    ``-r A``: it pushes good actions down and bad ones up, until ``r'`` leaves the band.
    """
    ratio = torch.exp(logp_old.detach() - logp)
    return -torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)


def surrogate_gradient_table(ratios: torch.Tensor, clip_eps: float = 0.2) -> dict[str, torch.Tensor]:
    """``d objective / d logp`` at each true ratio ``pi_theta / pi_old``, for ``A = +1`` and ``A = -1``.

    Args:
        ratios: ``(K,)`` values of the true ratio ``r = pi_theta / pi_old``.
        clip_eps: the clip range.

    Returns:
        ``{"right A=+1", "right A=-1", "inverted A=+1", "inverted A=-1"}``, each ``(K,)``: the derivative of
        the objective (minus the loss) with respect to ``logp``; positive means "make this action likelier".
    """
    ratios = _validate.require_tensor("ratios", ratios).double()
    out = {}
    for name, loss_fn in (
        ("right", lambda lp, adv: clipped_surrogate(lp, torch.zeros_like(lp), adv, clip_eps)),
        ("inverted", lambda lp, adv: inverted_ratio_surrogate(lp, torch.zeros_like(lp), adv, clip_eps)),
    ):
        for sign in (1.0, -1.0):
            logp = torch.log(ratios).requires_grad_(True)
            (grad,) = torch.autograd.grad(-loss_fn(logp, torch.full_like(logp, sign)).sum(), logp)
            out[f"{name} A={sign:+.0f}"] = grad
    return out


def train_bandit_ppo(
    rewards: torch.Tensor,
    inverted: bool = False,
    iterations: int = 30,
    batch: int = 256,
    steps: int = 10,
    lr: float = 0.05,
    clip_eps: float = 0.2,
    seed: int = 0,
) -> list[float]:
    """PPO on a one-step policy over ``V`` actions (softmax of ``V`` logits, starting uniform).

    Each iteration samples ``batch`` actions from the current policy, takes advantages
    ``R - mean(R)`` and ``steps`` Adam steps on the clipped surrogate, right or inverted.

    Args:
        rewards: ``(V,)`` the reward of each action.
        inverted: use :func:`inverted_ratio_surrogate` instead of the right surrogate.

    Returns:
        The exact expected reward of the policy before each iteration and after the last (``iterations + 1``).
    """
    rewards = _validate.require_tensor("rewards", rewards).double()
    logits = torch.zeros_like(rewards, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=lr)
    gen = torch.Generator().manual_seed(seed)
    loss_fn = inverted_ratio_surrogate if inverted else clipped_surrogate
    history = []
    for _ in range(iterations):
        with torch.no_grad():
            probs = torch.softmax(logits, -1)  # (V,)
            history.append(float((probs * rewards).sum()))
            actions = torch.multinomial(probs, batch, replacement=True, generator=gen)  # (batch,)
            logp_old = torch.log(probs)[actions]
            adv = rewards[actions] - rewards[actions].mean()
        for _ in range(steps):
            logp = torch.log_softmax(logits, -1)[actions]
            loss = loss_fn(logp, logp_old, adv, clip_eps).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    history.append(float((torch.softmax(logits.detach(), -1) * rewards).sum()))
    return history


# ---------------------------------------------------------------------------
# 2. One ratio for the whole sequence
# ---------------------------------------------------------------------------


def sequence_ratio_stats(
    lengths: list[int], vocab_size: int = 20, step: float = 0.1, n: int = 20_000, clip_eps: float = 0.2, seed: int = 0
) -> list[dict[str, float]]:
    """Ratios of ``n`` sampled sequences between a policy and one ``step`` away, for several lengths.

    Every token is drawn independently from ``pi_old = softmax(z)``; the new policy is
    ``softmax(z + step * u)`` (``z``, ``u`` standard normal, fixed per seed), the same at every position, so
    a longer sequence only multiplies more per-token ratios.

    Returns:
        One dict per length: ``var_token`` (variance of the per-token ratio), ``var_sequence`` (of the
        product over the tokens, ``pi_theta(o) / pi_old(o)``), ``var_gspo`` (of GSPO's
        ``exp(mean_t log r_t)``), and the fraction of sequences whose ratio is outside ``[1 - eps, 1 + eps]``
        for the sequence ratio (``outside_sequence``) and for GSPO's (``outside_gspo``).
    """
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(vocab_size, generator=gen, dtype=torch.float64)
    u = torch.randn(vocab_size, generator=gen, dtype=torch.float64)
    logp_old_all, logp_all = torch.log_softmax(z, -1), torch.log_softmax(z + step * u, -1)  # (V,)
    rows = []
    for T in lengths:
        _validate.require_int("lengths", T, minimum=1)
        tokens = torch.multinomial(logp_old_all.exp(), n * T, replacement=True, generator=gen).view(n, T)
        log_ratio = (logp_all - logp_old_all)[tokens]  # (n, T)
        seq, gspo = log_ratio.sum(-1).exp(), log_ratio.mean(-1).exp()  # (n,), (n,)
        outside = lambda r: float(((r < 1 - clip_eps) | (r > 1 + clip_eps)).double().mean())  # noqa: E731
        rows.append(
            {
                "length": T,
                "var_token": float(log_ratio.exp().var()),
                "var_sequence": float(seq.var()),
                "var_gspo": float(gspo.var()),
                "outside_sequence": outside(seq),
                "outside_gspo": outside(gspo),
            }
        )
    return rows


# ---------------------------------------------------------------------------
# 3. A broken compute_gae
# ---------------------------------------------------------------------------

GAE_BUGS = ("batch_axis", "slice", "no_done_mask")


def compute_gae_buggy(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float,
    lam: float,
    bug: str,
) -> torch.Tensor:
    """WRONG: GAE advantages ``(B, T)`` with one classic bug (``bug`` in :data:`GAE_BUGS`).

    - ``"batch_axis"``: the backward recursion ``A = delta + gamma lam (1 - done) A_next`` runs over the rows
      (episodes) instead of the time steps, so each episode is credited with the next episode's residuals;
    - ``"slice"``: ``next_values = values[:, 1:]``, shape ``(B, T - 1)``; to make the shapes fit, the rewards and
      values are cut to ``[:, :-1]`` and ``last_values`` is never used: the last step, where an outcome reward
      sits, is dropped (its advantage is returned as 0);
    - ``"no_done_mask"``: the ``(1 - done)`` factors are left out, so values and advantages of the next episode
      leak back across a terminal step.
    """
    _validate.require_choice("bug", bug, GAE_BUGS)
    B, T = rewards.shape
    not_done = (~dones.bool()).to(rewards.dtype)
    if bug == "no_done_mask":
        not_done = torch.ones_like(rewards)
    next_values = torch.cat([values[:, 1:], last_values.reshape(B, 1)], dim=1)  # (B, T)
    adv = torch.zeros_like(rewards)
    if bug == "slice":
        deltas = rewards[:, :-1] + gamma * values[:, 1:] * not_done[:, :-1] - values[:, :-1]  # (B, T - 1)
        running = torch.zeros(B, dtype=rewards.dtype)
        for t in reversed(range(T - 1)):
            running = deltas[:, t] + gamma * lam * not_done[:, t] * running
            adv[:, t] = running
        return adv  # the last column stays 0
    deltas = rewards + gamma * next_values * not_done - values  # (B, T)
    if bug == "batch_axis":
        running = torch.zeros(T, dtype=rewards.dtype)
        for b in reversed(range(B)):  # WRONG axis: episodes, not time
            running = deltas[b] + gamma * lam * not_done[b] * running
            adv[b] = running
        return adv
    running = torch.zeros(B, dtype=rewards.dtype)
    for t in reversed(range(T)):
        running = deltas[:, t] + gamma * lam * not_done[:, t] * running
        adv[:, t] = running
    return adv


def gae_bug_errors(rewards, values, dones, last_values, gamma: float, lam: float) -> dict[str, float]:
    """Largest absolute difference between each buggy version and :func:`course_lib.gae.compute_gae`."""
    right, _ = compute_gae(rewards, values, dones, last_values, gamma, lam)
    return {
        bug: float((compute_gae_buggy(rewards, values, dones, last_values, gamma, lam, bug) - right).abs().max())
        for bug in GAE_BUGS
    }


# ---------------------------------------------------------------------------
# 4. Variance conventions, and the population std in group normalisation
# ---------------------------------------------------------------------------


def variance_conventions(x: torch.Tensor) -> dict[str, float]:
    """The spread of ``x`` under the usual conventions: variances with N - 1 and N, and their square roots."""
    x = _validate.require_tensor("x", x).double().flatten()
    return {
        "variance, divides by N - 1 (torch.var)": float(x.var()),
        "variance, divides by N (numpy.var)": float(np.var(x.numpy())),
        "std, N - 1 (torch.std)": float(x.std()),
        "std, N (numpy.std)": float(np.std(x.numpy())),
    }


def population_std_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """WRONG convention for the course: ``(r - mean) / (np.std(r) + eps)``, the population std (divides by G).

    Differs from :func:`course_lib.grpo.group_advantages` (Bessel's correction, ``torch.std``) by the factor
    ``sqrt(G / (G - 1))`` on every group with a nonzero spread.
    """
    rewards = _validate.require_tensor("rewards", rewards)
    centred = rewards - rewards.mean(-1, keepdim=True)
    std = rewards.std(-1, unbiased=False, keepdim=True)
    return torch.where(std > 0, centred / (std + eps), torch.zeros_like(centred))


def std_convention_ratios(group_sizes=(2, 4, 8), seed: int = 0) -> list[dict[str, float]]:
    """For random groups of each size: how much larger the population-std advantages are than the course's."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for G in group_sizes:
        r = torch.randint(0, 6, (1000, G), generator=gen).double()
        right, wrong = group_advantages(r), population_std_advantages(r)
        mixed = right.abs().sum(-1) > 0
        rows.append(
            {
                "G": G,
                "measured": float((wrong[mixed].abs().sum() / right[mixed].abs().sum())),
                "sqrt(G / (G - 1))": (G / (G - 1)) ** 0.5,
            }
        )
    return rows


# ---------------------------------------------------------------------------
# 5. Groups whose members come from different states
# ---------------------------------------------------------------------------


def mixed_state_group_estimates(
    bandit, logits: torch.Tensor, group_size: int, n_groups: int, mixed: bool, generator: torch.Generator | None = None
) -> dict[str, torch.Tensor]:
    """Group-normalised REINFORCE estimates on a contextual bandit, groups from one state or mixing states.

    ``mixed=False``: each group's ``G`` actions are drawn at one state, as GRPO requires. ``mixed=True``: every
    member is at its own state (what happens when one environment is stepped ``G`` times and the ``G``
    transitions are called a group). The advantages are ``group_advantages`` of the group's rewards either way.

    Returns:
        ``{"estimates": (n_groups, P), "adv": (n_groups, G), "values": (n_groups, G)}``: per-group gradient
        estimates (mean over the group of ``adv * grad log pi``), the advantages, and ``V(s)`` of each member.
    """
    from course_lib.lectures import variance

    S = logits.shape[0]
    states = torch.randint(0, S, (n_groups, 1 if not mixed else group_size), generator=generator)
    states = states.expand(n_groups, group_size)  # (n, G)
    probs = torch.softmax(logits, -1)[states]  # (n, G, K)
    actions = torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=generator).view(n_groups, group_size)
    rewards = bandit.rewards[states, actions]  # (n, G)
    adv = group_advantages(rewards)  # (n, G)
    scores = variance.bandit_scores(logits, states.reshape(-1), actions.reshape(-1)).view(n_groups, group_size, -1)
    values = variance.bandit_values(bandit, logits)[states]  # (n, G)
    return {"estimates": (adv[..., None] * scores).mean(1), "adv": adv, "values": values}
