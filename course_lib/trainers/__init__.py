"""Trainers: short, seeded loops over the pure functions of ``ppo`` and ``grpo``.

- ``PPOTrainer`` (``ppo_trainer.py``): collect experience, GAE, clipped updates with a critic.
- ``GRPOTrainer`` (``grpo_trainer.py``): sample a group per prompt, group-relative advantages, clipped updates.

Each returns a history (per step: mean reward, loss, KL, clip fraction, and for PPO the
value loss) that ``course_lib.plotting`` draws.
"""

from __future__ import annotations


def __getattr__(name):
    # Imported on first use, so `import course_lib.trainers` stays cheap and the two
    # trainers can be read (and written) independently.
    if name in {"PPOTrainer", "PPOTrainerConfig"}:
        from course_lib.trainers import ppo_trainer

        return getattr(ppo_trainer, name)
    if name in {"GRPOTrainer", "GRPOTrainerConfig"}:
        from course_lib.trainers import grpo_trainer

        return getattr(grpo_trainer, name)
    raise AttributeError(f"module 'course_lib.trainers' has no attribute {name!r}")
