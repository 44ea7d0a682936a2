"""Tests of chapter 10's pure functions (course_lib.lectures.reasoning): pass@k, token weights, style share."""

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.grpo import LOSS_AGG_MODES, aggregate_loss
from course_lib.lectures.reasoning import aggregation_token_weight, pass_at_k, style_share


def _exact_pass_at_k(n, c, k):
    """1 - C(n - c, k) / C(n, k) in exact arithmetic (math.comb is 0 when k > n - c); k > n: pass@n."""
    k = min(k, n)
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


# ---------------------------------------------------------------------------
# pass@k
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
        (10, 3, 1, 0.3),  # pass@1 is the plain fraction right
        (5, 2, 3, 0.9),  # 1 - C(3, 3) / C(5, 3) = 1 - 1/10
        (5, 2, 4, 1.0),  # n - c = 3 < k: every draw holds a right one
        (5, 0, 3, 0.0),
        (5, 5, 3, 1.0),
        (5, 5, 5, 1.0),
        (4, 0, 9, 0.0),
        (4, 1, 9, 1.0),  # k > n: pass@n
    ],
)
def test_pass_at_k_by_hand(n, c, k, expected):
    assert pass_at_k(n, c, k).item() == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_large_n_does_not_overflow():
    got = pass_at_k(5000, 2500, 200).item()  # C(5000, 200) ~ 1e400 would overflow a float64
    assert got == pytest.approx(_exact_pass_at_k(5000, 2500, 200), abs=1e-12)
    assert pass_at_k(100000, 1, 64).item() == pytest.approx(64 / 100000, rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 80), data=st.data())
def test_pass_at_k_matches_exact_arithmetic_and_is_monotone(n, data):
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n + 5))
    got = pass_at_k(n, c, k).item()
    assert got == pytest.approx(_exact_pass_at_k(n, c, k), abs=1e-9)
    assert pass_at_k(n, c, k + 1).item() >= got - 1e-12
    # The plug-in 1 - (1 - c/n)^k draws with replacement: never above the unbiased estimate (biased low).
    if k <= n:
        assert 1 - (1 - c / n) ** k <= got + 1e-12


def test_pass_at_k_vectorised():
    n = torch.tensor([10, 10, 64, 64])
    c = torch.tensor([[0, 1, 32, 64], [3, 3, 3, 3]])  # (2, 4)
    got = pass_at_k(n, c, 4)
    assert got.shape == (2, 4) and got.dtype == torch.float64
    for i in range(2):
        for j in range(4):
            assert got[i, j].item() == pytest.approx(_exact_pass_at_k(int(n[j]), int(c[i, j]), 4), abs=1e-12)
    ks = np.array([1, 2, 64, 100])
    assert pass_at_k(64, np.array(3), ks).tolist() == pytest.approx([_exact_pass_at_k(64, 3, int(k)) for k in ks])
    assert pass_at_k(torch.tensor([10.0]), torch.tensor([2.0]), 1).tolist() == pytest.approx([0.2])


def test_pass_at_k_validates():
    with pytest.raises(ValueError, match="c"):
        pass_at_k(5, 6, 1)
    with pytest.raises(ValueError, match="k"):
        pass_at_k(5, 1, 0)
    with pytest.raises(ValueError, match="n"):
        pass_at_k(0, 0, 1)
    with pytest.raises(ValueError, match="c"):
        pass_at_k(5, 1.5, 1)


# ---------------------------------------------------------------------------
# The weight of one token under each aggregation
# ---------------------------------------------------------------------------


def _autograd_weights(lengths, mode, max_len=None):
    """d aggregate_loss / d per_token at the first token of each response: the oracle."""
    T = max(int(lengths.max()), 1)
    mask = (torch.arange(T) < lengths[..., None]).double()  # (..., T)
    per_token = torch.zeros(*lengths.shape, T, dtype=torch.float64, requires_grad=True)
    aggregate_loss(per_token, mask, mode, max_len).backward()
    grad = per_token.grad
    # Every valid token of a response gets the same weight; an empty response has none (0).
    assert torch.allclose(grad * mask, grad[..., :1] * mask)
    return torch.where(lengths > 0, grad[..., 0], torch.zeros(()).double())


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("lengths", [[5, 2, 1], [[3, 4, 2], [5, 1, 1]], [4, 0, 2], [7]])
def test_weights_match_autograd_of_aggregate_loss(mode, lengths):
    lengths = torch.tensor(lengths)
    got = aggregation_token_weight(lengths, mode)
    assert torch.allclose(got.double(), _autograd_weights(lengths, mode))
    if mode == "seq-mean-token-sum-norm":
        assert torch.allclose(
            aggregation_token_weight(lengths, mode, max_len=20).double(), _autograd_weights(lengths, mode, max_len=20)
        )


