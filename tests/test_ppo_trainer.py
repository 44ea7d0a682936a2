"""Tests of course_lib.trainers.ppo_trainer: the three methods, truncation, the KL penalty, determinism, CartPole."""

import ast
import copy
import dataclasses
import inspect
import math

import pytest
import torch
from torch import nn

from course_lib.gae import bootstrap_truncated, compute_gae
from course_lib.grpo import kl_estimate
from course_lib.models import SortingPolicy
from course_lib.ppo import PPOConfig, clipped_surrogate_loss
from course_lib.rewards import sort_inclusion_ordering_reward
from course_lib.tasks import sorting_prompts
from course_lib.trainers import PPOTrainer, PPOTrainerConfig
from course_lib.trainers.ppo_trainer import (
    GymVectorEnv,
    PPOHistory,
    Rollout,
    SortingEnv,
    TokenCritic,
    TokenPolicy,
    cartpole_models,
    evaluate_policy,
    sorting_ppo_models,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    """Tiny tensors: one torch thread (tests/conftest.py)."""


class CountingEnv:
    """``N`` toy episodes: obs = [steps so far, n], reward 1 per step, cut by a time limit after ``limit`` steps.

    With ``terminate_at=k``, environment 0 instead terminates (a real end) after k steps.
    """

    def __init__(self, num_envs=2, limit=5, terminate_at=None):
        self.num_envs, self.limit, self.terminate_at = num_envs, limit, terminate_at

    def _obs(self):
        return torch.stack([self.t, torch.arange(self.num_envs, dtype=torch.float32)], dim=1)  # (N, 2)

    def reset(self, seed=None):
        self.t = torch.zeros(self.num_envs)
        return self._obs()

    def step(self, actions):
        self.t = self.t + 1
        final_obs = self._obs()
        terminated = torch.zeros(self.num_envs, dtype=torch.bool)
        if self.terminate_at is not None:
            terminated[0] = bool(self.t[0] == self.terminate_at)
        truncated = (self.t >= self.limit) & ~terminated
        self.t = torch.where(terminated | truncated, torch.zeros_like(self.t), self.t)
        return self._obs(), torch.ones(self.num_envs), terminated, truncated, final_obs


def _toy_trainer(model_seed=0, **config):
    g = torch.Generator().manual_seed(model_seed)
    actor, critic = nn.Linear(2, 3), nn.Linear(2, 1)
    for p in [*actor.parameters(), *critic.parameters()]:
        nn.init.normal_(p, std=0.3, generator=g)
    return PPOTrainer(actor, critic, None, config=PPOTrainerConfig(**config))


# ---------------------------------------------------------------------------
# Configuration and construction
# ---------------------------------------------------------------------------


def test_config_extends_ppo_config_and_every_field_has_a_docstring():
    assert issubclass(PPOTrainerConfig, PPOConfig)
    documented = set()
    for cls in (PPOConfig, PPOTrainerConfig):
        body = ast.parse(inspect.getsource(cls)).body[0].body
        for statement, following in zip(body, body[1:]):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                documented.add(statement.target.id)
    assert {f.name for f in dataclasses.fields(PPOTrainerConfig)} <= documented


@pytest.mark.parametrize(
    "field, value",
    [
        ("clip_eps", 0.0),
        ("gamma", 1.5),
        ("lam", -0.1),
        ("lr", 0.0),
        ("num_steps", 0),
        ("update_epochs", 0),
        ("num_minibatches", 0),
        ("kl_kind", "k9"),
        ("target_kl", 0.0),
        ("kl_coef", -1.0),
        ("seed", -1),
        ("norm_adv", "yes"),
        ("num_threads", 0),
    ],
)
def test_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        PPOTrainerConfig(**{field: value})


def test_homework_signature_overrides_the_config():
    actor, critic = cartpole_models(hidden=8)
    config = PPOTrainerConfig(clip_eps=0.3)
    trainer = PPOTrainer(actor, critic, None, 0.1, 0.9, 0.8, config=config)
    assert (trainer.clip_epsilon, trainer.gamma, trainer.lam) == (0.1, 0.9, 0.8)
    assert config.clip_eps == 0.3  # the caller's config is left alone
    assert PPOTrainer(actor, critic, config=config).clip_epsilon == 0.3  # None: from the config


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(clip_epsilon=0.0), "clip_epsilon"),
        (dict(gamma=1.2), "gamma"),
        (dict(lam=-0.5), "lam"),
        (dict(config="fast"), "config"),
        (dict(policy_loss_fn=3), "policy_loss_fn"),
        (dict(ref_model="gpt"), "ref_model"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs, name):
    actor, critic = cartpole_models(hidden=8)
    with pytest.raises(ValueError, match=name):
        PPOTrainer(actor, critic, **kwargs)
    with pytest.raises(ValueError, match="actor_model"):
        PPOTrainer(lambda obs: obs, critic)


