"""How many environment steps and seconds PPOTrainer needs to solve CartPole-v1, over several seeds.

    python benchmarks/cartpole_ppo.py --seeds 3 --max-steps 300000

CartPole-v1 counts as solved at a mean return of 475 (its episodes are cut at 500 steps).
The check here: after each update, once the last 10 training episodes average at least
475, the policy (sampling, as it trains) plays 10 fresh evaluation episodes; the seed is
solved when those average at least 475 too. The steps are the training steps taken so
far, over all environments; the seconds are wall time, evaluations included.

Prints one line per seed, then ``median_steps=... median_seconds=...`` (a seed that does
not solve within --max-steps counts as --max-steps steps and its full time).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import deque

import torch

from course_lib.trainers.ppo_trainer import GymVectorEnv, PPOTrainer, PPOTrainerConfig, cartpole_models, evaluate_policy

SOLVED = 475.0


def run_seed(seed: int, max_steps: int, num_envs: int, config: PPOTrainerConfig) -> tuple[int, float, bool]:
    """Train one seed until solved or ``max_steps``; return (steps, seconds, solved)."""
    start = time.perf_counter()
    env, eval_env = GymVectorEnv("CartPole-v1", num_envs), GymVectorEnv("CartPole-v1", 10)
    actor, critic = cartpole_models(hidden=64, seed=seed)
    trainer = PPOTrainer(actor, critic, None, config=config)
    recent = deque(maxlen=10)  # the last 10 training episodes
    solved = False
    while trainer.total_steps < max_steps and not solved:
        rollout = trainer.collect_experiences(env)
        advantages, returns = trainer.compute_advantages(rollout)
        trainer.update_policy(rollout, advantages, returns)
        recent.extend(rollout.episode_returns)
        if len(recent) == recent.maxlen and sum(recent) / len(recent) >= SOLVED:
            scores = evaluate_policy(actor, eval_env, seed=10_000 + seed)
            solved = sum(scores) / len(scores) >= SOLVED
    env.close()
    eval_env.close()
    return trainer.total_steps, time.perf_counter() - start, solved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds, 0 .. seeds - 1 (default 3)")
    parser.add_argument("--max-steps", type=int, default=300_000, help="give up on a seed after this many steps")
    parser.add_argument("--num-envs", type=int, default=8, help="N, environments stepped together (default 8)")
    parser.add_argument("--lr", type=float, default=PPOTrainerConfig.lr, help="Adam's learning rate")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: fastest for a 64-unit MLP)")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.max_steps < 1 or args.num_envs < 1 or args.threads < 1:
        parser.error("--seeds, --max-steps, --num-envs and --threads must be positive")
    torch.set_num_threads(args.threads)

    steps, seconds = [], []
    for seed in range(args.seeds):
        config = PPOTrainerConfig(lr=args.lr, seed=seed)
        n, s, solved = run_seed(seed, args.max_steps, args.num_envs, config)
        status = "solved" if solved else f"NOT solved within {args.max_steps} steps"
        print(f"seed={seed} steps={n} seconds={s:.1f} {status}", flush=True)
        steps.append(n if solved else args.max_steps)
        seconds.append(s)
    print(f"median_steps={statistics.median(steps):.0f} median_seconds={statistics.median(seconds):.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
