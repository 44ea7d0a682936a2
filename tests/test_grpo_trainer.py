"""Tests for course_lib.trainers.grpo_trainer: the homework's methods, determinism, learning, the benchmark."""

from __future__ import annotations

import ast
import copy
import dataclasses
import importlib.util
import inspect
from pathlib import Path

import pytest
import torch

from course_lib.grpo import group_advantages
from course_lib.models import SortingPolicy
from course_lib.policy_gradient import reinforce_loss
from course_lib.tasks import sorting_prompts
from course_lib.trainers import GRPOTrainer, GRPOTrainerConfig
from course_lib.trainers.grpo_trainer import GRPOHistory
from course_lib.trainers.pg_trainer import PGTrainerConfig

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = sorting_prompts()  # (B=3, T=3), V = 5


def small_trainer(**overrides) -> GRPOTrainer:
    return GRPOTrainer.for_sorting(GRPOTrainerConfig(**overrides))


# ---------------------------------------------------------------------------
# The homework's interface: names, shapes
# ---------------------------------------------------------------------------


def test_homework_constructor_and_methods_exist_and_are_documented():
    model = SortingPolicy(5, 10, 3, 3, generator=torch.Generator().manual_seed(0))
    trainer = GRPOTrainer(model, copy.deepcopy(model), group_size=4, clip_epsilon=0.1, kl_beta=0.5)
    # The three homework arguments land in the config under the papers' names.
    assert (trainer.config.group_size, trainer.config.clip_eps, trainer.config.kl_coef) == (4, 0.1, 0.5)
    for name in ("generate_group_outputs", "compute_rewards", "training_step", "train", "log_probs"):
        method = getattr(trainer, name)
        assert inspect.getdoc(method), f"{name} has no docstring"
    assert inspect.getdoc(GRPOTrainer) and inspect.getdoc(GRPOTrainerConfig)


def test_method_shapes():
    trainer = small_trainer(group_size=6)
    B, T = PROMPTS.shape
    responses = trainer.generate_group_outputs(PROMPTS)
    assert responses.shape == (B, 6, T) and responses.dtype == torch.long
    assert 0 <= int(responses.min()) and int(responses.max()) < 5
    rewards = trainer.compute_rewards(PROMPTS, responses)
    assert rewards.shape == (B, 6) and rewards.is_floating_point()
    assert 0.0 <= float(rewards.min()) and float(rewards.max()) <= 5.0
    logp = trainer.log_probs(trainer.model, PROMPTS, responses)
    assert logp.shape == (B, 6, T) and bool((logp <= 0).all())
    info = trainer.training_step(PROMPTS, responses, rewards)
    for key in ("loss", "kl", "clip_fraction", "adv_abs_mean", "reward_mean", "entropy"):
        assert isinstance(info[key], float)


def test_compute_rewards_hand_computed():
    # Prompt [1, 0, 2]: [0, 1, 2] earns 3 + 2 = 5; [2, 2, 2] earns 1 (the 2) + 2 (pairs) = 3.
    trainer = small_trainer()
    responses = torch.tensor([[[0, 1, 2], [2, 2, 2]]])  # (1, 2, 3)
    rewards = trainer.compute_rewards(PROMPTS[:1], responses)
    torch.testing.assert_close(rewards, torch.tensor([[5.0, 3.0]]))


def test_temperature_divides_the_logits():
    trainer = small_trainer(temperature=2.0)
    responses = trainer.generate_group_outputs(PROMPTS)
    expected = torch.log_softmax(trainer.model(PROMPTS) / 2.0, -1)  # (B, T, V)
    expected = expected[:, None].expand(-1, responses.shape[1], -1, -1).gather(-1, responses[..., None])[..., 0]
    torch.testing.assert_close(trainer.log_probs(trainer.model, PROMPTS, responses), expected)


def test_init_scale_scales_the_initial_logits():
    small, large = small_trainer(init_scale=0.1), small_trainer(init_scale=1.0)
    torch.testing.assert_close(small.model(PROMPTS), 0.1 * large.model(PROMPTS))
    # The reference starts as an exact copy of the policy.
    torch.testing.assert_close(small.ref_model(PROMPTS), small.model(PROMPTS))