# ---------------------------------------------------------------------------
# collect_experiences
# ---------------------------------------------------------------------------


def test_collect_experiences_shapes_and_stored_quantities():
    trainer = _toy_trainer()
    env = CountingEnv(num_envs=3, limit=100)
    rollout = trainer.collect_experiences(env, num_steps=7)
    N, T = 3, 7
    assert rollout.obs.shape == (N, T, 2)
    for name in ("actions", "logp", "values", "rewards", "terminated", "truncated", "final_values"):
        assert getattr(rollout, name).shape == (N, T), name
    assert rollout.last_values.shape == (N,) and rollout.logp_ref is None
    assert rollout.actions.dtype == torch.long and set(rollout.actions.unique().tolist()) <= {0, 1, 2}
    # Time is axis 1: environment n's observations count up 0, 1, 2, ...
    torch.testing.assert_close(rollout.obs[:, :, 0], torch.arange(T, dtype=torch.float32).expand(N, T))
    # logp_old and V_old are what the models give on the stored observations, and constants.
    with torch.no_grad():
        logits = trainer.actor_model(rollout.obs)  # (N, T, A)
        want_logp = torch.log_softmax(logits, -1).gather(-1, rollout.actions[..., None])[..., 0]
        torch.testing.assert_close(rollout.logp, want_logp)
        torch.testing.assert_close(rollout.values, trainer.critic_model(rollout.obs)[..., 0])
        torch.testing.assert_close(rollout.last_values, trainer.critic_model(trainer.episodes.obs)[..., 0])
    assert not rollout.logp.requires_grad and not rollout.values.requires_grad
    assert trainer.total_steps == N * T


def test_episodes_carry_on_across_rollouts():
    trainer = _toy_trainer()
    env = CountingEnv(num_envs=2, limit=100)
    first = trainer.collect_experiences(env, num_steps=4)
    second = trainer.collect_experiences(env, num_steps=4)
    torch.testing.assert_close(second.obs[:, 0, 0], torch.tensor([4.0, 4.0]))  # step 4, not a fresh episode
    assert first.episode_returns == [] and second.episode_returns == []


def test_truncation_keeps_the_value_of_the_state_the_episode_stopped_in():
    trainer = _toy_trainer()
    env = CountingEnv(num_envs=2, limit=5)
    rollout = trainer.collect_experiences(env, num_steps=12)
    # Episodes of 5 steps: cut at steps t = 4 and t = 9 of the rollout, in both environments.
    want = torch.zeros(2, 12, dtype=torch.bool)
    want[:, [4, 9]] = True
    assert torch.equal(rollout.truncated, want) and not rollout.terminated.any()
    # The bootstrap value is V(final observation, t = 5), not V(the next episode's first observation, t = 0).
    final_obs = torch.tensor([[5.0, 0.0], [5.0, 1.0]])
    with torch.no_grad():
        v_final = trainer.critic_model(final_obs)[:, 0]  # (2,)
    torch.testing.assert_close(rollout.final_values[:, 4], v_final)
    torch.testing.assert_close(rollout.final_values[:, 9], v_final)
    assert (rollout.final_values[~want] == 0).all()
    assert rollout.episode_returns == [5.0] * 4 and rollout.episode_lengths == [5] * 4


