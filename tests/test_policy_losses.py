"""course_lib.policy_losses: the GRPO family's per-token losses with one signature, the loop's table (issue 42)."""

import inspect

import torch

from course_lib import family
from course_lib.policy_losses import POLICY_LOSSES

SIGNATURE = ["logp", "logp_old", "adv", "mask", "clip_eps", "clip_eps_high"]


def _batch(n=3, L=4):
    g = torch.Generator().manual_seed(0)
    logp = (-torch.rand(n, L, generator=g)).requires_grad_()
    logp_old = -torch.rand(n, L, generator=g)
    adv = torch.randn(n, generator=g)
    mask = torch.ones(n, L)
    mask[0, 2:] = 0
    return logp, logp_old, adv, mask


def test_every_variant_takes_the_one_signature_and_returns_per_token_losses():
    logp, logp_old, adv, mask = _batch()
    for name, loss in POLICY_LOSSES.items():
        assert list(inspect.signature(loss).parameters) == SIGNATURE, name
        assert loss(logp, logp_old, adv, mask, 0.2, 0.28).shape == logp.shape, name


def test_cispo_and_sapo_are_the_exercise_functions_with_one_advantage_per_response():
    logp, logp_old, adv, mask = _batch()
    adv_tokens = adv[:, None].expand_as(logp)
    cispo = POLICY_LOSSES["cispo"]
    torch.testing.assert_close(
        cispo(logp, logp_old, adv, mask, 0.2, 4.0), family.cispo_loss(logp, logp_old, adv_tokens, 4.0), rtol=0, atol=0
    )
    symmetric = cispo(logp, logp_old, adv, mask, 0.2, None)  # no clip_eps_high: capped at 1 + clip_eps
    torch.testing.assert_close(symmetric, family.cispo_loss(logp, logp_old, adv_tokens, 0.2), rtol=0, atol=0)
    sapo = POLICY_LOSSES["sapo"](logp, logp_old, adv, mask, 0.2, None)
    torch.testing.assert_close(sapo, family.sapo_loss(logp, logp_old, adv_tokens), rtol=0, atol=0)
    assert POLICY_LOSSES["gspo"] is family.gspo_loss and POLICY_LOSSES["gmpo"] is family.gmpo_loss