# ---------------------------------------------------------------------------
# One inner step is a REINFORCE step with the group advantages
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kl_beta", [0.0, 0.04])
def test_one_step_equals_reinforce_with_group_advantages(kl_beta):
    # First step on a batch: logp_old = logp, so ratio = exp(0) = 1 everywhere, the clip never
    # binds, and d ratio / d theta = d logp / d theta. The k3 gradient 1 - pi_ref / pi is 0
    # where pi = pi_ref (the reference is a copy of the initial policy).
    trainer = small_trainer(kl_coef=kl_beta)
    reference = copy.deepcopy(trainer.model)
    responses = trainer.generate_group_outputs(PROMPTS)
    rewards = trainer.compute_rewards(PROMPTS, responses)
    info = trainer.training_step(PROMPTS, responses, rewards)
    assert info["clip_fraction"] == 0.0
    grads_grpo = [p.grad.clone() for p in trainer.model.parameters()]

    adv = group_advantages(rewards)  # (B, G): the deltas of REINFORCE
    loss = reinforce_loss(trainer.log_probs(reference, PROMPTS, responses), adv)
    grads_pg = torch.autograd.grad(loss, list(reference.parameters()))
    for g_grpo, g_pg in zip(grads_grpo, grads_pg):
        torch.testing.assert_close(g_grpo, g_pg, rtol=1e-5, atol=1e-7)

    # The same Adam step from the same start lands on the same parameters.
    optimizer = torch.optim.Adam(reference.parameters(), lr=trainer.config.lr)
    for p, g in zip(reference.parameters(), grads_pg):
        p.grad = g
    optimizer.step()
    for p_grpo, p_pg in zip(trainer.model.parameters(), reference.parameters()):
        torch.testing.assert_close(p_grpo, p_pg, rtol=1e-5, atol=1e-7)


def test_later_steps_move_the_ratio_and_the_clip_binds():
    trainer = small_trainer(lr=0.1)
    responses = trainer.generate_group_outputs(PROMPTS)
    rewards = trainer.compute_rewards(PROMPTS, responses)
    with torch.no_grad():
        logp_old = trainer.log_probs(trainer.model, PROMPTS, responses)
    infos = [trainer.training_step(PROMPTS, responses, rewards, logp_old) for _ in range(5)]
    assert infos[0]["clip_fraction"] == 0.0
    assert infos[-1]["clip_fraction"] > 0.0


def test_reference_model_is_frozen():
    trainer = small_trainer(rounds=3)
    before = [p.clone() for p in trainer.ref_model.parameters()]
    trainer.train(PROMPTS, progress=False)
    assert all(not p.requires_grad for p in trainer.ref_model.parameters())
    for b, p in zip(before, trainer.ref_model.parameters()):
        assert torch.equal(b, p)
    assert any(not torch.equal(b, p) for b, p in zip(before, trainer.model.parameters()))


# ---------------------------------------------------------------------------
# The loop: history, determinism, learning
# ---------------------------------------------------------------------------


def test_history_has_one_entry_per_epoch():
    history = small_trainer().train(PROMPTS, rounds=4, progress=False)
    assert isinstance(history, GRPOHistory)
    for name in ("mean_reward", "greedy_reward", "loss", "kl", "clip_fraction", "entropy", "all_equal_fraction"):
        assert len(getattr(history, name)) == 4, name
    assert len(history.final_greedy_reward()) == 3
    assert history.max_reward == 5.0
    assert history.kl[0] >= 0.0  # k3 is never negative
    assert history.model is not None


def test_train_is_deterministic_and_seeded():
    def run(seed):
        return small_trainer(seed=seed).train(PROMPTS, rounds=5, progress=False)

    a, b, c = run(0), run(0), run(1)
    assert a.mean_reward == b.mean_reward and a.loss == b.loss and a.greedy_reward == b.greedy_reward
    assert a.mean_reward != c.mean_reward
    # The global RNG is neither used nor disturbed: the private generators make the run.
    torch.manual_seed(123)
    d = run(0)
    assert d.mean_reward == a.mean_reward


def test_train_restores_the_thread_count():
    threads = torch.get_num_threads()
    small_trainer().train(PROMPTS, rounds=1, progress=False)
    assert torch.get_num_threads() == threads


def test_a_short_run_improves_the_mean_reward():
    history = small_trainer(seed=0).train(PROMPTS, rounds=25, progress=False)
    first, last = history.mean_reward[0], sum(history.mean_reward[-5:]) / 5
    assert last > first + 1.0, (first, last)


# ---------------------------------------------------------------------------
# The config and the benchmark
# ---------------------------------------------------------------------------


