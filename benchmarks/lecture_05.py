"""Regenerate ``course_lib/lectures/data/lecture_05.json``: notebook 05's three training runs, which it only loads.

The notebook's own cells, in its order and with its settings (seed 0, one torch thread):

1. PPO on CartPole-v1 (cells ``ppo05-cartpole-make`` to ``ppo05-cartpole-train``): one rollout and one
   update by hand, then ``trainer.train(env, num_updates=30)``;
2. the same start trained 15 updates with the right ratio and with the two wrong ones
   (``ppo05-pitfalls-run``);
3. PPO on the sorting task with ``kl_coef`` 0.05 and 0.5, 60 updates each (``ppo05-lm-train``), and one
   response of the second run after training, token by token (``ppo05-lm-tokens``).

Every history is stored whole (6 significant digits), the file is about 20 kB.

Usage::

    python benchmarks/lecture_05.py              # 17 s of CPU (55 s with the 2 cores shared, load 15)
    python benchmarks/lecture_05.py --quick --out /tmp/l05.json   # 3 updates per run: checks the script

The last line printed is ``total_seconds=...``.
"""

from __future__ import annotations

import os
import time

import torch
from _results import DATA, refuse_overwrite, results_parser, write_results  # benchmarks/_results.py

from course_lib import ppo
from course_lib.lectures.lecture_runs import history_to_json, rounded
from course_lib.models import SortingPolicy
from course_lib.tasks import sorting_prompts
from course_lib.trainers import PPOTrainer, PPOTrainerConfig
from course_lib.trainers.ppo_trainer import GymVectorEnv, SortingEnv, cartpole_models, sorting_ppo_models

OUT = DATA / "lecture_05.json"
SEED = 0
DIGITS = 6


# The two wrong losses of cell ppo05-pitfalls-fns, as the notebook shows them.
def attached_ratio_loss(logp, logp_old, adv, clip_eps):
    # WRONG: the "old" log-probs recomputed in the update from the same forward pass, and not detached.
    logp_old = logp
    ratio = torch.exp(logp - logp_old)
    return -torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv).mean(), {}


def quotient_ratio_loss(logp, logp_old, adv, clip_eps):
    # WRONG: a quotient of log-probabilities is not a ratio of probabilities.
    ratio = logp / logp_old
    return -torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv).mean(), {}


def cartpole_runs(updates: int, pitfall_updates: int) -> dict:
    """Section 4's run after its update by hand, and section 5's three ratios from the same start."""
    config = PPOTrainerConfig(num_steps=128, update_epochs=4, num_minibatches=4, lr=1e-3, ent_coef=0.01, seed=SEED)
    env = GymVectorEnv("CartPole-v1", num_envs=8)
    actor, critic = cartpole_models(hidden=64, seed=SEED)
    trainer = PPOTrainer(actor, critic, None, clip_epsilon=0.2, gamma=0.99, lam=0.95, config=config)
    rollout = trainer.collect_experiences(env)  # the notebook's first rollout and update, by hand
    advantages, returns = trainer.compute_advantages(rollout)
    trainer.update_policy(rollout, advantages, returns)
    history = trainer.train(env, num_updates=updates, progress=False)

    pitfalls = {}
    for label, loss_fn in (
        ("right: exp(logp - logp_old)", ppo.clipped_surrogate_loss),
        ("logp_old attached", attached_ratio_loss),
        ("logp / logp_old", quotient_ratio_loss),
    ):
        actor_p, critic_p = cartpole_models(hidden=64, seed=SEED)  # the same start for all three
        trainer_p = PPOTrainer(actor_p, critic_p, None, 0.2, 0.99, 0.95, config=config, policy_loss_fn=loss_fn)
        pitfalls[label] = trainer_p.train(
            GymVectorEnv("CartPole-v1", num_envs=8), num_updates=pitfall_updates, progress=False
        )
    return {"cartpole": history, "pitfalls": pitfalls}


def lm_runs(updates: int) -> dict:
    """Section 6: the sorting task as token-level episodes, two KL coefficients, then one response opened."""
    prompts = sorting_prompts()  # (3, 3): the lecture's prompts, V = 5
    V, T = 5, prompts.shape[1]
    lm_env = SortingEnv(prompts, group_size=8, vocab_size=V)

    def lm_trainer(kl_coef):
        policy = SortingPolicy(V, 10, T, T, generator=torch.Generator().manual_seed(SEED))
        actor_lm, critic_lm, ref_lm = sorting_ppo_models(policy, prompt_length=T, vocab_size=V, hidden=64, seed=SEED)
        lm_config = PPOTrainerConfig(
            num_steps=T,
            gamma=1.0,
            lam=0.95,
            lr=5e-3,
            ent_coef=0.0,
            num_minibatches=2,
            kl_coef=kl_coef,
            kl_kind="k1",
            seed=SEED,
        )
        return PPOTrainer(actor_lm, critic_lm, ref_lm, config=lm_config)

    lm_trainer(0.1).collect_experiences(lm_env)  # the notebook's look at one rollout (cell ppo05-lm-make)
    runs = {}
    for kl_coef in (0.05, 0.5):
        lm = lm_trainer(kl_coef)
        runs[f"kl_coef = {kl_coef}"] = lm.train(lm_env, num_updates=updates, progress=False)
    final = lm.collect_experiences(lm_env)  # the kl_coef = 0.5 run, after training
    token_adv, _ = lm.compute_advantages(final)  # (N, T)
    tokens = {
        "prompt": final.obs[0, 0, :T].tolist(),
        "response": final.actions[0].tolist(),
        "score": rounded(final.rewards[0, -1].item(), DIGITS),
        "rewards": rounded(lm.shaped_rewards(final)[0].tolist(), DIGITS),
        "values": rounded(final.values[0].tolist(), DIGITS),
        "advantages": rounded(token_adv[0].tolist(), DIGITS),
    }
    return {"lm": runs, "lm_tokens": tokens}


def main(argv=None) -> dict:
    parser = results_parser(__doc__, OUT, quick="3 updates per run, to check the script works")
    args = parser.parse_args(argv)
    refuse_overwrite(parser, args, OUT, args.quick)
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    cartpole = cartpole_runs(*((3, 3) if args.quick else (30, 15)))
    print(f"CartPole: {time.perf_counter() - start:.0f} s", flush=True)
    lm = lm_runs(3 if args.quick else 60)
    total = time.perf_counter() - start

    def as_json(value):
        if isinstance(value, dict):
            return {key: as_json(v) for key, v in value.items()}
        return history_to_json(value, DIGITS)

    results = {
        "cartpole": as_json(cartpole["cartpole"]),
        "pitfalls": as_json(cartpole["pitfalls"]),
        "lm": as_json(lm["lm"]),
        "lm_tokens": lm["lm_tokens"],
    }
    last5 = [v for v in cartpole["cartpole"].mean_return if v == v][-5:]
    print(f"CartPole, mean return of the last 5 updates: {sum(last5) / len(last5):.1f}")
    for label, run in lm["lm"].items():
        last10 = run.mean_return[-10:]
        print(f"sorting, {label}: mean return of the last 10 updates {sum(last10) / len(last10):.2f}")
    return write_results(
        args.out,
        "lecture_05.py",
        total,
        results,
        seed=SEED,
        load_average=round(load, 1),
        cartpole_updates=len(cartpole["cartpole"].steps),
        lm_updates=len(lm["lm"]["kl_coef = 0.5"].steps),
    )


if __name__ == "__main__":
    main()