def test_weights_by_hand_and_the_length_bias():
    o = torch.tensor([10.0, 5.0])  # a long and a short response
    assert aggregation_token_weight(o, "seq-mean-token-mean").tolist() == pytest.approx([1 / 20, 1 / 10])
    assert aggregation_token_weight(o, "token-mean").tolist() == pytest.approx([1 / 15, 1 / 15])
    assert aggregation_token_weight(o, "seq-mean-token-sum-norm", max_len=16).tolist() == pytest.approx([1 / 32] * 2)
    assert aggregation_token_weight(o, "seq-mean-token-sum-norm").tolist() == pytest.approx([1 / 20] * 2)
    # The whole response: its tokens' weights sum to 1/N under the per-sequence mean, whatever its length.
    assert (aggregation_token_weight(o, "seq-mean-token-mean") * o).tolist() == pytest.approx([0.5, 0.5])
    assert aggregation_token_weight(torch.tensor([4]), "token-mean").dtype == torch.get_default_dtype()


def test_weights_validate():
    with pytest.raises(ValueError, match="mode"):
        aggregation_token_weight(torch.tensor([1, 2]), "seq-mean")
    with pytest.raises(ValueError, match="length"):
        aggregation_token_weight(torch.tensor([1, -2]), "token-mean")
    with pytest.raises(ValueError, match="length"):
        aggregation_token_weight([1, 2], "token-mean")
    with pytest.raises(ValueError, match="max_len"):
        aggregation_token_weight(torch.tensor([1, 2]), "seq-mean-token-sum-norm", max_len=0)


# ---------------------------------------------------------------------------
# Style share
# ---------------------------------------------------------------------------


def test_style_share():
    labels = [["direct", "scratchpad", "scratchpad", "malformed"], ["scratchpad", "filler", "direct", "direct"]]
    assert style_share(labels, "scratchpad") == 3 / 8
    assert style_share(np.array(labels), "direct") == 3 / 8
    assert style_share(labels[0], "malformed") == 1 / 4
    assert style_share(["direct"], "filler") == 0.0
    with pytest.raises(ValueError, match="style"):
        style_share(labels, "scratch")
    with pytest.raises(ValueError, match="labels"):
        style_share([], "direct")


# ---------------------------------------------------------------------------
# The warm-up and its statistics (tiny sizes: the shapes and the bookkeeping, not the numbers)
# ---------------------------------------------------------------------------


def test_warm_up_and_sample_stats_bookkeeping():
    from course_lib.lectures.reasoning import ReasoningConfig, warm_up_reasoning
    from course_lib.lectures.reasoning_stats import sample_stats

    cfg = ReasoningConfig(n_digits=2, n_demos=16, n_heldout=6, sft_steps=3, filler=True)
    lm, task, split, losses = warm_up_reasoning(cfg, seed=1)
    assert len(losses) == 3 and len(split["heldout"]) == 6
    assert lm.cfg.block_size == task.prompt_length + task.max_new_tokens
    stats = sample_stats(lm, task, split["heldout"], n_samples=4, ks=(1, 2, 4, 8))
    assert sum(stats["share"].values()) == pytest.approx(1.0)
    assert stats["share"]["scratchpad"] == 0.0 and np.isnan(stats["accuracy_by_style"]["scratchpad"])
    assert 1 <= stats["length"] <= task.max_new_tokens
    p = [stats["pass_at_k"][k] for k in (1, 2, 4, 8)]
    assert p == sorted(p) and p[0] == pytest.approx(stats["accuracy"])
    assert sum(stats["greedy"]["share"].values()) == pytest.approx(1.0) and 0 <= stats["greedy"]["accuracy"] <= 1
    assert np.isnan(stats["totals_right"])  # the filler task has no scratchpad
    again = sample_stats(lm, task, split["heldout"], n_samples=4, ks=(1, 2, 4, 8))
    assert repr(again) == repr(stats)  # seeded sampling (repr: nan == nan)


# ---------------------------------------------------------------------------
# RL on the task: the per-round bookkeeping, the share's range, the validation split
# ---------------------------------------------------------------------------


def test_share_range_hand_computed():
    from course_lib.lectures.reasoning_rl import share_range

    assert share_range([0.2, 0.4, 0.9], smooth=1) == pytest.approx(0.7)  # raw: max - min
    # trailing means over 2: 0.2, 0.3, 0.65 -> 0.45
    assert share_range([0.2, 0.4, 0.9], smooth=2) == pytest.approx(0.45)
    assert share_range(np.array([0.5]), smooth=5) == 0.0
    assert share_range([0.0, 1.0] * 10, smooth=2) == pytest.approx(0.5)  # alternating noise is damped
    for bad in ([], [[0.1, 0.2]], [0.1, float("nan")]):
        with pytest.raises(ValueError, match="shares"):
            share_range(bad)
    with pytest.raises(ValueError, match="smooth"):
        share_range([0.1], smooth=0)


