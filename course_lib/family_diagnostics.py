"""What each policy loss of the GRPO family does to the tokens whose ratio has drifted, each on its own quantity.

PPO's clip (GRPO's too) works on each token's ratio ``r_t = pi_theta / pi_old``; GSPO clips one ratio per sequence
(the geometric mean of its tokens' ratios); GMPO clips each token's log-ratio inside a geometric mean; CISPO never
clips the gradient, only caps the weight in front of it; SAPO replaces the clip by a smooth gate. Counting "ratios
outside [0.8, 1.2]" for all of them would measure GSPO on a quantity it never clips, and CISPO on a bound it does
not have. :func:`policy_loss_diagnostics` measures each on its own:

- ``clip_fraction``: the share of valid tokens whose own quantity lies outside its range (GSPO: the tokens of
  sequences whose sequence ratio does; CISPO: tokens whose weight is capped; SAPO: tokens whose gate has fallen
  below 0.1 of its on-policy slope);
- ``silenced``: the share of valid tokens that get no gradient at all (where a clip binds: the ratio is past the
  range on the side the advantage pushes it). CISPO silences none by design; SAPO counts its near-zero gates;
- ``silenced_low_prob``: the same among the low-probability tokens (``pi_old < 0.1``), the rare "fork" tokens
  that CISPO (MiniMax 2025) and SAPO (Qwen 2025) were made to keep learning from.

Shapes: ``n`` sequences, ``L`` tokens; advantages ``(n,)``, one per sequence.
"""

from __future__ import annotations

import math

import torch

from course_lib.family import SAPO_TAU_NEG, SAPO_TAU_POS

LOW_PROB = 0.1
"""A token is low-probability when the sampling policy gave it less than this."""

SAPO_SILENT_SLOPE = 0.1
"""SAPO's gate counts as silencing a token when its slope is under this share of the on-policy slope (1)."""


def _shares(flags: torch.Tensor, valid: torch.Tensor, low: torch.Tensor) -> tuple[float, float]:
    """The share of valid entries flagged, and of valid low-probability ones (nan when there are none)."""
    n_valid = int(valid.sum())
    n_low = int((valid & low).sum())
    share = float((flags & valid).sum()) / n_valid if n_valid else float("nan")
    share_low = float((flags & valid & low).sum()) / n_low if n_low else float("nan")
    return share, share_low


@torch.no_grad()
def policy_loss_diagnostics(
    policy_loss: str,
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float,
    clip_eps_high: float | None = None,
    sapo_tau: tuple[float, float] = (SAPO_TAU_POS, SAPO_TAU_NEG),
) -> dict[str, float]:
    """``clip_fraction``, ``silenced`` and ``silenced_low_prob`` of ``policy_loss`` on one minibatch.

    Args:
        policy_loss: ``"clip"``, ``"gspo"``, ``"gmpo"``, ``"cispo"`` or ``"sapo"`` (``LMRLConfig.policy_loss``).
        logp, logp_old: ``(n, L)`` the current and the sampling policy's log-probs; mask: ``(n, L)``.
        adv: ``(n,)`` one advantage per sequence.
        clip_eps, clip_eps_high: the variant's range (GMPO's in log space; CISPO's cap is ``1 + clip_eps_high``).
        sapo_tau: SAPO's temperatures for positive and negative advantages (:func:`course_lib.family.sapo_loss`'s).
    """
    high = clip_eps if clip_eps_high is None else clip_eps_high
    valid = mask > 0  # (n, L)
    low = logp_old < math.log(LOW_PROB)  # (n, L)
    positive = (adv > 0)[:, None].expand_as(logp)  # (n, L)
    negative = (adv < 0)[:, None].expand_as(logp)
    log_ratio = torch.where(valid, logp - logp_old, torch.zeros_like(logp))  # (n, L)
    if policy_loss == "gspo":  # one ratio per sequence, the mean of its tokens' log-ratios
        n_tokens = valid.sum(-1).clamp(min=1)
        log_s = (log_ratio.sum(-1) / n_tokens)[:, None].expand_as(logp)  # (n, L): each token carries its sequence's
        above, below = log_s > math.log1p(high), log_s < math.log1p(-clip_eps)
    elif policy_loss == "gmpo":  # each token's log-ratio, clipped in log space
        above, below = log_ratio > high, log_ratio < -clip_eps
    elif policy_loss == "cispo":  # the weight is capped at 1 + clip_eps_high; the gradient is never cut
        capped = log_ratio.exp() > 1 + high
        clip_fraction, _ = _shares(capped, valid, low)
        return {"clip_fraction": clip_fraction, "silenced": 0.0, "silenced_low_prob": 0.0}
    elif policy_loss == "sapo":  # the gate's slope 4 s (1 - s), s = sigmoid(tau (r - 1)): 1 on-policy
        tau = torch.where(positive, sapo_tau[0], sapo_tau[1])
        s = torch.sigmoid(tau * (log_ratio.exp() - 1))
        faded = 4 * s * (1 - s) < SAPO_SILENT_SLOPE
        clip_fraction, _ = _shares(faded, valid, low)
        silenced, silenced_low = _shares(faded, valid, low)
        return {"clip_fraction": clip_fraction, "silenced": silenced, "silenced_low_prob": silenced_low}
    else:  # "clip": PPO's, token by token
        ratio = log_ratio.exp()
        above, below = ratio > 1 + high, ratio < 1 - clip_eps
    clip_fraction, _ = _shares(above | below, valid, low)
    binding = (above & positive) | (below & negative)  # the clip takes the gradient away only on this side
    silenced, silenced_low = _shares(binding, valid, low)
    return {"clip_fraction": clip_fraction, "silenced": silenced, "silenced_low_prob": silenced_low}
