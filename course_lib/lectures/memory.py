"""Memory and compute accounting for RL fine-tuning: what PPO's critic costs, and what GRPO saves.

PPO-RLHF (Ouyang et al. 2022) keeps four models in memory: the **actor** (the policy being
trained), the **critic** (a value model, trained too), the frozen **reference** policy and
the frozen **reward model**. GRPO (Shao et al. 2024, "DeepSeekMath", section 4.1) drops the
critic; with a verifiable reward it drops the reward model as well. How much that saves
depends on what each model costs, and that is simple bookkeeping:

- a **trained** model holds its weights, their gradients, and Adam's state: two moments
  per parameter (Kingma & Ba 2015), plus, under mixed precision, a full-precision master
  copy of the weights. With bf16 weights and fp32 Adam that is 2 + 2 + (4 + 4 + 4) = 16
  bytes per parameter (Rajbhandari et al. 2020, "ZeRO", section 3.1);
- a **frozen** model holds its weights only: no gradients, no optimizer state;
- a training step also keeps the **activations** that autograd saves for the backward pass,
  which grow with the batch and the sequence length, not with the number of models.

:func:`memory_accounting` is the formula (the chapter's exercise). The rest of the module
*measures* the same quantities on real models on the CPU, so the formula can be checked:
:func:`count_parameters`, :func:`optimizer_state_bytes`, :func:`saved_activation_bytes`
(the bytes of every tensor autograd saves, through
``torch.autograd.graph.saved_tensors_hooks``) and :func:`measure_training_memory`, which
runs one training step of a trainer and fills one row per model. :func:`kv_cache_bytes`
and :func:`flops_per_token` carry the argument to language-model sizes.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import torch
from torch import nn

from course_lib import _validate

DTYPE_BYTES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2}
"""Bytes per number of each storage type (bf16 and fp16 are 16 bits: 2 bytes)."""
ACCOUNT_KEYS = ("actor", "critic", "reference", "reward", "optimizer", "total")
"""The rows of :func:`memory_accounting`'s result, in the order the chapter's tables print them."""


# ---------------------------------------------------------------------------
# The formula
# ---------------------------------------------------------------------------


def memory_accounting(
    n_params_actor: int,
    n_params_critic: int = 0,
    n_params_ref: int = 0,
    n_params_reward: int = 0,
    weights_dtype: str = "bf16",
    optimizer_dtype: str = "fp32",
) -> dict[str, int]:
    """Bytes of model state for RL fine-tuning with Adam, per model.

    ============= ======== ============================================================
    row           trained  bytes per parameter
    ============= ======== ============================================================
    ``actor``     yes      weights + gradients, both in ``weights_dtype``
    ``critic``    yes      weights + gradients, both in ``weights_dtype``
    ``reference`` no       weights only (frozen: no gradient, no optimizer state)
    ``reward``    no       weights only
    ``optimizer`` --       for every *trained* parameter: Adam's two moments in
                           ``optimizer_dtype``, plus a master copy of the weights in
                           ``optimizer_dtype`` when ``weights_dtype`` is narrower
    ============= ======== ============================================================

    The master copy is mixed-precision training's (Micikevicius et al. 2018; ZeRO's
    K = 12 bytes of optimizer state per parameter): updates too small for bf16 are
    accumulated in fp32. DeepSpeed, Megatron and FSDP with mixed precision keep one; a
    run that trains directly in fp32 needs none (16 bytes per parameter either way). The
    reward model is counted like the reference: loaded, never trained during RL.

    Args:
        n_params_actor: parameters of the policy being trained.
        n_params_critic: parameters of the value model (0: no critic, as in GRPO).
        n_params_ref: parameters of the frozen reference policy (0: no KL term).
        n_params_reward: parameters of a learned reward model (0: a verifiable reward).
        weights_dtype: storage of the weights and gradients, ``"fp32"``, ``"bf16"``, ``"fp16"`` or ``"fp64"``.
        optimizer_dtype: storage of Adam's moments (and the master copy), same choices.

    Returns:
        ``{"actor", "critic", "reference", "reward", "optimizer", "total"}``, each in bytes (int).
    """
    counts = {
        name: _validate.require_count(name, value)
        for name, value in (
            ("n_params_actor", n_params_actor),
            ("n_params_critic", n_params_critic),
            ("n_params_ref", n_params_ref),
            ("n_params_reward", n_params_reward),
        )
    }
    w = DTYPE_BYTES[_validate.require_choice("weights_dtype", weights_dtype, DTYPE_BYTES)]
    o = DTYPE_BYTES[_validate.require_choice("optimizer_dtype", optimizer_dtype, DTYPE_BYTES)]
    trained = counts["n_params_actor"] + counts["n_params_critic"]
    # Adam: exp_avg and exp_avg_sq, one number each per trained parameter; a master copy when w < o.
    optimizer_bytes_per_param = 2 * o + (o if w < o else 0)
    account = {
        "actor": counts["n_params_actor"] * 2 * w,  # weights + gradients
        "critic": counts["n_params_critic"] * 2 * w,
        "reference": counts["n_params_ref"] * w,  # frozen: weights only
        "reward": counts["n_params_reward"] * w,
        "optimizer": trained * optimizer_bytes_per_param,
    }
    account["total"] = sum(account.values())
    return account


def flops_per_token(
    n_params_actor: int,
    n_params_critic: int = 0,
    n_params_ref: int = 0,
    n_params_reward: int = 0,
    update_epochs: int = 1,
) -> int:
    """Training compute per sampled token, with the usual 2N (forward) and 4N (backward) FLOPs per token.

    Each token is generated by the actor (one forward pass), scored by the frozen models
    (one forward pass each: reference log-prob, reward model) and valued by the critic
    (one forward pass); then every epoch of the update runs a forward and a backward pass
    of each trained model (Kaplan et al. 2020, "Scaling Laws", section 2.1: C = 6N per
    token of training). Attention's extra FLOPs and generation's re-reads are left out.

    Args:
        n_params_actor, n_params_critic, n_params_ref, n_params_reward: as in :func:`memory_accounting`.
        update_epochs: passes of the update over each batch (PPO's K; GRPO's steps per batch).

    Returns:
        FLOPs per token (int).
    """
    n_actor, n_critic, n_ref, n_reward = (
        _validate.require_count(name, value)
        for name, value in (
            ("n_params_actor", n_params_actor),
            ("n_params_critic", n_params_critic),
            ("n_params_ref", n_params_ref),
            ("n_params_reward", n_params_reward),
        )
    )
    if isinstance(update_epochs, bool) or not isinstance(update_epochs, int) or update_epochs < 1:
        raise ValueError(f"update_epochs: expected an int >= 1, got {update_epochs!r}")
    inference = 2 * (n_actor + n_critic + n_ref + n_reward)  # sample, value, reference log-prob, reward
    return inference + update_epochs * 6 * (n_actor + n_critic)


def kv_cache_bytes(
    n_tokens: int, n_layers: int = 32, n_kv_heads: int = 32, head_dim: int = 128, dtype: str = "bf16"
) -> int:
    """Bytes of the key-value cache that generation keeps for ``n_tokens`` tokens in flight.

    Two tensors (keys and values) per layer, ``n_kv_heads * head_dim`` numbers per token
    each. The defaults are Llama-2-7B's (32 layers, 32 heads of 128): 0.5 MiB per token in bf16.

    Args:
        n_tokens: tokens held at once (batch size times sequence length).
        n_layers, n_kv_heads, head_dim: the transformer's shape.
        dtype: storage of the cache.
    """
    for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim)):
        if _validate.require_count(name, value) < 1:
            raise ValueError(f"{name}: expected a positive int, got {value}")
    n_tokens = _validate.require_count("n_tokens", n_tokens)
    bytes_per_number = DTYPE_BYTES[_validate.require_choice("dtype", dtype, DTYPE_BYTES)]
    return 2 * n_layers * n_kv_heads * head_dim * bytes_per_number * n_tokens


# ---------------------------------------------------------------------------
# Measuring the same quantities on real models
# ---------------------------------------------------------------------------


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Parameters of a model and their bytes: weights, and gradients where they exist now.

    Returns:
        ``{"params", "trainable", "weights", "gradients"}``: all parameters, those with
        ``requires_grad``, the bytes of the weights, and the bytes of the ``.grad`` tensors
        present (0 before the first backward pass, and always 0 for a frozen model).
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    params = list(model.parameters())
    return {
        "params": sum(p.numel() for p in params),
        "trainable": sum(p.numel() for p in params if p.requires_grad),
        "weights": sum(p.numel() * p.element_size() for p in params),
        "gradients": sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None),
    }


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in an optimizer's state (Adam: ``exp_avg``, ``exp_avg_sq`` and a ``step`` counter).

    Empty until the first ``optimizer.step()``: PyTorch allocates Adam's moments lazily.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"optimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
    return sum(
        value.numel() * value.element_size()
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    )


def saved_activation_bytes(step: Callable[[], Any], exclude: Iterable[torch.Tensor] = ()) -> tuple[Any, int]:
    """Run ``step()`` and count the bytes of the tensors autograd saves for the backward pass.

    Every tensor an operation saves for its backward passes through the ``pack`` hook of
    ``torch.autograd.graph.saved_tensors_hooks``. Several saved tensors may share one
    storage (a view, or an output that is the next layer's input), so the count is over
    distinct storages, each counted whole. Storages of ``exclude`` (the parameters, which
    :func:`count_parameters` already counts) are left out. When ``step`` also calls
    ``backward()``, the saved tensors are freed after it; their total is the activation
    memory held at the end of the forward pass, the peak of a plain training step.

    Args:
        step: a function of no arguments that runs a forward pass (and usually the backward).
        exclude: tensors whose storage is not an activation (``model.parameters()``).

    Returns:
        ``(step's result, bytes)``.
    """
    if not callable(step):
        raise ValueError(f"step: expected a function of no arguments, got {type(step).__name__}")
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    seen: dict[int, int] = {}  # storage address -> its size in bytes

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in skip and storage.nbytes() > 0:
            seen[storage.data_ptr()] = storage.nbytes()
        return tensor  # kept alive until backward, so no address is reused while we count

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = step()
    return result, sum(seen.values())


def measure_training_memory(
    models: Mapping[str, nn.Module], optimizer: torch.optim.Optimizer, step: Callable[[], Any]
) -> dict[str, dict[str, int]]:
    """Run one training step and account for every byte of model state it leaves, model by model.

    Args:
        models: ``{"actor": ..., "critic": ..., "reference": ...}``, the models the algorithm
            keeps (trained ones are those with ``requires_grad`` parameters).
        optimizer: the optimizer of the trained models, fresh (its state appears at the first step).
        step: runs one training step (forward, backward, ``optimizer.step()``) of those models.

    Returns:
        ``{row: {"params": int, "bytes": int}}`` with one row per model (weights plus
        gradients), then ``"optimizer"`` (its state), ``"activations"`` (saved for the
        backward, :func:`saved_activation_bytes`) and ``"total"``.
    """
    if not isinstance(models, Mapping) or not models:
        raise ValueError("models: expected a non-empty dict of name -> torch.nn.Module")
    for name, model in models.items():
        if not isinstance(model, nn.Module):
            raise ValueError(f"models[{name!r}]: expected a torch.nn.Module, got {type(model).__name__}")
    parameters = [p for model in models.values() for p in model.parameters()]
    _, activations = saved_activation_bytes(step, exclude=parameters)
    rows = {}
    for name, model in models.items():
        counted = count_parameters(model)
        rows[name] = {"params": counted["params"], "bytes": counted["weights"] + counted["gradients"]}
    trained = {id(p): p.numel() for model in models.values() for p in model.parameters() if p.requires_grad}
    rows["optimizer"] = {"params": sum(trained.values()), "bytes": optimizer_state_bytes(optimizer)}
    rows["activations"] = {"params": 0, "bytes": activations}
    rows["total"] = {
        "params": sum(rows[name]["params"] for name in models),
        "bytes": sum(row["bytes"] for row in rows.values()),
    }
    return rows


def format_memory_tables(tables: Mapping[str, Mapping[str, Mapping[str, int]]]) -> str:
    """Side-by-side text table of :func:`measure_training_memory` results, one column pair per algorithm.

    Args:
        tables: ``{algorithm: rows}``; a row an algorithm lacks (GRPO's critic) prints as ``-``.
    """
    if not isinstance(tables, Mapping) or not tables:
        raise ValueError("tables: expected a non-empty dict of algorithm -> rows")
    names = list(dict.fromkeys(name for rows in tables.values() for name in rows if name != "total")) + ["total"]
    lines = [
        f"{'':<13}" + "".join(f"{label:>26}" for label in tables),
        f"{'':<13}" + "".join(f"{'params':>12}{'bytes':>14}" for _ in tables),
    ]
    for name in names:
        cells = []
        for rows in tables.values():
            row = rows.get(name)
            params = "" if row is None or not row["params"] or name == "activations" else f"{row['params']:,}"
            cells.append(f"{'-':>26}" if row is None else f"{params:>12}{row['bytes']:>14,}")
        lines.append(f"{name:<13}" + "".join(cells))
    return "\n".join(lines)
