"""The trajectory policy gradient and the reward-to-go, on a policy of independent steps.

A trajectory ``tau = (a_0, .., a_{T-1})`` earns a reward ``r_t`` at every step. The
log-derivative trick (chapter 02) applied to the whole trajectory gives

    grad J = E[ R(tau) * sum_t grad log pi(a_t | s_t) ],      R(tau) = sum_t r_t.

An action cannot change a reward that was paid before it: for ``k < t``,
``E[r_k grad log pi(a_t | s_t)] = E[r_k E_{a_t}[grad log pi(a_t | s_t)]] = 0`` (the
baseline argument of chapter 03, with ``r_k`` as the baseline). Dropping those terms
leaves the **reward-to-go** ``G_t = sum_{k >= t} r_k`` as the weight of step ``t``:

    grad J = E[ sum_t G_t * grad log pi(a_t | s_t) ],

unbiased and less noisy. With an outcome reward, paid once at the last step, ``G_t = R``
for every ``t``: every token of a response is weighted by the response's reward, which is
what the sorting loops of chapters 02 to 06 do.

The policy here is the smallest one with steps: at step ``t`` it draws ``a_t`` from
``softmax(logits[t])``, independently of the other steps, and earns
``step_rewards[t, a_t]``. Its exact gradient is ``pi_t * (r_t - E_t[r_t])`` per step, so
both estimators can be checked against it. Shapes: ``T`` steps, ``V`` actions, ``n`` samples.
"""

from __future__ import annotations

import torch

from course_lib import _validate
from course_lib.lectures.warmup import reward_to_go

WEIGHTS = ("return", "reward_to_go")


def _require_tables(logits: torch.Tensor, step_rewards: torch.Tensor) -> None:
    _validate.require_tensor("logits", logits)
    if logits.dim() != 2:
        raise ValueError(f"logits: expected shape (T, V), got {tuple(logits.shape)}")
    _validate.require_same_shape("step_rewards", step_rewards, "logits", logits)


def exact_trajectory_gradient(logits: torch.Tensor, step_rewards: torch.Tensor) -> torch.Tensor:
    """Gradient of ``J = sum_t E_{a_t ~ pi_t}[step_rewards[t, a_t]]`` with respect to the logits.

    Args:
        logits: ``(T, V)`` the policy's scores at every step.
        step_rewards: ``(T, V)`` the reward of action ``v`` at step ``t``.

    Returns:
        ``(T, V)`` ``pi_t * (r_t - sum_v pi_t[v] r_t[v])``, step by step.
    """
    _require_tables(logits, step_rewards)
    pi = torch.softmax(logits, dim=-1)  # (T, V)
    return pi * (step_rewards - (pi * step_rewards).sum(-1, keepdim=True))  # (T, V)


def trajectory_gradient_estimates(
    logits: torch.Tensor,
    step_rewards: torch.Tensor,
    n_samples: int,
    weights: str = "reward_to_go",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One REINFORCE estimate of the gradient per sampled trajectory.

    Args:
        logits: ``(T, V)`` the policy's scores at every step.
        step_rewards: ``(T, V)`` the reward of action ``v`` at step ``t``.
        n_samples: ``n``, trajectories to sample.
        weights: ``"return"`` weights every step's score by ``R(tau)``; ``"reward_to_go"`` by ``G_t``.
        generator: ``torch.Generator`` for the sampling.

    Returns:
        ``(n, T, V)``: ``weight_t * (onehot(a_t) - pi_t)`` for every trajectory and step.
    """
    _require_tables(logits, step_rewards)
    _validate.require_int("n_samples", n_samples, minimum=1)
    _validate.require_choice("weights", weights, WEIGHTS)
    T, V = logits.shape
    pi = torch.softmax(logits, dim=-1)  # (T, V)
    actions = torch.multinomial(pi, n_samples, replacement=True, generator=generator).T  # (n, T)
    rewards = step_rewards[torch.arange(T), actions]  # (n, T): r_t of each trajectory
    if weights == "return":
        w = rewards.sum(-1, keepdim=True).expand(-1, T)  # (n, T): R(tau) at every step
    else:
        w = reward_to_go(rewards, 1.0)  # (n, T): G_t, the rewards from step t on
    score = torch.nn.functional.one_hot(actions, V).to(pi.dtype) - pi  # (n, T, V): grad log pi_t(a_t)
    return w[..., None] * score  # (n, T, V)
