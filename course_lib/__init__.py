"""course_lib: the library behind the course "From Policy Gradients to GRPO".

The tree is the course's map. Chapter by chapter (``lectures/`` holds each chapter's experiments,
``checks/`` mirrors the maths modules with the exercises' autograder checks, and ``checks.<module>_mistakes``
holds the classic wrong implementations that a long check names):

- 00 welcome ........ ``lectures.warmup`` (discounted return, reward-to-go); ``checks`` (the shared machinery;
  ``checks.recording``: record in the grading kernel, judge in the grader)
- 01 RL for LMs ..... ``tasks`` (the sorting and math tasks), ``rewards`` (verifiable rewards and their hacks)
- 02 policy gradient  ``policy_gradient`` (log-probs, REINFORCE), ``models`` (the sorting policy),
                      ``lectures.mc_gradient``, ``lectures.trajectory`` (reward-to-go), ``trainers.pg_trainer``
                      (REINFORCE on the sorting task)
- 03 baselines ...... ``baselines`` (deltas in three modes), ``lectures.bandits``, ``lectures.estimators``
                      (per-sample gradients, the optimal baseline), ``lectures.variance``
- 04 GAE ............ ``gae`` (TD residuals, GAE, truncation), ``lectures.chain`` (a chain with known values)
- 05 PPO ............ ``ppo`` (ratio, clip, value loss, ``PPOLoss``), ``kl`` (KL estimators k1, k2, k3),
                      ``trainers.ppo_trainer``, ``trainers.rollout``, ``trainers.envs``, ``lectures.pitfalls``
                      (wrong versions beside the right ones)
- 06 GRPO ........... ``grpo`` (group advantages, aggregation, ``grpo_loss``), ``trainers.grpo_trainer``,
                      ``lectures.sorting_variants`` (held-out prompts, moving reference, expert iteration)
- 07 GRPO vs PPO .... ``lectures.compare``, ``lectures.cartpole``, ``lectures.memory``, ``lectures.sweep``,
                      ``lectures.budget_sweep``
- 08 capstone ....... ``tiny_lm`` (tokenizer, tiny transformer, ``generate``, ``ValueModel``, checkpoints),
                      ``lm_sampling`` (completions, the completion mask, per-token log-probs and values),
                      ``lm_rl_config`` (``LMRLConfig``: the loop's hyperparameters, presets ``.grpo()`` and ``.ppo()``),
                      ``lm_rl`` (the one LM RL loop: GRPO or PPO with a value model, for any causal LM; chapters 08-11),
                      ``lectures.capstone`` (warm-up, the benchmark's runs, the exercise's ``grpo_step``)
- 09 scaling up ..... ``hf`` (``lm_rl`` on Hugging Face models: ``hf.tiny``, ``hf.data``, ``hf.loop``,
                      ``python -m course_lib.hf``; ``hf.export``, ``hf.learning``; TRL: ``hf.trl_grpo``,
                      ``hf.distributed``, ``hf.trl_contract``, ``hf.agreement``, ``hf.mapping``)
- 10 longer answers . ``tasks_reasoning`` (addition with a scratchpad or filler, its verifier and styles),
                      ``lectures.reasoning`` (pass@k, per-token weights, style share, the warm-up),
                      ``lectures.reasoning_stats`` (samples measured: styles, work and answer, pass@k),
                      ``lectures.reasoning_rl`` (GRPO on it), ``lectures.critic`` (GRPO against PPO on
                      it: the shipped report read)
- 11 GRPO family .... ``family`` (RLOO, REINFORCE++, DAPO's parts, GSPO, CISPO, GMPO, SAPO as small functions;
                      TRL agreement in ``hf.agreement``), ``policy_losses`` (their per-token losses with one
                      signature: the loop's table), ``family_diagnostics`` (what each loss silences),
                      ``lectures.family`` (the variants and testbeds), ``lectures.group_estimators`` (each advantage
                      against the exact gradient), ``lectures.family_testbeds`` (length, sparse reward, drift),
                      ``lectures.family_claims`` (each claim and its verdict), ``lectures.family_results``
                      (the tables), ``lectures.family_v2`` (the second round: matched rates, Holm),
                      ``lectures.family_before`` (the runs from before the protocol)

Shared helpers: ``_validate`` (argument checks that raise ``ValueError`` naming the argument), ``masked``
(masked means and sums) and ``_threads`` (the ``one_thread()`` context). ``plotting`` draws every figure
(``plotting.widgets`` wraps them in sliders); ``authoring`` holds the instructor's tools
(``python -m course_lib.build``, ``python -m course_lib.grade``).
"""

__version__ = "0.1.0"
