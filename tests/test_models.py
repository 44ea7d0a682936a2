"""Tests for course_lib.models: the CS336 sorting policy, its sampling, and the categorical policy."""

import math

import pytest
import torch

from course_lib.models import CategoricalPolicy, SortingPolicy, greedy_responses, sample_responses
from course_lib.policy_gradient import expected_reward_gradient


def small_model(seed=0, V=5, D=4, Tp=3, Tr=3):
    return SortingPolicy(V, D, Tp, Tr, generator=torch.Generator().manual_seed(seed))


def test_sorting_policy_shapes_and_parameter_count():
    model = SortingPolicy(vocab_size=7, embedding_dim=4, prompt_length=3, response_length=2)
    logits = model(torch.tensor([[0, 1, 2], [6, 5, 4]]))
    assert logits.shape == (2, 2, 7)  # (B, Tr, V)
    # V*D + Tp*D*D + Tr*D*D = 28 + 48 + 32 = 108
    assert sum(p.numel() for p in model.parameters()) == 108


def test_sorting_policy_matches_a_loop_over_positions():
    # The einsum formula written out with plain loops: h = sum_p E[x_p] @ W_enc[p],
    # logits[t, v] = (h @ W_dec[t]) . E[v].
    model = small_model(seed=1)
    prompts = torch.tensor([[1, 0, 2], [3, 2, 4]])
    E, W_enc, W_dec = model.embedding, model.encode, model.decode
    expected = torch.zeros(2, 3, 5)
    for b in range(2):
        h = sum(E[prompts[b, p]] @ W_enc[p] for p in range(3))
        for t in range(3):
            expected[b, t] = E @ (h @ W_dec[t])
    torch.testing.assert_close(model(prompts), expected)


def test_sorting_policy_hand_computed_with_identity_weights():
    # D = V = 2, E = I, W_enc = W_dec = I: h = e_{x_0} + e_{x_1}, logits[t] = h.
    model = SortingPolicy(2, 2, 2, 1)
    with torch.no_grad():
        model.embedding.copy_(torch.eye(2))
        model.encode.copy_(torch.eye(2).expand(2, 2, 2))
        model.decode.copy_(torch.eye(2).expand(1, 2, 2))
    # prompt [0, 0]: h = (2, 0); prompt [0, 1]: h = (1, 1).
    torch.testing.assert_close(model(torch.tensor([[0, 0], [0, 1]])), torch.tensor([[[2.0, 0.0]], [[1.0, 1.0]]]))


def test_initialisation_scale_and_seed():
    a, b, c = small_model(seed=0, D=64), small_model(seed=0, D=64), small_model(seed=1, D=64)
    torch.testing.assert_close(a.encode, b.encode)
    assert not torch.equal(a.encode, c.encode)
    # Entries ~ N(0, 1/D): std close to 1/8 for D = 64 (3 * 64 * 64 samples).
    assert abs(a.encode.std().item() - 1 / 8) < 0.01
    assert abs(a.embedding.std().item() - 1 / 8) < 0.03


def test_sample_responses_shape_range_and_determinism():
    model = small_model()
    prompts = torch.tensor([[1, 0, 2], [3, 2, 4]])
    r1 = sample_responses(model, prompts, 6, generator=torch.Generator().manual_seed(3))
    r2 = sample_responses(model, prompts, 6, generator=torch.Generator().manual_seed(3))
    assert r1.shape == (2, 6, 3) and r1.dtype == torch.long
    assert int(r1.min()) >= 0 and int(r1.max()) < 5
    assert torch.equal(r1, r2)


