"""The GRPO family's policy losses with one signature, so that the loop chooses one by a table lookup.

    loss(logp, logp_old, adv, mask, clip_eps, clip_eps_high) -> per_token

``logp``, ``logp_old``, ``mask`` and the returned per-token loss are ``[..., T]``; ``adv`` is ``[...]``, one
advantage per response; the clip range is as ``LMRLConfig`` holds it (``clip_eps_high=None``: symmetric). GSPO and
GMPO (:mod:`course_lib.family`) take exactly these. CISPO and SAPO are written per token, with their own arguments,
for chapter 11's exercise; the two functions below call them with the one signature. GRPO's own loss is chapter
06's ``grpo.grpo_loss``, which the loop calls directly (the function the student wrote is the one that trains).
"""

from __future__ import annotations

import torch

from course_lib.family import cispo_loss, gmpo_loss, gspo_loss, sapo_loss


def cispo_response_loss(logp, logp_old, adv, mask, clip_eps, clip_eps_high=None) -> torch.Tensor:
    """CISPO with one advantage per response and no lower bound (the paper's and TRL's): the weight is capped at
    ``1 + clip_eps_high`` (``1 + clip_eps`` when it is None). ``mask`` is the aggregation's business."""
    adv_tokens = adv.unsqueeze(-1).expand_as(logp)  # (..., T): every token shares its response's advantage
    cap = clip_eps if clip_eps_high is None else clip_eps_high
    return cispo_loss(logp, logp_old, adv_tokens, cap)


def sapo_response_loss(logp, logp_old, adv, mask, clip_eps, clip_eps_high=None) -> torch.Tensor:
    """SAPO with one advantage per response, at its default temperatures; its gate replaces the clip range."""
    adv_tokens = adv.unsqueeze(-1).expand_as(logp)  # (..., T)
    return sapo_loss(logp, logp_old, adv_tokens)


POLICY_LOSSES = {
    "gspo": gspo_loss,  # one ratio and one clip per sequence
    "gmpo": gmpo_loss,  # a geometric mean of the clipped token ratios
    "cispo": cispo_response_loss,  # a clipped, detached weight on REINFORCE
    "sapo": sapo_response_loss,  # a smooth gate in place of the clip
}
"""The family's per-token losses by ``LMRLConfig.policy_loss`` (``"clip"`` is GRPO's ``grpo_loss``)."""