def test_round_style_stats_hand_computed():
    from course_lib.lectures.reasoning_rl import round_style_stats
    from course_lib.tasks_reasoning import ScratchpadAdditionTask

    task = ScratchpadAdditionTask(2)
    tok = task.tokenizer
    texts = [["[5,9]95$", "95$"], ["86$", "[.....]86$"]]  # 45+50, 33+53
    comp = torch.tensor(
        [[tok.encode(t) + [tok.pad_id] * (task.max_new_tokens - len(tok.encode(t))) for t in row] for row in texts]
    )
    prompts = task.prompts([(45, 50), (33, 53)])
    rewards = task.score(prompts[:, None, :], comp)
    assert rewards.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0]])  # any rewards: the stats read them as given
    out = round_style_stats(task, prompts, comp, rewards)
    assert out["share"] == {"direct": 0.5, "scratchpad": 0.25, "filler": 0.25, "malformed": 0.0}
    assert out["accuracy"]["direct"] == 0.5 and out["accuracy"]["scratchpad"] == 1.0
    assert np.isnan(out["accuracy"]["malformed"])
    assert out["length"] == pytest.approx((8 + 3 + 3 + 10) / 4)  # tokens, EOS included
    assert out["length_right"] == pytest.approx((8 + 3 + 10) / 3) and out["length_wrong"] == 3.0
    assert out["truncated"] == 0.0
    cut = comp.clone()
    cut[0, 0] = torch.tensor(tok.encode("[5,9]955555"))  # all 11 tokens and no EOS: cut off by the limit
    out = round_style_stats(task, prompts, cut, torch.tensor([[0.0, 0.0], [0.0, 0.0]]))
    assert out["truncated"] == 0.25 and np.isnan(out["length_right"])
    with pytest.raises(ValueError, match="rewards"):
        round_style_stats(task, prompts, comp, rewards[:1])


def test_validation_split_is_apart_from_the_rest():
    from course_lib.lectures.reasoning import ReasoningConfig, warm_up_reasoning

    cfg = ReasoningConfig(n_digits=2, n_demos=16, n_heldout=20, n_val=30, sft_steps=0)
    _, _, split, _ = warm_up_reasoning(cfg, seed=0)
    val, test, train = set(split["val"]), set(split["heldout"]), set(split["train"])
    assert len(val) == 30 and not val & test and not val & train and not test & train
    assert set(split["demos"]) <= train and len(train) == 10_000 - 20 - 30
    with pytest.raises(ValueError, match="n_val"):
        warm_up_reasoning(ReasoningConfig(n_digits=1, n_demos=50, n_heldout=10, n_val=40, sft_steps=0))


def test_run_records_styles_every_round():
    from course_lib.lectures import reasoning, reasoning_rl

    cfg = reasoning.ReasoningConfig(n_digits=2, n_demos=16, n_heldout=6, n_val=6, sft_steps=2, eval_every=2)
    cfg.rl = dataclasses.replace(cfg.rl, iterations=3, prompts_per_step=4, group_size=2, warmup_iterations=0)
    lm, task, split, _ = reasoning.warm_up_reasoning(cfg, seed=0)
    h = reasoning_rl.run(lm, task, split, cfg, seed=0, eval_on="val", loss_agg="token-mean")
    assert h["eval"]["iteration"] == [0, 2, 3] and len(h["eval"]["greedy_share"]) == 3
    assert set(h["style_share"]) == set(reasoning.STYLES) and all(len(v) == 3 for v in h["style_share"].values())
    for i in range(3):
        assert sum(h["style_share"][s][i] for s in reasoning.STYLES) == pytest.approx(1.0)
    assert all(len(h[key]) == 3 for key in ("length_right", "length_wrong", "truncated"))
    cut = reasoning_rl.run(lm, task, split, cfg, seed=0, eval_on="val", max_new_tokens=4)
    assert max(cut["mean_length"]) <= 4 and all(0 <= t <= 1 for t in cut["truncated"])
    with pytest.raises(ValueError, match="max_new_tokens"):
        reasoning_rl.run(lm, task, split, cfg, max_new_tokens=0)
    with pytest.raises(ValueError, match="eval_on"):
        reasoning_rl.run(lm, task, split, cfg, eval_on="test")


def test_run_trains_ppo_with_a_value_model():
    """benchmarks/critic_scratchpad.py runs PPO on the scratchpad task: ``algo="ppo"`` gets a value model made from
    the warmed-up LM (without one, the loop refuses PPO), and the critic's diagnostics are recorded."""
    from course_lib.lectures import reasoning, reasoning_rl

    cfg = reasoning.ReasoningConfig(n_digits=2, n_demos=16, n_heldout=6, n_val=6, sft_steps=2, eval_every=2)
    cfg.rl = dataclasses.replace(cfg.rl, iterations=2, prompts_per_step=4, group_size=2, warmup_iterations=0)
    lm, task, split, _ = reasoning.warm_up_reasoning(cfg, seed=0)
    ppo = {"loss_agg": "token-mean", "kl_placement": "reward", "clip_eps_high": None, "whiten_advantages": True}
    h = reasoning_rl.run(lm, task, split, cfg, seed=0, eval_on="val", algo="ppo", **ppo)
    assert len(h["explained_variance"]) == 2 and len(h["value_loss"]) == 2