def test_termination_is_not_bootstrapped():
    trainer = _toy_trainer()
    env = CountingEnv(num_envs=2, limit=100, terminate_at=3)
    rollout = trainer.collect_experiences(env, num_steps=8)
    assert rollout.terminated[0].nonzero()[:, 0].tolist() == [2, 5]
    assert not rollout.truncated.any() and (rollout.final_values == 0).all()
    adv, _ = trainer.compute_advantages(rollout)
    # At a terminal step the advantage is r - V(s): nothing of the next episode flows back.
    torch.testing.assert_close(adv[0, 2], rollout.rewards[0, 2] - rollout.values[0, 2])


# ---------------------------------------------------------------------------
# compute_advantages
# ---------------------------------------------------------------------------


def _hand_rollout(**overrides):
    fields = dict(
        obs=torch.zeros(1, 3, 2),
        actions=torch.zeros(1, 3, dtype=torch.long),
        logp=torch.full((1, 3), -1.0),
        values=torch.tensor([[0.5, 0.5, 0.5]]),
        rewards=torch.tensor([[1.0, 1.0, 1.0]]),
        terminated=torch.zeros(1, 3, dtype=torch.bool),
        truncated=torch.tensor([[False, True, False]]),
        final_values=torch.tensor([[0.0, 10.0, 0.0]]),
        last_values=torch.tensor([2.0]),
    )
    fields.update(overrides)
    return Rollout(**fields)


def test_compute_advantages_by_hand_with_a_truncated_step():
    trainer = _toy_trainer(gamma=0.9, lam=0.5)
    adv, ret = trainer.compute_advantages(_hand_rollout())
    # gamma = 0.9, lam = 0.5; the episode is cut at t = 1, where V(final obs) = 10 is folded into the reward:
    #   rewards after the bootstrap: [1, 1 + 0.9 * 10 = 10, 1]; done (terminated or truncated) only at t = 1
    #   delta_2 = 1 + 0.9 * V(s_3) - V(s_2) = 1 + 0.9 * 2 - 0.5 = 2.3          A_2 = 2.3
    #   delta_1 = 10 - 0.5 = 9.5 (done: no V(s_2))                              A_1 = 9.5
    #   delta_0 = 1 + 0.9 * 0.5 - 0.5 = 0.95                                    A_0 = 0.95 + 0.45 * 9.5 = 5.225
    torch.testing.assert_close(adv, torch.tensor([[5.225, 9.5, 2.3]]))
    torch.testing.assert_close(ret, adv + 0.5)


def test_compute_advantages_match_compute_gae_on_the_stored_data():
    trainer = _toy_trainer(gamma=0.95, lam=0.9)
    rollout = trainer.collect_experiences(CountingEnv(num_envs=3, limit=4), num_steps=10)
    adv, ret = trainer.compute_advantages(rollout)
    rewards = bootstrap_truncated(rollout.rewards, rollout.truncated, rollout.final_values, 0.95)
    want_adv, want_ret = compute_gae(
        rewards, rollout.values, rollout.terminated | rollout.truncated, rollout.last_values, 0.95, 0.9
    )
    torch.testing.assert_close(adv, want_adv)
    torch.testing.assert_close(ret, want_ret)


def test_without_truncation_advantages_agree_with_cleanrl_gae_loop():
    trainer = _toy_trainer(gamma=0.99, lam=0.95)
    rollout = trainer.collect_experiences(CountingEnv(num_envs=2, limit=100, terminate_at=3), num_steps=9)
    adv, _ = trainer.compute_advantages(rollout)
    # CleanRL's ppo.py stores (T, N) and flags `dones[t]` on the observation that *starts* a new episode,
    # so its dones[t] is our terminated[t - 1] and its next_done our terminated[-1]:
    rewards, values = rollout.rewards.T, rollout.values.T  # (T, N)
    starts = torch.cat([torch.zeros(1, 2), rollout.terminated.T[:-1].float()])  # (T, N)
    next_done, next_value = rollout.terminated.T[-1].float(), rollout.last_values
    advantages, lastgaelam = torch.zeros_like(rewards), 0
    for t in reversed(range(9)):
        if t == 8:
            nextnonterminal, nextvalues = 1.0 - next_done, next_value
        else:
            nextnonterminal, nextvalues = 1.0 - starts[t + 1], values[t + 1]
        delta = rewards[t] + 0.99 * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = delta + 0.99 * 0.95 * nextnonterminal * lastgaelam
    torch.testing.assert_close(adv, advantages.T)


