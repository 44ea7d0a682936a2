"""Tests of course_lib.lm_rl, the one LM RL loop: mask, log-probs, sampling, advantages, the update, the loop."""

import copy
import dataclasses

import pytest
import torch

from course_lib import lm_rl, lm_sampling
from course_lib.grpo import grpo_loss
from course_lib.lectures import capstone
from course_lib.policy_gradient import gather_log_probs
from course_lib.tiny_lm import TinyLM, TinyLMConfig, ValueModel

E, PAD = 12, 13


@pytest.fixture
def lm():
    return TinyLM(TinyLMConfig(vocab_size=14, block_size=10, n_layer=1, n_head=2, d_model=16), seed=0)


def _batch(lm, B=2, G=3, seed=0):
    """Prompts, sampled completions (some with EOS), scores: a rollout's raw material."""
    g = torch.Generator().manual_seed(seed)
    prompts = torch.randint(0, 10, (B, 6), generator=g)
    prompts[:, 2], prompts[:, 5] = 10, 11
    comp = lm_sampling.sample_completions(lm, prompts, None, G, 4, E, PAD, temperature=2.0, generator=g)  # (B*G, 4)
    scores = torch.rand(B, G, generator=g)
    return prompts, comp, scores


# --- the completion mask and per-token log-probs -------------------------------------


@pytest.mark.parametrize(
    "ids, expected",
    [
        ([1, 3, 2, 12, 13], [1, 1, 1, 1, 0]),  # EOS included, PAD after it masked
        ([12, 13, 13, 13, 13], [1, 0, 0, 0, 0]),  # an immediate stop is one valid token
        ([1, 3, 2, 5, 6], [1, 1, 1, 1, 1]),  # no EOS: everything counts
        ([1, 12, 2, 12, 4], [1, 1, 0, 0, 0]),  # only the first EOS counts
        ([1, 2, 3, 4, 12], [1, 1, 1, 1, 1]),  # EOS at the last position
    ],
)
def test_completion_mask_hand_cases(ids, expected):
    assert lm_sampling.completion_mask(torch.tensor(ids), E).tolist() == expected


def test_completion_mask_batched_and_validates():
    ids = torch.tensor([[[1, 12, 13], [4, 5, 6]]])
    assert lm_sampling.completion_mask(ids, E).shape == (1, 2, 3)
    with pytest.raises(ValueError, match="completion_ids"):
        lm_sampling.completion_mask(torch.zeros(3), E)


def test_token_logps_match_token_by_token(lm):
    prompts = torch.tensor([[4, 7, 10, 8, 5, 11], [0, 1, 10, 2, 3, 11]])
    completions = torch.tensor([[1, 3, 2, 12], [3, 5, 12, 13]])
    logp = lm_sampling.token_logps(lm, prompts, None, completions)
    assert logp.shape == (2, 4)
    for t in range(4):
        # The distribution of completion token t is read after the prompt and y_<t.
        ids = torch.cat([prompts, completions[:, :t]], 1)
        expected = torch.log_softmax(lm(ids)[:, -1], -1).gather(1, completions[:, t : t + 1])[:, 0]
        assert torch.allclose(logp[:, t], expected, atol=1e-5)
    hot = lm_sampling.token_logps(lm, prompts, None, completions, temperature=2.0)  # the temperature divides the logits
    ids = torch.cat([prompts, completions[:, :-1]], 1)
    assert torch.allclose(hot, gather_log_probs(lm(ids)[:, 5:] / 2.0, completions), atol=1e-6)


def test_token_logps_without_pad_score_what_the_sampler_samples(lm):
    """generate() never writes PAD: with pad_id the log-probs renormalise over the other tokens, as sampling does."""
    prompts = torch.tensor([[4, 7, 10, 8, 5, 11]])
    completions = torch.tensor([[1, 12, 13, 13]])
    logp = lm_sampling.token_logps(lm, prompts, None, completions, pad_id=PAD)
    logits = lm(torch.cat([prompts, completions[:, :-1]], 1))[:, 5:]
    logits[..., PAD] = -float("inf")
    expected = gather_log_probs(logits, completions)
    assert torch.allclose(logp[:, :2], expected[:, :2], atol=1e-6)
    assert torch.equal(logp[:, 2:], torch.zeros(1, 2)), "PAD positions are outside the mask and score 0, not -inf"
    logp.sum().backward()  # and the gradient stays finite
    assert all(torch.isfinite(p.grad).all() for p in lm.parameters())


