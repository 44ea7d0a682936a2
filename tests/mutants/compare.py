"""Wrong and right implementations of chapter 07's exercises, for tests/test_mutants.py.

``memory_accounting(n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0,
weights_dtype="bf16", optimizer_dtype="fp32")`` (checked by ``course_lib.lectures.memory``) and
``read_sweep(group_sizes, clip_eps, reward, tol=0.1)`` (checked by ``course_lib.lectures.sweep``).
Each mutant is written the way a student might write it, not built from the checks' own
mistake catalogues, so the tests prove the checks catch real code.
"""

import math

import torch

BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}
KEYS = ("actor", "critic", "reference", "reward", "optimizer", "total")


def _finish(account):
    account["total"] = sum(account.values())
    return account


# ---------------------------------------------------------------------------
# memory_accounting mutants
# ---------------------------------------------------------------------------


def accounting_one_adam_state(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = BYTES[weights_dtype], BYTES[optimizer_dtype]
    master = o if w < o else 0
    trained = n_params_actor + n_params_critic
    return _finish(
        {
            "actor": 2 * w * n_params_actor,
            "critic": 2 * w * n_params_critic,
            "reference": w * n_params_ref,
            "reward": w * n_params_reward,
            "optimizer": trained * (o + master),
        }
    )  # only exp_avg: exp_avg_sq forgotten


def accounting_reference_has_grads(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = BYTES[weights_dtype], BYTES[optimizer_dtype]
    master = o if w < o else 0
    trained = n_params_actor + n_params_critic
    # every model "has weights and gradients", frozen or not
    return _finish(
        {
            "actor": 2 * w * n_params_actor,
            "critic": 2 * w * n_params_critic,
            "reference": 2 * w * n_params_ref,
            "reward": 2 * w * n_params_reward,
            "optimizer": trained * (2 * o + master),
        }
    )


def accounting_no_critic_optimizer(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = BYTES[weights_dtype], BYTES[optimizer_dtype]
    master = o if w < o else 0
    return _finish(
        {
            "actor": 2 * w * n_params_actor,
            "critic": 2 * w * n_params_critic,
            "reference": w * n_params_ref,
            "reward": w * n_params_reward,
            "optimizer": n_params_actor * (2 * o + master),
        }
    )  # "the optimizer is the policy's"


def accounting_bf16_as_four_bytes(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w = 4  # "a float is 4 bytes"
    o = BYTES[optimizer_dtype]
    master = o if BYTES[weights_dtype] < o else 0
    trained = n_params_actor + n_params_critic
    return _finish(
        {
            "actor": 2 * w * n_params_actor,
            "critic": 2 * w * n_params_critic,
            "reference": w * n_params_ref,
            "reward": w * n_params_reward,
            "optimizer": trained * (2 * o + master),
        }
    )


def accounting_in_bits(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    bits = {"fp64": 64, "fp32": 32, "bf16": 16, "fp16": 16}  # read off the dtype's name
    w, o = bits[weights_dtype], bits[optimizer_dtype]
    master = o if w < o else 0
    trained = n_params_actor + n_params_critic
    return _finish(
        {
            "actor": 2 * w * n_params_actor,
            "critic": 2 * w * n_params_critic,
            "reference": w * n_params_ref,
            "reward": w * n_params_reward,
            "optimizer": trained * (2 * o + master),
        }
    )


def accounting_no_master_copy(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = BYTES[weights_dtype], BYTES[optimizer_dtype]
    trained = n_params_actor + n_params_critic
    return _finish(
        {
            "actor": 2 * w * n_params_actor,
            "critic": 2 * w * n_params_critic,
            "reference": w * n_params_ref,
            "reward": w * n_params_reward,
            "optimizer": trained * 2 * o,
        }
    )


def accounting_frozen_models_in_optimizer(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = BYTES[weights_dtype], BYTES[optimizer_dtype]
    master = o if w < o else 0
    everything = n_params_actor + n_params_critic + n_params_ref + n_params_reward
    return _finish(
        {
            "actor": 2 * w * n_params_actor,
            "critic": 2 * w * n_params_critic,
            "reference": w * n_params_ref,
            "reward": w * n_params_reward,
            "optimizer": everything * (2 * o + master),
        }
    )


def accounting_total_only(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    return 16 * (n_params_actor + n_params_critic) + 2 * (n_params_ref + n_params_reward)  # not the dict asked for


# ---------------------------------------------------------------------------
# memory_accounting: correct variants
# ---------------------------------------------------------------------------


def accounting_per_model_loop(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    w, o = BYTES[weights_dtype], BYTES[optimizer_dtype]
    models = {
        "actor": (n_params_actor, True),
        "critic": (n_params_critic, True),
        "reference": (n_params_ref, False),
        "reward": (n_params_reward, False),
    }
    account = {"optimizer": 0}
    for name, (n, trained) in models.items():
        account[name] = n * w * (2 if trained else 1)
        if trained:
            account["optimizer"] += n * (o * 2 + (o if o > w else 0))
    account["total"] = sum(v for k, v in account.items() if k != "total")
    return {key: account[key] for key in KEYS}


def accounting_with_torch_dtypes(
    n_params_actor, n_params_critic=0, n_params_ref=0, n_params_reward=0, weights_dtype="bf16", optimizer_dtype="fp32"
):
    dtypes = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    w = torch.finfo(dtypes[weights_dtype]).bits // 8
    o = torch.finfo(dtypes[optimizer_dtype]).bits // 8
    trained = n_params_actor + n_params_critic
    adam = 2 * o + (o if w < o else 0)
    return _finish(
        {
            "actor": 2 * w * n_params_actor,
            "critic": 2 * w * n_params_critic,
            "reference": w * n_params_ref,
            "reward": w * n_params_reward,
            "optimizer": trained * adam,
        }
    )


# ---------------------------------------------------------------------------
# read_sweep mutants
# ---------------------------------------------------------------------------


def sweep_returns_indices(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(reward.argmax()), reward.shape[1])
    best = reward.max(dim=1).values
    k = int((best >= reward.max() - tol).nonzero()[0, 0])
    return i, j, k


def sweep_unravel_by_rows(group_sizes, clip_eps, reward, tol=0.1):
    flat = int(reward.argmax())
    i, j = flat // reward.shape[0], flat % reward.shape[0]  # row length taken from the wrong axis
    i, j = min(i, reward.shape[0] - 1), min(j, reward.shape[1] - 1)
    best = reward.max(dim=1).values
    k = int((best >= reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def sweep_last_of_ties(group_sizes, clip_eps, reward, tol=0.1):
    i, j = 0, 0
    for a in range(reward.shape[0]):
        for b in range(reward.shape[1]):
            if reward[a, b] >= reward[i, j]:  # >= keeps the last of equal rewards
                i, j = a, b
    best = reward.max(dim=1).values
    k = int((best >= reward.max() - tol).nonzero()[0, 0])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def sweep_saturation_by_mean(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(reward.argmax()), reward.shape[1])
    mean = reward.mean(dim=1)  # averages a bad clip range in
    within = (mean >= reward.max() - tol).nonzero()
    k = int(within[0, 0]) if len(within) else len(group_sizes) - 1
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def sweep_saturation_first_small_gain(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(reward.argmax()), reward.shape[1])
    best = reward.max(dim=1).values.tolist()
    k = len(best) - 1
    for n in range(1, len(best)):
        if best[n] - best[n - 1] < tol:
            k = n - 1
            break
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[k])


def sweep_saturation_is_best_group(group_sizes, clip_eps, reward, tol=0.1):
    i, j = divmod(int(reward.argmax()), reward.shape[1])
    return int(group_sizes[i]), float(clip_eps[j]), int(group_sizes[i])


# ---------------------------------------------------------------------------
# read_sweep: correct variants
# ---------------------------------------------------------------------------


def sweep_loops(group_sizes, clip_eps, reward, tol=0.1):
    best_value, best = -math.inf, None
    for a in range(reward.shape[0]):
        for b in range(reward.shape[1]):
            if float(reward[a, b]) > best_value:  # strict: the first of equal rewards stays
                best_value, best = float(reward[a, b]), (a, b)
    for a in range(reward.shape[0]):
        if max(float(x) for x in reward[a]) >= best_value - tol:
            return int(group_sizes[best[0]]), float(clip_eps[best[1]]), int(group_sizes[a])
    raise AssertionError("unreachable: the best row is within tol of itself")


def sweep_unravel_index(group_sizes, clip_eps, reward, tol=0.1):
    i, j = torch.unravel_index(reward.argmax(), reward.shape)
    saturated = reward.amax(dim=1) >= reward.amax() - tol
    k = int(torch.argmax(saturated.int()))  # the first True
    return group_sizes[i].item(), clip_eps[j].item(), group_sizes[k].item()


MUTANTS = [
    ("memory_accounting", accounting_one_adam_state, "two states"),
    ("memory_accounting", accounting_reference_has_grads, "frozen"),
    ("memory_accounting", accounting_no_critic_optimizer, "critic"),
    ("memory_accounting", accounting_bf16_as_four_bytes, "2 bytes"),
    ("memory_accounting", accounting_in_bits, "bits"),
    ("memory_accounting", accounting_no_master_copy, "master copy"),
    ("memory_accounting", accounting_frozen_models_in_optimizer, "only trained models"),
    ("memory_accounting", accounting_total_only, "dict"),
    ("read_sweep", sweep_returns_indices, "indices"),
    ("read_sweep", sweep_unravel_by_rows, "unravel"),
    ("read_sweep", sweep_last_of_ties, "smallest group size"),
    ("read_sweep", sweep_saturation_by_mean, "mean over clip ranges"),
    ("read_sweep", sweep_saturation_first_small_gain, "noisy dip"),
    ("read_sweep", sweep_saturation_is_best_group, "smallest"),
]

VARIANTS = [
    ("memory_accounting", accounting_per_model_loop),
    ("memory_accounting", accounting_with_torch_dtypes),
    ("read_sweep", sweep_loops),
    ("read_sweep", sweep_unravel_index),
]
