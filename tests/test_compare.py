"""Tests of chapter 07's accounting (course_lib.lectures.memory) and comparison (course_lib.lectures.compare)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.checks import memory as memory_checks
from course_lib.checks import sweep as sweep_checks
from course_lib.lectures import compare, memory
from course_lib.lectures import sweep as sweeps

SEVEN_B = 7_000_000_000

# ---------------------------------------------------------------------------
# memory_accounting: hand-computed values
# ---------------------------------------------------------------------------


def test_ppo_rlhf_at_7b_bf16_with_fp32_adam():
    account = memory.memory_accounting(SEVEN_B, SEVEN_B, SEVEN_B, SEVEN_B)
    # trained: 2 (bf16 weights) + 2 (bf16 grads) = 4 B/param in the model row, 4 + 4 + 4 = 12 in the optimizer
    assert account["actor"] == account["critic"] == 4 * SEVEN_B  # 28 GB each
    assert account["reference"] == account["reward"] == 2 * SEVEN_B  # 14 GB each, weights only
    assert account["optimizer"] == 12 * 2 * SEVEN_B  # 168 GB: master copy, exp_avg, exp_avg_sq of 14e9 params
    assert account["total"] == 252_000_000_000  # 36 bytes per 7B parameter


def test_grpo_at_7b_is_half_of_ppo_rlhf():
    grpo = memory.memory_accounting(SEVEN_B, n_params_ref=SEVEN_B)
    # 16 bytes per trained parameter + 2 per frozen one: 18 * 7e9 = 126 GB = 252 / 2
    assert grpo["total"] == 126_000_000_000
    assert grpo["critic"] == grpo["reward"] == 0


def test_fp32_toy_has_no_master_copy():
    account = memory.memory_accounting(650, 6_849, 650, weights_dtype="fp32", optimizer_dtype="fp32")
    assert account["actor"] == 650 * 8  # fp32 weights + fp32 grads
    assert account["critic"] == 6_849 * 8
    assert account["reference"] == 650 * 4
    assert account["optimizer"] == (650 + 6_849) * 8  # two fp32 moments, no master copy
    assert account["total"] == 5_200 + 54_792 + 2_600 + 59_992


def test_all_bf16_and_wider_weights_need_no_master_copy():
    assert memory.memory_accounting(10, weights_dtype="bf16", optimizer_dtype="bf16")["optimizer"] == 10 * 4
    assert memory.memory_accounting(10, weights_dtype="fp64", optimizer_dtype="fp32")["optimizer"] == 10 * 8
    assert memory.memory_accounting(10, weights_dtype="fp16", optimizer_dtype="fp32")["optimizer"] == 10 * 12


def test_accounting_keys_in_order():
    assert tuple(memory.memory_accounting(1)) == memory.ACCOUNT_KEYS


@settings(max_examples=50, deadline=None)
@given(
    st.integers(0, 10**10),
    st.integers(0, 10**10),
    st.integers(0, 10**10),
    st.integers(0, 10**10),
    st.sampled_from(list(memory.DTYPE_BYTES)),
    st.sampled_from(list(memory.DTYPE_BYTES)),
)
def test_accounting_invariants(actor, critic, ref, reward, w, o):
    account = memory.memory_accounting(actor, critic, ref, reward, w, o)
    parts = [account[key] for key in memory.ACCOUNT_KEYS[:-1]]
    assert account["total"] == sum(parts)
    assert all(isinstance(v, int) and v >= 0 for v in account.values())
    # dropping the critic and the reward model never costs memory
    assert memory.memory_accounting(actor, 0, ref, 0, w, o)["total"] <= account["total"]
    # a frozen parameter costs exactly its weight, a trained one at least twice that
    wb = memory.DTYPE_BYTES[w]
    assert account["reference"] == wb * ref
    assert account["actor"] + account["critic"] + account["optimizer"] >= 2 * wb * (actor + critic)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 10**9))
def test_sixteen_bytes_per_trained_parameter_either_way(n):
    # ZeRO's accounting: bf16 + fp32 Adam (2 + 2 + 12) equals fp32 throughout (4 + 4 + 8)
    mixed = memory.memory_accounting(n)
    full = memory.memory_accounting(n, weights_dtype="fp32", optimizer_dtype="fp32")
    assert mixed["total"] == full["total"] == 16 * n


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"n_params_actor": -1}, "n_params_actor"),
        ({"n_params_actor": 1, "n_params_critic": 1.5}, "n_params_critic"),
        ({"n_params_actor": 1, "n_params_ref": "7B"}, "n_params_ref"),
        ({"n_params_actor": 1, "n_params_reward": True}, "n_params_reward"),
        ({"n_params_actor": 1, "weights_dtype": "int8"}, "weights_dtype"),
        ({"n_params_actor": 1, "optimizer_dtype": "float32"}, "optimizer_dtype"),
    ],
)
def test_accounting_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        memory.memory_accounting(**kwargs)


@pytest.mark.usefixtures("trusting")
def test_check_memory_accounting_accepts_the_reference(capsys):
    assert memory_checks.check_memory_accounting(memory.memory_accounting)
    assert "\u2714" in capsys.readouterr().out


def test_check_memory_accounting_lets_not_implemented_through():
    def stub(*args, **kwargs):
        raise NotImplementedError

    with pytest.raises(NotImplementedError):
        memory_checks.check_memory_accounting(stub)


# ---------------------------------------------------------------------------
# Compute and KV cache
# ---------------------------------------------------------------------------


def test_flops_per_token_hand_computed():
    # PPO-RLHF: 2N for each of 4 forward passes = 8N, one epoch of fwd + bwd (6N) on actor and critic = 12N
    assert memory.flops_per_token(SEVEN_B, SEVEN_B, SEVEN_B, SEVEN_B) == 20 * SEVEN_B
    # GRPO: sample + reference (4N) and 6N for the actor = 10N: half again
    assert memory.flops_per_token(SEVEN_B, n_params_ref=SEVEN_B) == 10 * SEVEN_B
    # four update epochs: 4 * 6N on the actor
    assert memory.flops_per_token(100, update_epochs=4) == 2 * 100 + 24 * 100


def test_kv_cache_llama2_7b_is_half_a_mebibyte_per_token():
    # 2 (K and V) * 32 layers * 32 heads * 128 dims * 2 bytes = 524,288 bytes = 0.5 MiB
    assert memory.kv_cache_bytes(1) == 2**19
    assert memory.kv_cache_bytes(1000, n_kv_heads=8) == 1000 * 2**17  # grouped-query attention: 4x smaller


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: memory.flops_per_token(1, update_epochs=0), "update_epochs"),
        (lambda: memory.flops_per_token(-5), "n_params_actor"),
        (lambda: memory.kv_cache_bytes(-1), "n_tokens"),
        (lambda: memory.kv_cache_bytes(10, n_layers=0), "n_layers"),
        (lambda: memory.kv_cache_bytes(10, dtype="fp8"), "dtype"),
    ],
)
def test_compute_and_cache_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ---------------------------------------------------------------------------
# Measuring on real models
# ---------------------------------------------------------------------------


def test_count_parameters_weights_and_gradients():
    layer = torch.nn.Linear(3, 4)  # 12 weights + 4 biases = 16 parameters, 64 bytes in fp32
    counted = memory.count_parameters(layer)
    assert counted == {"params": 16, "trainable": 16, "weights": 64, "gradients": 0}
    layer(torch.randn(2, 3)).sum().backward()
    assert memory.count_parameters(layer)["gradients"] == 64
    frozen = torch.nn.Linear(3, 4).requires_grad_(False).double()
    assert memory.count_parameters(frozen) == {"params": 16, "trainable": 0, "weights": 128, "gradients": 0}


def test_optimizer_state_is_two_moments_and_a_step_counter():
    layer = torch.nn.Linear(3, 4)
    optimizer = torch.optim.Adam(layer.parameters())
    assert memory.optimizer_state_bytes(optimizer) == 0  # allocated lazily, at the first step
    layer(torch.randn(2, 3)).sum().backward()
    optimizer.step()
    # 16 parameters * 2 moments * 4 bytes = 128, plus a 4-byte float32 step counter per tensor (2 tensors)
    assert memory.optimizer_state_bytes(optimizer) == 128 + 8


def test_saved_activations_hand_computed():
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(3, 4), torch.randn(5, 3)
    result, saved = memory.saved_activation_bytes(lambda: torch.tanh(layer(x)).sum(), exclude=layer.parameters())
    # Linear saves its input x (5 x 3 floats = 60 bytes; the weight is a parameter, excluded);
    # tanh saves its output (5 x 4 = 80 bytes); sum saves nothing. 60 + 80 = 140.
    assert saved == 140
    assert result.requires_grad


def test_saved_activations_counts_a_storage_once():
    w = torch.randn(6, requires_grad=True)
    assert memory.saved_activation_bytes(lambda: (w * w).sum())[1] == 24  # w saved twice, one storage of 24 bytes
    assert memory.saved_activation_bytes(lambda: (w * w).sum(), exclude=[w])[1] == 0
    h = torch.randn(6, 6, requires_grad=True)
    assert memory.saved_activation_bytes(lambda: (h[0] * h[1]).sum())[1] == 36 * 4  # two views of one storage


def test_saved_activations_grow_with_the_batch():
    layer = torch.nn.Linear(8, 8)
    sizes = [
        memory.saved_activation_bytes(
            lambda n=n: torch.tanh(layer(torch.randn(n, 8))).sum(), exclude=layer.parameters()
        )[1]
        for n in (1, 2, 4)
    ]
    assert sizes == [64, 128, 256]  # (input + output) * n * 8 * 4 bytes


def test_measure_training_memory_rows_add_up():
    torch.manual_seed(0)
    actor, critic = torch.nn.Linear(4, 2), torch.nn.Linear(4, 1)
    reference = torch.nn.Linear(4, 2).requires_grad_(False)
    optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()])
    obs = torch.randn(7, 4)

    def step():
        loss = actor(obs).pow(2).mean() + critic(obs).pow(2).mean() + reference(obs).sum().detach()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    rows = memory.measure_training_memory({"actor": actor, "critic": critic, "reference": reference}, optimizer, step)
    assert rows["actor"] == {"params": 10, "bytes": 80}  # weights + grads, fp32
    assert rows["critic"] == {"params": 5, "bytes": 40}
    assert rows["reference"] == {"params": 10, "bytes": 40}  # frozen: weights only
    assert rows["optimizer"] == {"params": 15, "bytes": 15 * 8 + 4 * 4}  # 4 tensors, one step counter each
    assert rows["activations"]["bytes"] > 0
    assert rows["total"]["bytes"] == sum(
        rows[k]["bytes"] for k in ("actor", "critic", "reference", "optimizer", "activations")
    )
    predicted = memory.memory_accounting(10, 5, 10, weights_dtype="fp32", optimizer_dtype="fp32")
    for name in ("actor", "critic", "reference"):
        assert predicted[name] == rows[name]["bytes"]


def test_sorting_memory_tables_agree_with_the_formula():
    tables = compare.sorting_memory_tables(group_size=4)
    ppo, grpo = tables["PPO"], tables["GRPO"]
    assert "critic" in ppo and "critic" not in grpo
    predicted = memory.memory_accounting(
        ppo["actor"]["params"],
        ppo["critic"]["params"],
        ppo["reference"]["params"],
        weights_dtype="fp32",
        optimizer_dtype="fp32",
    )
    for name in ("actor", "critic", "reference"):
        assert ppo[name]["bytes"] == predicted[name]
    # Adam's step counters: 4 bytes for each of 3 actor tensors and 6 critic tensors
    assert ppo["optimizer"]["bytes"] - predicted["optimizer"] == 9 * 4
    assert grpo["total"]["bytes"] < ppo["total"]["bytes"]
    text = memory.format_memory_tables(tables)
    assert "critic" in text and "activations" in text and text.count("\n") == 7  # 2 header lines + 6 rows


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: memory.count_parameters("actor"), "model"),
        (lambda: memory.optimizer_state_bytes(None), "optimizer"),
        (lambda: memory.saved_activation_bytes(3), "step"),
        (lambda: memory.measure_training_memory({}, None, lambda: None), "models"),
        (lambda: memory.measure_training_memory({"actor": 1}, None, lambda: None), "actor"),
        (lambda: memory.format_memory_tables({}), "tables"),
    ],
)
def test_measuring_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ---------------------------------------------------------------------------
# The runners: same budget, curves, bands
# ---------------------------------------------------------------------------


def test_sorting_runs_see_the_same_samples():
    grpo = compare.run_sorting_grpo(seed=0, rounds=3, group_size=4)
    ppo = compare.run_sorting_ppo(seed=0, updates=3, group_size=4)
    assert grpo["samples"] == ppo["samples"] == [12, 24, 36]  # 3 prompts x 4 responses per iteration
    for curve in (grpo, ppo):
        assert len(curve["seconds"]) == len(curve["reward"]) == len(curve["greedy"]) == 3
        assert all(a < b for a, b in zip(curve["seconds"], curve["seconds"][1:]))
        assert 0.0 <= curve["final_greedy"] <= 5.0


def test_sorting_ppo_starts_from_grpos_initial_policy():
    trainer, env = compare.sorting_ppo_trainer(seed=3, group_size=2)
    reference = compare.GRPOTrainer.for_sorting(compare.GRPOTrainerConfig(seed=3)).model
    assert torch.equal(trainer.actor_model.model.decode, reference.decode)
    assert env.num_envs == 3 * 2


def test_episode_groups_share_their_start_state():
    import gymnasium as gym

    from course_lib.trainers.envs import cartpole_models

    actor, _ = cartpole_models(hidden=8, seed=0)
    envs = [gym.make("CartPole-v1") for _ in range(2 * 3)]
    groups = compare.collect_episode_groups(actor, envs, [11, 12], torch.Generator().manual_seed(0))
    B, G, T = groups.actions.shape
    assert (B, G) == (2, 3) and groups.obs.shape == (2, 3, T, 4)
    # the G copies of a group start in the same state; the two groups do not
    assert torch.equal(groups.obs[0, :, 0], groups.obs[0, :1, 0].expand(3, 4))
    assert not torch.equal(groups.obs[0, 0, 0], groups.obs[1, 0, 0])
    # CartPole pays 1 per step: the return is the episode's length, the mask a prefix of ones
    assert torch.equal(groups.returns, groups.mask.sum(-1))
    assert bool((groups.mask[..., 1:] <= groups.mask[..., :-1]).all())
    assert groups.mask.amax(dim=(0, 1)).eq(1).all()  # the longest episode fills T
    with pytest.raises(ValueError, match="envs"):
        compare.collect_episode_groups(actor, envs[:5], [11, 12], torch.Generator())


def test_cartpole_runners_return_curves():
    for curve in (
        compare.run_cartpole_grpo(seed=0, max_steps=300, group_size=2, num_groups=2),
        compare.run_cartpole_ppo(seed=0, max_steps=300, num_envs=2),
    ):
        assert curve["samples"][-1] >= 300
        assert len(curve["samples"]) == len(curve["seconds"]) == len(curve["reward"])
        assert 1.0 <= curve["final_eval"] <= 500.0


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: compare.run_sorting_grpo(rounds=0), "rounds"),
        (lambda: compare.run_sorting_grpo(rounds=1, group_size=0), "group_size"),
        (lambda: compare.run_sorting_ppo(updates=-1), "updates"),
        (lambda: compare.run_sorting_ppo(updates=1, clip_eps=0.0), "clip_epsilon"),
        (lambda: compare.run_cartpole_ppo(max_steps=0), "max_steps"),
        (lambda: compare.run_cartpole_grpo(group_size=1.5), "group_size"),
        (lambda: compare.run_cartpole_grpo(clip_eps=-0.2), "clip_eps"),
        (lambda: compare.run_cartpole_grpo(loss_agg="sum"), "loss_agg"),
        (lambda: compare.first_reaching([1, 2], [1], 0.5), "x, y"),
    ],
)
def test_runners_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_band_interpolates_onto_a_common_grid():
    curves = [
        {"samples": [0, 10], "reward": [0.0, 10.0]},
        {"samples": [0, 5, 20], "reward": [2.0, math.nan, 22.0]},
    ]  # NaN dropped: 2 -> 22 over 0 -> 20
    b = compare.band(curves, n_points=3)
    np.testing.assert_allclose(b["x"], [0.0, 5.0, 10.0])  # up to the shorter curve's end
    # at x = 5: the first curve is 5.0, the second 2 + 20 * 5 / 20 = 7.0
    np.testing.assert_allclose(b["mean"], [1.0, 6.0, 11.0])
    np.testing.assert_allclose(b["low"], [0.0, 5.0, 10.0])
    np.testing.assert_allclose(b["high"], [2.0, 7.0, 12.0])


@pytest.mark.parametrize(
    "curves, name",
    [
        ([], "curves"),
        ([{"samples": [1]}], r"curves\[0\]"),
        ([{"samples": [1, 2], "reward": [math.nan, math.nan]}], r"curves\[0\]"),
    ],
)
def test_band_bad_input(curves, name):
    with pytest.raises(ValueError, match=name):
        compare.band(curves)


# ---------------------------------------------------------------------------
# The sweep and its reading
# ---------------------------------------------------------------------------


def test_committed_sweep_is_complete_and_small():
    from pathlib import Path

    assert (Path(sweeps.__file__).parent / "data" / "sweep_07.json").stat().st_size < 100_000
    results = sweeps.load_sweep()
    sweep = results["sweep"]
    assert sweep["group_sizes"] == list(sweeps.SWEEP_GROUP_SIZES)
    assert sweep["clip_eps"] == list(sweeps.SWEEP_CLIP_EPS)
    group_sizes, clip_eps, table = sweeps.sweep_grid(sweep)
    assert table.shape == (len(group_sizes), len(clip_eps)) and not torch.isnan(table).any()
    assert bool(((table >= 0) & (table <= 5)).all())
    config = sweeps.sweep_config(sweep, 8, 0.2)
    assert len(config["greedy_curve"]) == sweep["rounds"] // sweep["curve_every"]
    assert config["samples"] == sweep["rounds"] * 3 * 8
    for task in ("sorting", "cartpole"):
        assert set(results[task]["runs"]) == {"GRPO", "PPO"}


def test_sweep_lookups_bad_input():
    sweep = sweeps.load_sweep()["sweep"]
    with pytest.raises(ValueError, match="group_size"):
        sweeps.sweep_config(sweep, 5, 0.2)
    with pytest.raises(ValueError, match="metric"):
        sweeps.sweep_grid(sweep, "accuracy")
    with pytest.raises(ValueError, match="sweep"):
        sweeps.sweep_grid([])


def test_run_sweep_shape():
    sweep = sweeps.run_sweep(group_sizes=(2, 4), clip_eps=(0.2,), seeds=range(1), rounds=4, progress=False)
    assert [(c["group_size"], c["clip_eps"]) for c in sweep["configs"]] == [(2, 0.2), (4, 0.2)]
    assert len(sweep["configs"][0]["greedy_curve"]) == 2  # every 2nd of 4 rounds
    assert sweep["configs"][1]["samples"] == 4 * 3 * 4


def test_load_sweep_from_a_path(tmp_path):
    import json

    small = sweeps.run_sweep(group_sizes=(2,), clip_eps=(0.1, 0.2), seeds=range(1), rounds=2, progress=False)
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"sweep": small}))
    group_sizes, clip_eps, table = sweeps.sweep_grid(sweeps.load_sweep(path)["sweep"])
    assert group_sizes.tolist() == [2] and clip_eps.tolist() == [0.1, 0.2] and table.shape == (1, 2)


def test_read_sweep_hand_computed():
    group_sizes, clip_eps = torch.tensor([2, 4, 8]), torch.tensor([0.1, 0.2], dtype=torch.float64)
    reward = torch.tensor([[3.0, 3.5], [4.7, 4.9], [5.0, 4.95]], dtype=torch.float64)
    # best: 5.0 at (8, 0.1); per-group best [3.5, 4.9, 5.0]; within 0.1 of 5.0 -> 4.9 counts: G = 4
    assert sweeps.read_sweep(group_sizes, clip_eps, reward, tol=0.1) == (8, 0.1, 4)
    # tol = 0: only the best group itself
    assert sweeps.read_sweep(group_sizes, clip_eps, reward, tol=0.0)[2] == 8
    # ties at the maximum: the smallest group size, then the smallest clip range
    tied = torch.tensor([[5.0, 5.0], [5.0, 4.0], [5.0, 5.0]], dtype=torch.float64)
    assert sweeps.read_sweep(group_sizes, clip_eps, tied, tol=0.0) == (2, 0.1, 2)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(0, 2**31 - 1), st.floats(0.0, 1.0))
def test_read_sweep_properties(n_g, n_e, seed, tol):
    g = torch.Generator().manual_seed(seed)
    group_sizes = torch.arange(1, n_g + 1) * 2
    clip_eps = torch.linspace(0.1, 0.5, n_e, dtype=torch.float64)
    reward = torch.randint(0, 6, (n_g, n_e), generator=g).double()  # small integers: ties are common
    best_g, best_eps, sat_g = sweeps.read_sweep(group_sizes, clip_eps, reward, tol)
    i = group_sizes.tolist().index(best_g)
    j = min(range(n_e), key=lambda k: abs(clip_eps[k].item() - best_eps))
    assert reward[i, j] == reward.max()
    assert sat_g <= best_g  # the best group is within tol of itself
    assert not bool((reward[:i] == reward.max()).any())  # no smaller group size reaches the maximum


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (
            {"group_sizes": torch.tensor([4, 2]), "clip_eps": torch.tensor([0.2]), "reward": torch.ones(2, 1)},
            "group_sizes",
        ),
        (
            {"group_sizes": torch.tensor([2.0, 4.0]), "clip_eps": torch.tensor([0.2]), "reward": torch.ones(2, 1)},
            "group_sizes",
        ),
        (
            {"group_sizes": torch.tensor([2, 4]), "clip_eps": torch.tensor([0.2, 0.2]), "reward": torch.ones(2, 2)},
            "clip_eps",
        ),
        ({"group_sizes": torch.tensor([2, 4]), "clip_eps": torch.tensor([0.2]), "reward": torch.ones(1, 2)}, "reward"),
        (
            {
                "group_sizes": torch.tensor([2, 4]),
                "clip_eps": torch.tensor([0.2]),
                "reward": torch.ones(2, 1),
                "tol": -0.1,
            },
            "tol",
        ),
    ],
)
def test_read_sweep_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        sweeps.read_sweep(**kwargs)


def test_read_sweep_on_the_committed_sweep():
    group_sizes, clip_eps, table = sweeps.sweep_grid(sweeps.load_sweep()["sweep"])
    best_g, best_eps, sat_g = sweeps.read_sweep(group_sizes, clip_eps, table)
    assert best_g in group_sizes.tolist() and sat_g <= best_g


@pytest.mark.usefixtures("trusting")
def test_check_read_sweep_accepts_the_reference(capsys):
    assert sweep_checks.check_read_sweep(sweeps.read_sweep)
    assert "\u2714" in capsys.readouterr().out


def test_committed_cartpole_controls_match_the_runs_they_control():
    import json
    from pathlib import Path

    data = Path(sweeps.__file__).parent / "data"
    controls = json.loads((data / "cartpole_controls_07.json").read_text())
    cartpole = sweeps.load_sweep()["cartpole"]
    assert controls["meta"]["max_steps"] == cartpole["max_steps"]
    assert set(controls["runs"]) == {"GRPO, token-mean", "GRPO, 16 Adam steps per batch"}
    for curves in controls["runs"].values():
        assert len(curves) == len(cartpole["runs"]["GRPO"])
        assert all(
            curve["samples"][-1] >= cartpole["max_steps"] and 0 <= curve["final_eval"] <= 500 for curve in curves
        )


def test_committed_cartpole_clock_runs_rerun_the_stored_ones_on_the_cpu_clock():
    """cartpole_clock_07.json reruns sweep_07.json's CartPole runs (and the token-mean control) on the CPU clock:
    the same seeds and budget, each run starting on the stored trajectory, and a first passage to 400 that its own
    thinned curve agrees with (the first stored point at or above 400 comes no earlier)."""
    import json
    from pathlib import Path

    data = Path(sweeps.__file__).parent / "data"
    clock = json.loads((data / "cartpole_clock_07.json").read_text())
    controls = json.loads((data / "cartpole_controls_07.json").read_text())
    cartpole = sweeps.load_sweep()["cartpole"]
    stored = {**cartpole["runs"], "GRPO, token-mean": controls["runs"]["GRPO, token-mean"]}
    assert clock["meta"]["clock"].startswith("time.thread_time")
    assert clock["meta"]["max_steps"] == cartpole["max_steps"]
    assert set(clock["runs"]) == set(stored)
    for label, curves in clock["runs"].items():
        assert len(curves) == len(stored[label])
        for curve, old in zip(curves, stored[label]):
            assert curve["samples"][:4] == old["samples"][:4] and curve["reward"][:4] == old["reward"][:4]
            assert curve["samples"][-1] >= cartpole["max_steps"]
            assert all(later >= earlier for earlier, later in zip(curve["seconds"], curve["seconds"][1:]))
            first = curve["first_400"]
            thinned = compare.first_reaching(curve["samples"], curve["reward"], 400)
            if first["steps"] is None:
                assert np.isnan(thinned) and first["cpu_seconds"] is None
            else:
                # a thinned curve may have dropped every point at or above 400 but its last
                assert np.isnan(thinned) or first["steps"] <= thinned
                assert 0 < first["cpu_seconds"] <= curve["seconds"][-1]


def test_chapter_07_quotes_the_clock_runs_it_loads():
    """The prose after notebook 07's clock cell quotes medians of cartpole_clock_07.json: regenerating the file
    without reading it again fails here (steps rounded to thousands, CPU seconds to one decimal)."""
    import json
    from pathlib import Path

    import nbformat

    data = Path(sweeps.__file__).parent / "data"
    runs = json.loads((data / "cartpole_clock_07.json").read_text())["runs"]
    notebook = nbformat.read(Path(__file__).resolve().parent.parent / "notebooks" / "07_grpo_vs_ppo.ipynb", 4)
    prose = next(cell.source for cell in notebook.cells if cell.get("id") == "cmp07-cartpole-clock-read")
    prose = " ".join(prose.split())
    for label in ("GRPO", "PPO", "GRPO, token-mean"):
        first = [curve["first_400"] for curve in runs[label]]
        steps = np.median([np.inf if f["steps"] is None else f["steps"] for f in first])
        seconds = np.median([np.inf if f["cpu_seconds"] is None else f["cpu_seconds"] for f in first])
        assert f"{steps / 1e3:.0f},000" in prose, (label, steps)
        assert f"{seconds:.1f}" in prose, (label, seconds)