def test_kl_penalty_is_folded_into_every_steps_reward():
    g = torch.Generator().manual_seed(1)
    actor, critic = nn.Linear(2, 3), nn.Linear(2, 1)
    ref = copy.deepcopy(actor)
    with torch.no_grad():
        ref.weight.add_(torch.randn(ref.weight.shape, generator=g))
    trainer = PPOTrainer(actor, critic, ref, config=PPOTrainerConfig(kl_coef=0.3, kl_kind="k1"))
    assert not any(p.requires_grad for p in ref.parameters())  # the reference is frozen
    rollout = trainer.collect_experiences(CountingEnv(num_envs=2, limit=100), num_steps=5)
    with torch.no_grad():
        want_ref = torch.log_softmax(ref(rollout.obs), -1).gather(-1, rollout.actions[..., None])[..., 0]
    torch.testing.assert_close(rollout.logp_ref, want_ref)
    # r_t - kl_coef * (logp - logp_ref): the PPO-RLHF reward
    torch.testing.assert_close(trainer.shaped_rewards(rollout), rollout.rewards - 0.3 * (rollout.logp - want_ref))
    adv, _ = trainer.compute_advantages(rollout)
    want, _ = compute_gae(
        rollout.rewards - 0.3 * kl_estimate(rollout.logp, want_ref, "k1"),
        rollout.values,
        rollout.terminated | rollout.truncated,
        rollout.last_values,
        trainer.gamma,
        trainer.lam,
    )
    torch.testing.assert_close(adv, want)


# ---------------------------------------------------------------------------
# update_policy
# ---------------------------------------------------------------------------


def test_update_policy_changes_the_parameters_and_reports_diagnostics():
    trainer = _toy_trainer(update_epochs=2, num_minibatches=3)
    before = [p.detach().clone() for p in trainer.params]
    rollout = trainer.collect_experiences(CountingEnv(num_envs=4, limit=6), num_steps=12)
    adv, ret = trainer.compute_advantages(rollout)
    info = trainer.update_policy(rollout, adv, ret)
    assert set(info) == {
        "loss",
        "policy_loss",
        "value_loss",
        "entropy",
        "approx_kl",
        "clip_fraction",
        "explained_variance",
    }
    assert all(math.isfinite(v) for v in info.values())
    assert info["approx_kl"] >= 0 and 0 <= info["clip_fraction"] <= 1 and 0 < info["entropy"] <= math.log(3)
    assert all(not torch.equal(b, p) for b, p in zip(before, trainer.params))
    # 2 epochs of 3 minibatches: 6 Adam steps on every parameter.
    assert all(trainer.optimizer.state[p]["step"] == 6 for p in trainer.params)


def test_target_kl_stops_after_the_first_epoch():
    trainer = _toy_trainer(update_epochs=4, num_minibatches=2, target_kl=1e-12, lr=0.05)
    rollout = trainer.collect_experiences(CountingEnv(num_envs=4, limit=6), num_steps=8)
    trainer.update_policy(rollout, *trainer.compute_advantages(rollout))
    assert all(trainer.optimizer.state[p]["step"] == 2 for p in trainer.params)


def test_policy_loss_fn_gets_constants_and_can_be_swapped():
    calls = []

    def spy(logp, logp_old, adv, clip_eps):
        calls.append((logp.requires_grad, logp_old.requires_grad, adv.requires_grad, clip_eps, adv.mean().item()))
        return clipped_surrogate_loss(logp, logp_old, adv, clip_eps)

    trainer = _toy_trainer(update_epochs=2, num_minibatches=2)
    trainer.policy_loss_fn = spy
    rollout = trainer.collect_experiences(CountingEnv(num_envs=2, limit=5), num_steps=8)
    trainer.update_policy(rollout, *trainer.compute_advantages(rollout))
    assert len(calls) == 4
    for logp_grad, old_grad, adv_grad, clip_eps, adv_mean in calls:
        assert logp_grad and not old_grad and not adv_grad and clip_eps == 0.2
        assert abs(adv_mean) < 1e-5  # normalised per minibatch


