"""course_lib: the library behind the course "From Policy Gradients to GRPO".

One module per concept, in the order the course teaches them:

- ``policy_gradient``: log-probs of sampled tokens and the REINFORCE loss;
- ``baselines``: rewards, centred rewards and normalised rewards as deltas;
- ``gae``: TD residuals and generalised advantage estimation;
- ``ppo``: the importance ratio, the clipped surrogate, the value loss, ``PPOLoss``;
- ``grpo``: group-relative advantages, KL estimators, loss aggregation, ``GRPOLoss``;
- ``tiny_lm`` (chapter 08): a character tokenizer and a tiny decoder-only transformer, ``generate``
  with EOS stops, the completion mask, log-probs of completion tokens, checkpoints; ``capstone``
  trains it on addition (warm-up, GRPO through ``GRPOTrainer``, PPO with a value head) and
  ``tiny_lm_checks`` holds its exercise checks.

``checks`` holds the autograder machinery that every exercise check uses, and
``build`` turns the authored ``solutions/`` notebooks into the student ``exercises/``.
"""

__version__ = "0.1.0"
