"""Tests of course_lib.family_diagnostics: each policy loss measured on its own quantity, checked by hand and
against autograd (a token the diagnostics call silenced gets no gradient from that loss, and no other does)."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib import family
from course_lib.family_diagnostics import policy_loss_diagnostics
from course_lib.grpo import aggregate_loss
from course_lib.ppo import clipped_surrogate

LOG = math.log


def _batch():
    # two sequences of three tokens, the second with one padding token; the first token of each is low-probability
    logp_old = torch.tensor([[LOG(0.05), LOG(0.5), LOG(0.5)], [LOG(0.05), LOG(0.5), 0.0]], dtype=torch.float64)
    ratio = torch.tensor([[1.5, 1.0, 0.7], [0.7, 1.1, 1.0]], dtype=torch.float64)
    logp = logp_old + ratio.log()
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    return logp, logp_old, adv, mask


def test_ppo_clip_by_hand():
    logp, logp_old, adv, mask = _batch()
    d = policy_loss_diagnostics("clip", logp, logp_old, adv, mask, 0.2)
    # outside [0.8, 1.2]: 1.5 and 0.7 (seq 0), 0.7 (seq 1): 3 of 5 valid tokens
    assert d["clip_fraction"] == pytest.approx(3 / 5)
    # binding: 1.5 with A > 0 (seq 0, token 0), 0.7 with A < 0 (seq 1, token 0); 0.7 with A > 0 keeps its gradient
    assert d["silenced"] == pytest.approx(2 / 5)
    assert d["silenced_low_prob"] == pytest.approx(1.0)  # both low-probability tokens are silenced


def test_gspo_counts_sequences_not_tokens():
    logp, logp_old, adv, mask = _batch()
    d = policy_loss_diagnostics("gspo", logp, logp_old, adv, mask, 3e-4, 4e-4)
    # sequence ratios: exp(mean log r) = (1.5 * 1.0 * 0.7) ** (1/3) = 1.016 (above 1 + 4e-4, A > 0: silenced);
    # (0.7 * 1.1) ** (1/2) = 0.877 (below 1 - 3e-4, A < 0: silenced): every token of both
    assert d["clip_fraction"] == pytest.approx(1.0) and d["silenced"] == pytest.approx(1.0)


def test_cispo_never_silences_and_sapo_fades():
    logp, logp_old, adv, mask = _batch()
    d = policy_loss_diagnostics("cispo", logp, logp_old, adv, mask, 0.2, 0.2)
    assert d["silenced"] == 0.0 and d["clip_fraction"] == pytest.approx(1 / 5)  # only 1.5 > 1.2 is capped
    far = torch.tensor([[5.0, 4.0, 1.0], [1.0, 1.0, 1.0]], dtype=torch.float64).log() + logp_old
    d = policy_loss_diagnostics("sapo", far, logp_old, adv, mask, 0.2)
    # the gate's slope 4 s (1 - s), s = sigmoid(tau (r - 1)), tau = 1 for A > 0: 0.071 at r = 5 (faded), 0.18 at r = 4
    assert d["silenced"] == pytest.approx(1 / 5) and d["silenced_low_prob"] == pytest.approx(1 / 2)


@pytest.mark.parametrize("policy_loss", ["clip", "gspo", "gmpo"])
def test_silenced_tokens_are_those_without_gradient(policy_loss):
    g = torch.Generator().manual_seed(0)
    logp_old = -torch.rand(6, 5, generator=g, dtype=torch.float64) * 3
    logp = (logp_old + 0.4 * torch.randn(6, 5, generator=g, dtype=torch.float64)).requires_grad_(True)
    mask = torch.ones(6, 5)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0], dtype=torch.float64)
    eps, high = (0.2, 0.2) if policy_loss == "clip" else (0.1, 0.1)
    if policy_loss == "clip":
        per_token = clipped_surrogate(logp, logp_old, adv[:, None].expand(6, 5), eps, high)
    elif policy_loss == "gspo":
        per_token = family.gspo_loss(logp, logp_old, adv, mask, eps, high)
    else:
        per_token = family.gmpo_loss(logp, logp_old, adv, mask, eps, high)
    aggregate_loss(per_token, mask, "seq-mean-token-mean").backward()
    no_gradient = logp.grad.abs() < 1e-12
    d = policy_loss_diagnostics(policy_loss, logp.detach(), logp_old, adv, mask, eps, high)
    assert d["silenced"] == pytest.approx(float(no_gradient.double().mean()))