def test_sample_responses_follow_the_softmax():
    # Empirical frequencies of each position's tokens match softmax(logits) (20000 samples).
    model = small_model(seed=2, D=2)  # D = 2 keeps the logits small, so every token is seen
    prompts = torch.tensor([[1, 0, 2]])
    samples = sample_responses(model, prompts, 20000, generator=torch.Generator().manual_seed(0))  # (1, N, 3)
    probs = torch.softmax(model(prompts), -1)[0].detach()  # (3, 5)
    freqs = torch.stack([torch.bincount(samples[0, :, t], minlength=5) for t in range(3)]).float() / 20000
    assert (freqs - probs).abs().max() < 0.015


def test_greedy_responses_is_the_argmax():
    model = small_model(seed=4)
    prompts = torch.tensor([[1, 0, 2], [4, 3, 2]])
    assert torch.equal(greedy_responses(model, prompts), model(prompts).argmax(-1))


def test_categorical_policy_uniform_by_default_and_its_gradient():
    policy = CategoricalPolicy(4)
    torch.testing.assert_close(policy.probs(), torch.full((4,), 0.25))
    # The autograd gradient of J = sum_a pi_a r_a equals the closed form.
    policy = CategoricalPolicy(3, logits=torch.tensor([0.5, -1.0, 2.0]))
    r = torch.tensor([1.0, 0.0, 3.0])
    (policy.probs() * r).sum().backward()
    torch.testing.assert_close(policy.logits.grad, expected_reward_gradient(policy.logits.detach(), r))
    # Sampling: (n,) actions in range; with logits (0, ln 3) P(action 1) = 3/4.
    p2 = CategoricalPolicy(2, logits=torch.tensor([0.0, math.log(3.0)]))
    a = p2.sample(40000, generator=torch.Generator().manual_seed(0))
    assert a.shape == (40000,) and abs(a.float().mean().item() - 0.75) < 0.01


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("vocab_size", dict(vocab_size=0, embedding_dim=2, prompt_length=3, response_length=3)),
        ("embedding_dim", dict(vocab_size=5, embedding_dim=2.0, prompt_length=3, response_length=3)),
        ("prompt_length", dict(vocab_size=5, embedding_dim=2, prompt_length=-1, response_length=3)),
        ("response_length", dict(vocab_size=5, embedding_dim=2, prompt_length=3, response_length=True)),
    ],
)
def test_sorting_policy_bad_arguments(name, kwargs):
    with pytest.raises(ValueError, match=name):
        SortingPolicy(**kwargs)


def test_bad_prompts_and_group_size():
    model = small_model()
    with pytest.raises(ValueError, match="prompts"):
        model(torch.tensor([[1, 0]]))  # wrong length
    with pytest.raises(ValueError, match="prompts"):
        model(torch.tensor([[1, 0, 5]]))  # token out of range
    with pytest.raises(ValueError, match="prompts"):
        model(torch.tensor([[1.0, 0.0, 2.0]]))  # floats
    with pytest.raises(ValueError, match="group_size"):
        sample_responses(model, torch.tensor([[1, 0, 2]]), 0)
    with pytest.raises(ValueError, match="prompts"):
        sample_responses(model, torch.tensor([1, 0, 2]), 2)
    with pytest.raises(ValueError, match="prompts"):
        greedy_responses(model, torch.tensor([1, 0, 2]))
    with pytest.raises(ValueError, match="n_actions"):
        CategoricalPolicy(0)
    with pytest.raises(ValueError, match="logits"):
        CategoricalPolicy(3, logits=torch.zeros(4))


def test_embedding_std_reproduces_the_lectures_nn_embedding_scale():
    from course_lib.models import SortingPolicy

    course = SortingPolicy(5, 10, 3, 3, generator=torch.Generator().manual_seed(0))
    lecture = SortingPolicy(5, 10, 3, 3, generator=torch.Generator().manual_seed(0), embedding_std=1.0)
    torch.testing.assert_close(lecture.embedding * 10**-0.5, course.embedding)  # same draws, other scale
    torch.testing.assert_close(lecture.encode, course.encode)
    with pytest.raises(ValueError, match="embedding_std"):
        SortingPolicy(5, 10, 3, 3, embedding_std=0.0)
