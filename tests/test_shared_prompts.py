"""Tests of the loop's speed-ups that leave the maths alone: a group's prompt read once (TinyLM.continuation_hidden,
generate's cache), the sampler's own log-probs. Each gives what the plain computation gives, up to float rounding,
and the plain computation is still what runs when nothing is shared."""

import pytest
import torch

from course_lib._distinct import distinct_rows
from course_lib.lm_sampling import sample_completions, token_logps, token_values
from course_lib.tiny_lm import TinyLM, TinyLMConfig, ValueModel

EOS, PAD = 12, 13


@pytest.fixture
def lm():
    return TinyLM(TinyLMConfig(vocab_size=14, block_size=10, n_layer=2, n_head=2, d_model=16), seed=3)


def _groups(n_prompts=5, group=4, prompt_len=5, completion_len=4, seed=0):
    """``(n * G, P)`` prompts in groups of G copies, shuffled as a minibatch is, and random completions."""
    g = torch.Generator().manual_seed(seed)
    prompts = torch.randint(0, 12, (n_prompts, prompt_len), generator=g).repeat_interleave(group, 0)
    completions = torch.randint(0, 13, (n_prompts * group, completion_len), generator=g)
    order = torch.randperm(len(prompts), generator=g)
    return prompts[order], completions[order]


def _plain_logps(model, prompts, completions, temperature=1.0):
    """token_logps as one pass over prompt + completion (what runs when no prompt is shared)."""
    ids = torch.cat([prompts, completions[:, :-1]], 1)
    logits = model(ids)[:, -completions.shape[1] :] / temperature
    logits = logits.masked_fill(torch.arange(logits.shape[-1]) == PAD, -float("inf"))
    logp = torch.log_softmax(logits, -1).gather(-1, completions[..., None])[..., 0]
    return logp.masked_fill(completions == PAD, 0.0)


@pytest.mark.parametrize("rows", [(7, 1, 3), (40, 5, 3), (12, 30, 14), (1, 4, 2)])
def test_distinct_rows_is_torch_unique(rows):
    n, length, vocab = rows
    ids = torch.randint(0, vocab, (n, length), generator=torch.Generator().manual_seed(n))
    ids = torch.cat([ids, ids.flip(0)])  # every row at least twice; 30 columns of base 14 take the sorting branch
    unique, index = distinct_rows(ids)
    expected, expected_index = torch.unique(ids, dim=0, return_inverse=True)
    assert torch.equal(unique, expected) and torch.equal(index, expected_index)


def test_shared_prompts_give_the_full_pass(lm):
    prompts, completions = _groups()
    hidden = lm.continuation_hidden(prompts, completions[:, :-1])  # (N, L, D)
    full = lm.hidden(torch.cat([prompts, completions[:, :-1]], 1))[:, prompts.shape[1] - 1 :]
    torch.testing.assert_close(hidden, full, atol=1e-5, rtol=1e-5)
    distinct = torch.arange(20).view(4, 5) % 12
    assert lm.continuation_hidden(distinct, completions[:4, :-1]) is None, "nothing shared: the caller's plain pass"


def test_token_logps_and_their_gradients_with_shared_prompts(lm):
    prompts, completions = _groups()
    completions[0, 2:] = PAD
    logp = token_logps(lm, prompts, None, completions, 0.7, PAD)
    torch.testing.assert_close(logp, _plain_logps(lm, prompts, completions, 0.7), atol=1e-5, rtol=1e-5)
    logp.sum().backward()
    shared = [p.grad.clone() for p in lm.parameters()]
    lm.zero_grad()
    _plain_logps(lm, prompts, completions, 0.7).sum().backward()
    for a, b in zip(shared, (p.grad for p in lm.parameters())):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_distinct_prompts_take_the_plain_pass_bit_for_bit(lm):
    prompts = torch.arange(30).view(6, 5) % 12
    completions = torch.randint(0, 13, (6, 4), generator=torch.Generator().manual_seed(1))
    assert torch.equal(token_logps(lm, prompts, None, completions, 1.0, PAD), _plain_logps(lm, prompts, completions))


def test_token_values_with_shared_prompts(lm):
    critic = ValueModel(lm)
    torch.nn.init.normal_(critic.value_head.weight)
    prompts, completions = _groups()
    values = token_values(critic, prompts, completions)
    full = critic(torch.cat([prompts, completions[:, :-1]], 1))[:, prompts.shape[1] - 1 :]
    torch.testing.assert_close(values, full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_sampler_log_probs_are_token_logps(lm, temperature):
    prompts = torch.randint(0, 12, (6, 5), generator=torch.Generator().manual_seed(2))
    draw = dict(temperature=temperature, generator=torch.Generator().manual_seed(5))
    completions, logp = sample_completions(lm, prompts, None, 8, 4, EOS, PAD, return_logps=True, **draw)
    draw["generator"] = torch.Generator().manual_seed(5)
    assert torch.equal(completions, sample_completions(lm, prompts, None, 8, 4, EOS, PAD, **draw)), "same draws"
    group_prompts = prompts.repeat_interleave(8, 0)
    torch.testing.assert_close(
        logp, token_logps(lm, group_prompts, None, completions, temperature, PAD), atol=1e-5, rtol=0
    )
    assert torch.equal(logp[completions == PAD], torch.zeros(int((completions == PAD).sum())))


def test_generate_with_shared_prompts_samples_what_the_plain_cache_samples(lm):
    prompts = torch.randint(0, 12, (4, 5), generator=torch.Generator().manual_seed(4))
    copies = prompts.repeat_interleave(3, 0)
    shared = lm.generate(copies, 4, greedy=True, eos_id=EOS, pad_id=PAD)
    one_by_one = torch.cat([lm.generate(row[None], 4, greedy=True, eos_id=EOS, pad_id=PAD) for row in copies])
    assert torch.equal(shared, one_by_one)


@pytest.mark.parametrize("dynamic_sampling", [False, True])
def test_the_rollouts_logp_old_is_the_samplers_and_a_forward_passs(lm, dynamic_sampling, monkeypatch):
    """lm_rl takes logp_old from TinyLM's sampler instead of a pass of its own: the same numbers to float rounding,
    kept in step with the groups that dynamic sampling keeps."""
    from course_lib import lm_rl

    cfg = lm_rl.LMRLConfig(prompts_per_step=4, group_size=4, temperature=1.3, dynamic_sampling=dynamic_sampling)
    prompts = torch.randint(0, 10, (16, 5), generator=torch.Generator().manual_seed(0))
    verifier = lambda pick, comp: (comp[..., 0] % 3).float()  # noqa: E731 - any verifier will do
    run, _ = lm_rl.make_run(cfg.validate(), lm, verifier, prompts, EOS, PAD)
    scored = []
    monkeypatch.setattr(lm_rl, "token_logps", lambda model, *args: scored.append(model) or token_logps(model, *args))
    batch, _ = lm_rl.rollout(cfg, run)
    assert scored == [run.ref], "the policy's log-probs come from the sampler, only the reference takes a pass"
    forward = token_logps(lm, batch["prompt_ids"], None, batch["completion_ids"], 1.3, PAD)
    torch.testing.assert_close(batch["logp_old"], forward, atol=1e-5, rtol=0)