def test_every_config_field_has_a_one_line_docstring():
    # GRPOTrainerConfig is PGTrainerConfig plus its own fields: each class documents the fields it declares.
    documented = set()
    for cls in (GRPOTrainerConfig, PGTrainerConfig):
        body = ast.parse(inspect.getsource(cls)).body[0].body
        for node, after in zip(body, body[1:]):
            is_doc = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
            if isinstance(node, ast.AnnAssign) and is_doc:
                assert "\n" not in after.value.value.strip(), node.target.id
                documented.add(node.target.id)
    assert documented == {f.name for f in dataclasses.fields(GRPOTrainerConfig)}


def test_the_grpo_config_is_chapter_02s_plus_the_clip_and_the_kl():
    assert issubclass(GRPOTrainerConfig, PGTrainerConfig)
    with pytest.raises(ValueError, match="deltas_mode"):
        GRPOTrainerConfig(deltas_mode="centered_rewards")  # GRPO's advantage is set by normalize_std


def test_defaults_keep_the_lecture_budget():
    config = GRPOTrainerConfig()
    assert (config.rounds, config.group_size, config.steps_per_round, config.embedding_dim) == (100, 10, 10, 10)


def _benchmark():
    spec = importlib.util.spec_from_file_location("sort_task", ROOT / "benchmarks" / "sort_task.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_runs_the_lectures_exact_setup_beside_the_course_default():
    bench = _benchmark()
    lecture = bench.BASELINES["lecture: REINFORCE, rewards"]
    assert (lecture.lr, lecture.embedding_std) == (1e-3, 1.0)
    assert bench.BASELINES["course: REINFORCE, rewards"] == PGTrainerConfig()


def test_benchmark_uses_the_config_defaults():
    bench = _benchmark()
    assert bench.CONFIG == GRPOTrainerConfig()
    assert inspect.signature(bench.run).parameters["config"].default is bench.CONFIG
    assert tuple(bench.SEEDS) == tuple(range(8))


def test_benchmark_prints_the_mean_last(capsys, monkeypatch):
    bench = _benchmark()
    monkeypatch.setattr(bench, "run", lambda seeds: {0: [5.0, 4.0, 3.0], 1: [5.0, 5.0, 5.0]})
    row = {"train_greedy": 5.0, "train_sorted": 1.0, "held_out_greedy": 3.0, "held_out_sorted": 0.0}
    monkeypatch.setattr(bench, "run_all", lambda seeds: {"lecture: REINFORCE, rewards": row})
    assert bench.main(["--seeds", "2"]) == pytest.approx(27 / 6)
    assert capsys.readouterr().out.strip().splitlines()[-1] == "mean_greedy_reward=4.500"


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("group_size", 0),
        ("rounds", 0),
        ("steps_per_round", 1.5),
        ("lr", 0.0),
        ("clip_eps", -0.1),
        ("kl_coef", -1.0),
        ("kl_kind", "k4"),
        ("loss_agg", "mean"),
        ("temperature", 0.0),
        ("init_scale", -1.0),
        ("ent_coef", -0.1),
        ("reward", "length"),
        ("normalize_std", "yes"),
        ("seed", -1),
        ("embedding_dim", 0),
    ],
)
def test_config_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=field):
        GRPOTrainerConfig(**{field: value})


def test_trainer_rejects_bad_arguments():
    model = SortingPolicy(5, 4, 3, 3)
    with pytest.raises(ValueError, match="model"):
        GRPOTrainer("not a model", None)
    with pytest.raises(ValueError, match="ref_model"):
        GRPOTrainer(model, "not a model")
    with pytest.raises(ValueError, match="clip_eps"):
        GRPOTrainer(model, None, clip_epsilon=0.0)
    with pytest.raises(ValueError, match="group_size"):
        GRPOTrainer(model, None, group_size=0)
    with pytest.raises(ValueError, match="kl_coef"):
        GRPOTrainer(model, None, kl_beta=-0.1)
    with pytest.raises(ValueError, match="config"):
        GRPOTrainer(model, None, config={"lr": 0.1})
    trainer = GRPOTrainer(model, None)
    with pytest.raises(ValueError, match="responses"):
        trainer.compute_rewards(PROMPTS, torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="rounds"):
        trainer.train(PROMPTS, rounds=0, progress=False)
    with pytest.raises(ValueError, match="prompts"):
        trainer.train(PROMPTS.float(), progress=False)