def test_update_policy_rejects_advantages_of_the_wrong_shape():
    trainer = _toy_trainer()
    rollout = trainer.collect_experiences(CountingEnv(), num_steps=4)
    adv, ret = trainer.compute_advantages(rollout)
    with pytest.raises(ValueError, match="advantages"):
        trainer.update_policy(rollout, adv[:, :2], ret)
    with pytest.raises(ValueError, match="returns"):
        trainer.update_policy(rollout, adv, ret.T)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda tr, env: tr.collect_experiences(env, num_steps=0), "num_steps"),
        (lambda tr, env: tr.train(env, num_updates=0, progress=False), "num_updates"),
    ],
)
def test_loop_arguments_are_validated(call, name):
    with pytest.raises(ValueError, match=name):
        call(_toy_trainer(), CountingEnv())


# ---------------------------------------------------------------------------
# train: determinism, history, and CartPole
# ---------------------------------------------------------------------------


def test_same_seed_same_history_and_another_seed_differs():
    def train(seed):
        # The same initial models every time (model_seed=0); `seed` seeds the sampling and the minibatches.
        trainer = _toy_trainer(model_seed=0, num_steps=16, seed=seed)
        history = trainer.train(CountingEnv(num_envs=3, limit=7), num_updates=3, progress=False).as_dict()
        # NaN != NaN: write the missing values (no reference model, no KL) as None to compare histories.
        return {k: [None if isinstance(x, float) and math.isnan(x) else x for x in v] for k, v in history.items()}

    first, again, other = train(0), train(0), train(1)
    assert first == again
    assert first != other
    assert len(first["loss"]) == 3 and first["steps"] == [48, 96, 144]
    assert set(first) == {f.name for f in dataclasses.fields(PPOHistory)}
    assert first["kl"] == [None] * 3  # no reference model


def test_train_runs_on_the_configured_threads_and_restores_them():
    seen, threads = [], torch.get_num_threads()

    def spy(*args):
        seen.append(torch.get_num_threads())
        return clipped_surrogate_loss(*args)

    torch.set_num_threads(2)
    try:
        trainer = _toy_trainer(num_threads=1, num_steps=4)
        trainer.policy_loss_fn = spy
        trainer.train(CountingEnv(), 1, progress=False)
        assert set(seen) == {1} and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def cartpole_run():
    torch.manual_seed(0)
    env = GymVectorEnv("CartPole-v1", num_envs=8)
    actor, critic = cartpole_models(seed=0)
    trainer = PPOTrainer(actor, critic, None, config=PPOTrainerConfig(seed=0))
    history = trainer.train(env, num_updates=12, progress=False)
    yield trainer, history
    env.close()


def test_short_cartpole_run_improves_the_mean_return(cartpole_run):
    _, history = cartpole_run
    # 12 updates of 8 x 128 steps: a random policy balances about 20 steps; PPO at least doubles that.
    first, last = history.mean_return[0], sum(history.mean_return[-3:]) / 3
    assert first < 40 and last > 2 * first, history.mean_return
    assert history.steps[-1] == 12 * 8 * 128
    assert max(history.approx_kl) < 0.1 and all(0 <= c <= 1 for c in history.clip_fraction)


def test_cartpole_evaluation(cartpole_run):
    trainer, _ = cartpole_run
    env = GymVectorEnv("CartPole-v1", num_envs=3)
    scores = evaluate_policy(trainer.actor_model, env, seed=5)
    env.close()
    assert len(scores) == 3 and all(1 <= s <= 500 for s in scores)


