"""Trainers: short, seeded loops over the pure functions of ``policy_gradient``, ``ppo`` and ``grpo``.

- ``PGTrainer`` (``pg_trainer.py``, chapter 02): sample a group per prompt, reward it, REINFORCE steps. The
  skeleton: a config dataclass, a history dataclass, ``generate_group_outputs``, ``compute_rewards``,
  ``training_step`` and ``train``. ``train_sorting_pg`` is the lecture's entry point, a thin wrapper.
- ``PPOTrainer`` (``ppo_trainer.py``, chapter 05): collect experience (``rollout.py``), GAE, clipped updates with
  a critic (``PPOLoss``), with the same config and history pattern, in the environments of ``envs.py``.
- ``GRPOTrainer`` (``grpo_trainer.py``, chapter 06): ``PGTrainer`` with group-relative advantages, the
  sampling policy's and the reference's log-probs held for the batch, and ``grpo_loss``.

Each returns a history (per round or update: mean reward, loss, KL, clip fraction, and for PPO the
value loss) that ``course_lib.plotting`` draws.
"""

from __future__ import annotations


def __getattr__(name):
    # Imported on first use, so `import course_lib.trainers` stays cheap and the
    # trainers can be read (and written) independently.
    if name in {"PGTrainer", "PGTrainerConfig"}:
        from course_lib.trainers import pg_trainer

        return getattr(pg_trainer, name)
    if name in {"PPOTrainer", "PPOTrainerConfig"}:
        from course_lib.trainers import ppo_trainer

        return getattr(ppo_trainer, name)
    if name in {"GRPOTrainer", "GRPOTrainerConfig"}:
        from course_lib.trainers import grpo_trainer

        return getattr(grpo_trainer, name)
    raise AttributeError(f"module 'course_lib.trainers' has no attribute {name!r}")