def test_sample_completions_groups_are_adjacent_and_pad_after_eos(lm):
    prompts, comp, _ = _batch(lm, B=2, G=3)
    assert comp.shape == (6, 4)
    mask = lm_sampling.completion_mask(comp, E)
    assert bool((comp[mask == 0] == PAD).all()) and not bool((comp[mask > 0] == PAD).any())
    again = lm_sampling.sample_completions(
        lm, prompts[1:], None, 3, 4, E, PAD, temperature=2.0, generator=torch.Generator().manual_seed(5)
    )
    assert again.shape == (3, 4)
    with pytest.raises(ValueError, match="top_p"):
        lm_sampling.sample_completions(lm, prompts, None, 2, 4, E, PAD, top_p=0.9)


# --- advantages --------------------------------------------------------------------------


def test_grpo_advantages_are_the_groups_one_per_completion():
    cfg = lm_rl.LMRLConfig(group_size=2).validate()
    scores = torch.tensor([[1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    adv, returns = lm_rl.advantages(cfg, scores, mask, torch.zeros(2, 3), torch.zeros(2, 3))
    assert returns is None
    torch.testing.assert_close(adv, torch.tensor([0.5, -0.5]) / (0.5**0.5 + 1e-6))


def test_grpo_with_the_kl_in_the_reward_by_hand():
    """kl_placement="reward": each completion's k1 summed over its valid tokens comes off its reward, then the group."""
    cfg = lm_rl.LMRLConfig(group_size=2, kl_coef=0.5, kl_placement="reward", normalize_std=False).validate()
    scores = torch.tensor([[1.0, 1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    logp_old = torch.tensor([[-1.0, -1.0, -9.0], [-1.0, -3.0, -9.0]])
    logp_ref = torch.tensor([[-2.0, -2.0, -1.0], [-1.0, -1.0, -1.0]])
    adv, _ = lm_rl.advantages(cfg, scores, mask, logp_old, logp_ref)
    # k1 sums: 1 + 1 = 2 and 0 (the padding is left out); rewards 1 - 0.5 * 2 = 0 and 1; centred: -0.5, 0.5.
    torch.testing.assert_close(adv, torch.tensor([-0.5, 0.5]))


def test_grpo_whitened_over_the_valid_tokens():
    """whiten_advantages: a completion's advantage counts once per valid token in the batch's mean and std."""
    cfg = lm_rl.LMRLConfig(group_size=2, normalize_std=False, whiten_advantages=True).validate()
    scores = torch.tensor([[1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    adv, _ = lm_rl.advantages(cfg, scores, mask, torch.zeros(2, 3), torch.zeros(2, 3))
    tokens = torch.tensor([0.5, 0.5, 0.5, -0.5])
    torch.testing.assert_close(adv, (torch.tensor([0.5, -0.5]) - tokens.mean()) / tokens.std())


def test_ppo_advantages_by_hand():
    """gamma = lam = 1: A_t = (sum of rewards from t) - V(s_t); the KL penalty is per token, the score at the end."""
    cfg = lm_rl.LMRLConfig.ppo(kl_coef=0.5, gamma=1.0, lam=1.0).validate()
    scores = torch.tensor([[2.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    logp_old, logp_ref = torch.tensor([[-1.0, -1.0, -5.0]]), torch.tensor([[-2.0, -1.0, -1.0]])
    values = torch.tensor([[0.5, 0.5, 9.0]])
    adv, returns = lm_rl.advantages(cfg, scores, mask, logp_old, logp_ref, values)
    # rewards: t=0: -0.5 * (1) = -0.5; t=1: -0.5 * 0 + 2 = 2; t=2 is padding.
    torch.testing.assert_close(returns, torch.tensor([[1.5, 2.0, 0.0]]))
    raw = torch.tensor([1.5 - 0.5, 2.0 - 0.5])  # returns - values on the valid tokens: whitened
    expected = (raw - raw.mean()) / raw.std()
    torch.testing.assert_close(adv[0, :2], expected)
    assert adv[0, 2] == 0


# --- the update ------------------------------------------------------------------------------


def _run(lm, value_model=None, reward_fn=None, prompts=None, seed=0):
    """What a run shares (lm_rl.Run), for the steps called one at a time; PAD left out of the scored distribution."""
    if prompts is None:
        prompts = torch.randint(0, 10, (16, 6), generator=torch.Generator().manual_seed(seed))
        prompts[:, 2], prompts[:, 5] = 10, 11
    if reward_fn is None:
        reward_fn = lambda pick, comp: (comp[..., 0] % 3).float()  # noqa: E731 - any verifier will do
    return lm_rl.Run(
        policy=lm,
        ref=copy.deepcopy(lm).requires_grad_(False),
        value_model=value_model,
        reward_fn=reward_fn,
        prompt_ids=prompts,
        prompt_mask=None,
        eos_id=E,
        pad_id=PAD,
        scored_pad=PAD,
        generator=torch.Generator().manual_seed(seed),
    )


def _rollout(lm, cfg, seed=0):
    cfg = cfg.validate()
    run = _run(lm, ValueModel(lm) if cfg.algo == "ppo" else None, seed=seed)
    batch, stats = lm_rl.rollout(cfg, run)
    return batch, stats, run.value_model


def test_grpo_loss_of_the_loop_is_chapter_06s_grpo_loss(lm, monkeypatch):
    """The GRPO branch calls grpo.grpo_loss, the function of chapter 06's exercise, with the batch's advantages."""
    cfg = lm_rl.LMRLConfig(prompts_per_step=3, group_size=4, max_new_tokens=4, kl_coef=0.1, temperature=1.5)
    batch, _, _ = _rollout(lm, cfg)
    N, L = batch["mask"].shape
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return grpo_loss(*args, **kwargs)

    monkeypatch.setattr(lm_rl, "grpo_loss", spy)
    loss, _ = lm_rl.minibatch_loss(cfg.validate(), _run(lm), batch, torch.arange(N), N, batch["mask"].sum())
    assert len(calls) == 1 and calls[0]["adv"].shape == (N, 1)
    logp = lm_sampling.token_logps(lm, batch["prompt_ids"], None, batch["completion_ids"], 1.5, PAD)
    B, G = 3, 4
    expected, _ = grpo_loss(
        logp.view(B, G, L),
        batch["logp_old"].view(B, G, L),
        batch["logp_ref"].view(B, G, L),
        None,
        batch["mask"].view(B, G, L),
        kl_coef=0.1,
        adv=batch["adv"].view(B, G),
    )
    torch.testing.assert_close(loss, expected)
    # The batch's advantages are the groups' (whole groups, before any minibatch split them).
    torch.testing.assert_close(batch["adv"].view(B, G).mean(-1), torch.zeros(B), atol=1e-6, rtol=0)


@pytest.mark.parametrize("loss_agg", ["seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm"])
@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_micro_batches_give_the_gradient_of_one_batch(lm, loss_agg, algo):
    sizes = {"prompts_per_step": 3, "group_size": 4, "max_new_tokens": 4, "update_epochs": 1, "max_grad_norm": 1e9}
    if algo == "ppo":  # PPO averages over tokens (PPOLoss)
        cfg = lm_rl.LMRLConfig.ppo(**sizes)
    else:
        cfg = lm_rl.LMRLConfig.grpo(loss_agg=loss_agg, **sizes)
    batch, _, value_model = _rollout(lm, cfg)
    grads = []
    for micro in (None, 5):
        policy, critic = copy.deepcopy(lm), copy.deepcopy(value_model)
        params = list(policy.parameters()) + (list(critic.parameters()) if critic is not None else [])
        opt = torch.optim.SGD(params, lr=0.0)
        lm_rl.update(dataclasses.replace(cfg, micro_batch_size=micro).validate(), _run(policy, critic), opt, batch)
        grads.append(torch.cat([p.grad.flatten() for p in params]))
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-5)


def test_grpo_step_is_one_update_of_the_loop(lm):
    """The exercise's step and the loop's update(K=1, one minibatch) take the same step."""
    cfg = lm_rl.LMRLConfig(prompts_per_step=3, group_size=4, max_new_tokens=4, kl_coef=0.04, update_epochs=1)
    cfg = cfg.validate()
    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(0, 10, (3, 6), generator=g)
    comp = lm_sampling.sample_completions(lm, prompts, None, 4, 4, E, PAD, temperature=2.0, generator=g)
    rewards = torch.rand(3, 4, generator=g)
    ref = copy.deepcopy(lm)
    flat_prompts = prompts.repeat_interleave(4, 0)
    with torch.no_grad():
        logp_old = lm_sampling.token_logps(lm, flat_prompts, None, comp)
        logp_ref = lm_sampling.token_logps(ref, flat_prompts, None, comp)
    mask = lm_sampling.completion_mask(comp, E)
    adv, _ = lm_rl.advantages(cfg, rewards, mask, logp_old, logp_ref)
    batch = {
        "prompt_ids": flat_prompts,
        "prompt_mask": None,
        "completion_ids": comp,
        "mask": mask,
        "logp_old": logp_old,
        "logp_ref": logp_ref,
        "adv": adv,
        "returns": None,
    }
    a, b = copy.deepcopy(lm), copy.deepcopy(lm)
    run = dataclasses.replace(_run(a), ref=ref, scored_pad=None, generator=g)
    lm_rl.update(cfg, run, torch.optim.SGD(a.parameters(), lr=0.1), batch)
    capstone.grpo_step(
        b, ref, torch.optim.SGD(b.parameters(), lr=0.1), prompts, comp.view(3, 4, 4), rewards, logp_old.view(3, 4, 4), E
    )
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5)


# --- the schedule, the config, the loop ---------------------------------------------------------


def test_lr_schedule_warms_up_then_decays():
    cfg = lm_rl.LMRLConfig(iterations=10, lr=1.0, warmup_iterations=4, lr_schedule="linear")
    lrs = [lm_rl.lr_at(i, cfg) for i in range(10)]
    assert lrs[:4] == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert lrs[4] == 1.0 and lrs[-1] == pytest.approx(1 / 6) and all(a > b for a, b in zip(lrs[4:], lrs[5:]))
    const = dataclasses.replace(cfg, lr_schedule="constant", warmup_iterations=0)
    assert {lm_rl.lr_at(i, const) for i in range(10)} == {1.0}
    cos = dataclasses.replace(cfg, lr_schedule="cosine", warmup_iterations=0)
    assert lm_rl.lr_at(0, cos) == 1.0 and lm_rl.lr_at(5, cos) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "field, value",
    [
        ("algo", "a2c"),
        ("group_size", 1),
        ("lr", 0.0),
        ("top_p", 1.5),
        ("loss_agg", "sum"),
        ("lr_schedule", "step"),
        ("lam", 2.0),
        ("max_completions", 0),
    ],
)
def test_config_errors_name_the_argument(field, value):
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(lm_rl.LMRLConfig(), **{field: value}).validate()


@pytest.mark.parametrize(
    "field, value",
    [
        ("clip_eps_high", 0.28),
        ("policy_loss", "gspo"),
        ("adv_estimator", "rloo"),
        ("normalize_std", False),
        ("loss_agg", "seq-mean-token-mean"),
        ("kl_placement", "loss"),
        ("whiten_advantages", False),
        ("dynamic_sampling", True),
    ],
)
def test_ppo_refuses_grpo_switches_rather_than_ignoring_them(field, value):
    with pytest.raises(ValueError, match=f"{field}: a switch of GRPO's branch"):
        lm_rl.LMRLConfig.ppo(**{field: value}).validate()


def test_presets_hold_concrete_values_that_replace_keeps():
    """No field means "the algorithm's own": a preset writes it, and dataclasses.replace keeps what it shows."""
    grpo, ppo = lm_rl.LMRLConfig.grpo(), lm_rl.LMRLConfig.ppo(lr=1e-3)
    assert grpo == lm_rl.LMRLConfig() and (grpo.kl_placement, grpo.loss_agg, grpo.whiten_advantages) == (
        "loss",
        "seq-mean-token-mean",
        False,
    )
    assert (ppo.algo, ppo.kl_placement, ppo.loss_agg, ppo.whiten_advantages, ppo.lr) == (
        "ppo",
        "reward",
        "token-mean",
        True,
        1e-3,
    )
    assert dataclasses.replace(ppo, lr=2e-3).loss_agg == "token-mean"
    assert dataclasses.replace(grpo, kl_placement="reward").kl_placement == "reward"
    with pytest.raises(ValueError, match="loss_agg: a switch of GRPO's branch"):
        dataclasses.replace(grpo, algo="ppo").validate()  # a GRPO config made PPO must take PPO's switches too


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_train_runs_is_seeded_and_logs(lm, algo):
    prompts = torch.randint(0, 10, (16, 6), generator=torch.Generator().manual_seed(0))
    prompts[:, 2], prompts[:, 5] = 10, 11
    reward_fn = lambda pick, comp: (comp[..., 0] == 3).float()  # noqa: E731 - "start with a 3"
    preset = lm_rl.LMRLConfig.ppo if algo == "ppo" else lm_rl.LMRLConfig.grpo
    cfg = preset(iterations=3, prompts_per_step=4, group_size=4, max_new_tokens=4, lr=1e-2)
    runs = []
    for _ in range(2):
        policy = copy.deepcopy(lm)
        critic = ValueModel(policy) if algo == "ppo" else None
        runs.append(
            lm_rl.train(
                policy, reward_fn, prompts, cfg, E, PAD, value_model=critic, eval_fn=lambda m: 0.5, eval_every=2
            )
        )
    assert runs[0]["mean_reward"] == runs[1]["mean_reward"] and runs[0]["loss"] == runs[1]["loss"]
    h = runs[0]
    assert h["eval"]["iteration"] == [0, 2, 3] and h["completions"] == [16, 32, 48]
    # Round 0's policy is the reference; logp_old is the sampler's own, the reference's pass up to float rounding.
    assert abs(h["kl"][0]) < 1e-6 and all(k >= -1e-6 for k in h["kl"])
    if algo == "ppo":
        assert len(h["value_loss"]) == 3 and len(h["explained_variance"]) == 3


def test_dynamic_sampling_keeps_only_groups_that_teach(lm):
    cfg = lm_rl.LMRLConfig(prompts_per_step=4, group_size=4, max_new_tokens=4, dynamic_sampling=True, temperature=2.0)
    prompts = torch.randint(0, 10, (16, 6), generator=torch.Generator().manual_seed(0))
    reward_fn = lambda pick, comp: (comp[..., 0] == 3).float()  # noqa: E731
    batch, stats = lm_rl.rollout(cfg.validate(), _run(lm, reward_fn=reward_fn, prompts=prompts))
    adv = batch["adv"].view(-1, 4)
    assert stats["groups_kept"] >= 1 and bool((adv.abs().sum(-1) > 0).all()), "no all-equal group is kept"
    assert stats["completions"] >= 16


def test_sample_budget_stops_the_loop_and_decays_the_lr(lm):
    prompts = torch.randint(0, 10, (16, 6), generator=torch.Generator().manual_seed(0))
    prompts[:, 2], prompts[:, 5] = 10, 11
    reward_fn = lambda pick, comp: (comp[..., 0] == 3).float()  # noqa: E731
    cfg = lm_rl.LMRLConfig(
        iterations=50,
        prompts_per_step=4,
        group_size=4,
        max_new_tokens=4,
        temperature=2.0,
        dynamic_sampling=True,
        max_completions=100,
        lr=1.0,
    )
    h = lm_rl.train(copy.deepcopy(lm), reward_fn, prompts, cfg, E, PAD, eval_fn=lambda m: 0.5, eval_every=100)
    assert h["completions"][-1] >= 100 > h["completions"][-2], "stops at the first round past the budget"
    assert h["eval"]["completions"][-1] == h["completions"][-1], "evaluated after the last round"
    spent = [0] + h["completions"][:-1]
    assert h["lr"] == pytest.approx([1.0 - min(max(i / 50, c / 100), 1.0) for i, c in enumerate(spent)])
    plain = dataclasses.replace(cfg, dynamic_sampling=False, max_completions=3 * 16)  # = 3 rounds of B * G
    assert lm_rl.train(copy.deepcopy(lm), reward_fn, prompts, plain, E, PAD)["completions"] == [16, 32, 48]
    assert [lm_rl.lr_at(i, plain, 16 * i) for i in range(3)] == pytest.approx([1.0, 1 - 1 / 3, 1 - 2 / 3])


def test_ctrl_c_returns_what_was_done(lm, monkeypatch):
    calls = []
    real = lm_sampling.sample_completions

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(lm_rl, "sample_completions", interrupted)
    prompts = torch.randint(0, 10, (8, 6), generator=torch.Generator().manual_seed(0))
    cfg = lm_rl.LMRLConfig(iterations=5, prompts_per_step=2, group_size=2, max_new_tokens=4)
    h = lm_rl.train(lm, lambda pick, comp: comp[..., 0].float(), prompts, cfg, E, PAD)
    assert h["interrupted"] and len(h["mean_reward"]) == 2


# --- the GRPO family's switches (chapter 11) ---------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"adv_estimator": "rloo"},
        {"adv_estimator": "reinforce++"},
        {"policy_loss": "gspo", "clip_eps": 3e-4, "clip_eps_high": 4e-4},
        {"policy_loss": "cispo", "clip_eps_high": 4.0},
        {"policy_loss": "gmpo"},
        {"policy_loss": "sapo"},
        {"overlong_filter": True, "overlong_cache": 2},
        {"loss_agg": "token-mean", "clip_eps_high": 0.28, "dynamic_sampling": True},
    ],
)
def test_each_family_switch_trains(lm, changes):
    cfg = lm_rl.LMRLConfig(
        prompts_per_step=3, group_size=4, max_new_tokens=4, update_epochs=2, temperature=2.0, **changes
    )
    batch, stats, _ = _rollout(lm, cfg)
    before = [p.detach().clone() for p in lm.parameters()]
    info = lm_rl.update(cfg.validate(), _run(lm), torch.optim.Adam(lm.parameters(), lr=1e-2), batch)
    assert all(torch.isfinite(torch.tensor(v)) for k, v in info.items() if isinstance(v, float))
    assert any(not torch.equal(a, b) for a, b in zip(before, lm.parameters()))


def test_rloo_switch_is_the_familys_advantage():
    from course_lib.family import rloo_advantages

    cfg = lm_rl.LMRLConfig(group_size=3, adv_estimator="rloo")
    scores = torch.tensor([[1.0, 0.0, 0.5]])
    mask = torch.ones(3, 2)
    adv, _ = lm_rl.advantages(cfg.validate(), scores, mask, torch.zeros(3, 2), torch.zeros(3, 2))
    torch.testing.assert_close(adv, rloo_advantages(scores)[0])


def test_dynamic_sampling_draws_again_only_the_missing_groups(lm):
    """DAPO's refill: after a draw that keeps k of B groups, the next draw samples B - k prompts, no more."""
    B, G = 4, 4
    cfg = lm_rl.LMRLConfig(prompts_per_step=B, group_size=G, max_new_tokens=4, dynamic_sampling=True)
    prompts = torch.randint(0, 10, (16, 6), generator=torch.Generator().manual_seed(0))
    drawn = []
    verdicts = iter([[1, 0, 1, 0], [1, 0]])  # the first draw keeps groups 0 and 2; the second keeps one of two

    def reward_fn(pick, comp):
        drawn.append(len(pick))
        teaches = torch.tensor(next(verdicts, [0] * len(pick)), dtype=torch.bool)
        rewards = torch.zeros(len(pick), G)
        rewards[teaches, 0] = 1.0  # a group that teaches has one right completion
        return rewards

    groups, sampled = lm_rl.collect_groups(cfg.validate(), _run(lm, reward_fn=reward_fn, prompts=prompts))
    assert drawn[:3] == [4, 2, 1], "each draw asks only for the groups still missing"
    assert len(groups.scores) == 3 and sampled.shape[0] == sum(drawn)
    assert len(drawn) == cfg.max_sampling_draws, "it stops after max_sampling_draws draws and trains on what it has"


def test_ppo_is_grpo_once_the_ladder_has_climbed(lm):
    """With every switch of the ladder at PPO's setting, the GRPO branch's policy loss is PPO's: token mean, k1 in
    the reward, a symmetric clip, whitened advantages (only the advantage's source differs)."""
    cfg = lm_rl.LMRLConfig(
        prompts_per_step=3,
        group_size=4,
        max_new_tokens=4,
        loss_agg="token-mean",
        kl_placement="reward",
        whiten_advantages=True,
    ).validate()
    batch, _, _ = _rollout(lm, cfg)
    N = batch["mask"].shape[0]
    loss, _ = lm_rl.minibatch_loss(cfg, _run(lm), batch, torch.arange(N), N, batch["mask"].sum())
    from course_lib.ppo import clipped_surrogate_loss

    logp = lm_sampling.token_logps(lm, batch["prompt_ids"], None, batch["completion_ids"], 1.0, PAD)
    adv_tokens = batch["adv"][:, None].expand_as(logp)
    expected, _ = clipped_surrogate_loss(logp, batch["logp_old"], adv_tokens, 0.2, mask=batch["mask"])
    torch.testing.assert_close(loss, expected)