def test_gym_vector_env_reports_the_observation_an_episode_ended_in():
    env = GymVectorEnv("CartPole-v1", num_envs=2)
    obs = env.reset(seed=0)
    assert obs.shape == (2, 4) and obs.dtype == torch.float32
    for _ in range(200):  # always push left: the pole falls within a few dozen steps
        obs, _, terminated, truncated, final_obs = env.step(torch.zeros(2, dtype=torch.long))
        if terminated.any():
            break
    assert terminated.any() and not truncated.any()
    n = int(terminated.nonzero()[0, 0])
    assert not torch.equal(final_obs[n], obs[n])  # the next episode's first observation came back as obs
    assert abs(float(final_obs[n, 2])) > 0.2 or abs(float(final_obs[n, 0])) > 2.4  # fallen pole or off the track
    env.close()
    with pytest.raises(ValueError, match="num_envs"):
        GymVectorEnv("CartPole-v1", num_envs=0)


# ---------------------------------------------------------------------------
# The sorting task as token-level episodes
# ---------------------------------------------------------------------------


def test_sorting_env_one_step_per_token_reward_at_the_last():
    prompts = sorting_prompts()  # (3, 3), V = 5
    env = SortingEnv(prompts, group_size=2)
    obs = env.reset()
    assert env.num_envs == 6 and obs.shape == (6, 7)  # prompt (3), response so far (3), position (1)
    assert (obs[:, 3:6] == 5).all() and (obs[:, 6] == 0).all()  # nothing written: PAD = V
    responses = torch.tensor([[0, 1, 2]] * 6)
    for t in range(3):
        obs, rewards, terminated, truncated, final_obs = env.step(responses[:, t])
        assert not truncated.any()
        if t < 2:
            assert (rewards == 0).all() and not terminated.any() and (obs[:, 6] == t + 1).all()
    assert terminated.all()
    torch.testing.assert_close(rewards, sort_inclusion_ordering_reward(env.prompts, responses))
    assert torch.equal(final_obs[:, 3:6], responses) and (obs[:, 3:6] == 5).all()  # then a fresh episode
    with pytest.raises(ValueError, match="prompts"):
        SortingEnv(prompts.float())
    with pytest.raises(ValueError, match="group_size"):
        SortingEnv(prompts, group_size=0)


def test_token_policy_and_critic_shapes():
    model = SortingPolicy(5, 4, 3, 3, generator=torch.Generator().manual_seed(0))
    actor, critic, ref = sorting_ppo_models(model, prompt_length=3, vocab_size=5, hidden=8)
    env = SortingEnv(sorting_prompts(), group_size=2)
    obs = env.reset()
    obs, *_ = env.step(torch.zeros(6, dtype=torch.long))  # position 1
    torch.testing.assert_close(actor(obs), model(obs[:, :3])[:, 1])  # (M, V): the logits of position t
    assert critic(obs).shape == (6,)
    assert isinstance(actor, TokenPolicy) and isinstance(critic, TokenCritic)
    assert not any(p.requires_grad for p in ref.parameters())
    torch.testing.assert_close(ref(obs), actor(obs))  # a frozen copy of the starting policy


def test_ppo_on_tokens_gae_over_the_response_and_a_kl_to_the_reference():
    model = SortingPolicy(5, 10, 3, 3, generator=torch.Generator().manual_seed(0))
    actor, critic, ref = sorting_ppo_models(model, prompt_length=3, vocab_size=5, hidden=16)
    config = PPOTrainerConfig(num_steps=3, gamma=1.0, lam=0.95, lr=1e-2, kl_coef=0.1, ent_coef=0.0, num_minibatches=2)
    trainer = PPOTrainer(actor, critic, ref, config=config)
    env = SortingEnv(sorting_prompts(), group_size=4)
    rollout = trainer.collect_experiences(env)
    # One response per environment, ending (terminated) at its last token.
    assert rollout.terminated[:, -1].all() and not rollout.terminated[:, :-1].any()
    torch.testing.assert_close(rollout.logp_ref, rollout.logp)  # the policy starts as the reference
    history = trainer.train(env, num_updates=15, progress=False)
    assert history.kl[0] == 0.0 and all(math.isfinite(k) for k in history.kl)
    assert history.kl[-1] > 0  # the policy has moved away from the reference
    assert sum(history.mean_return[-3:]) / 3 > history.mean_return[0]
