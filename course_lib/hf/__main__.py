"""``python -m course_lib.hf``: the course's GRPO loop on a Hugging Face model, from the command line.

    python -m course_lib.hf --model Qwen/Qwen2.5-0.5B-Instruct --task arithmetic --iterations 200 \\
        --group-size 8 --device cuda --lr 1e-6 --max-new-tokens 256 --output-dir runs/qwen

    python -m course_lib.hf.tiny /tmp/tiny-qwen          # an offline tiny model to try it on a CPU
    python -m course_lib.hf --model /tmp/tiny-qwen --iterations 20 --group-size 8 --device cpu

Every bad argument is a ``ValueError`` naming it, raised before training starts.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, fields

from course_lib.hf.loop import HFGRPOConfig
from course_lib.lm_rl_config import LMRLConfig


def build_parser() -> argparse.ArgumentParser:
    defaults = HFGRPOConfig()
    p = argparse.ArgumentParser(prog="python -m course_lib.hf", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a folder written by save_pretrained, or a hub id")
    p.add_argument("--task", default="arithmetic", help="the task (arithmetic word problems)")
    p.add_argument(
        "--dataset", default=None, help="a JSONL file of {question, answer} lines, instead of generated problems"
    )
    p.add_argument("--num-problems", type=int, default=64, help="generated problems when no --dataset")
    p.add_argument("--device", default="cpu", help="cpu or cuda (cuda runs under bf16 autocast)")
    p.add_argument("--output-dir", default=None, help="checkpoints go here (checkpoint-<step>); none when omitted")
    p.add_argument("--history", default=None, help="write the history to this JSON file")
    p.add_argument(
        "--rewards", default=None, help='reward weights as JSON, e.g. \'{"answer": 1.0, "answer_format": 0.5}\''
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--save-every", type=int, default=defaults.save_every, help=f"(default {defaults.save_every})")
    for f in fields(LMRLConfig):  # every hyperparameter of the loop, with the Hugging Face loop's defaults
        flag = "--" + f.name.replace("_", "-")
        value = getattr(defaults.rl, f.name)
        if value is None:  # optional numbers (clip_eps_high, micro_batch_size, max_completions)
            number = int if str(f.type).startswith("int") else float
            p.add_argument(flag, type=number, default=None, help="(default: none)")
        elif isinstance(value, bool):
            p.add_argument(
                flag, type=lambda s: s.lower() in ("1", "true", "yes"), default=value, help=f"(default {value})"
            )
        else:
            p.add_argument(flag, type=type(value), default=value, help=f"(default {value})")
    return p


def config_from_args(args: argparse.Namespace) -> HFGRPOConfig:
    """The validated hyperparameters of :func:`build_parser`'s arguments (``python -m course_lib.hf`` and
    ``python -m course_lib.hf.trl_grpo`` alike): bad ones fail before any model is loaded."""
    rl = LMRLConfig(**{f.name: getattr(args, f.name) for f in fields(LMRLConfig)})
    config = HFGRPOConfig(rl=rl, save_every=args.save_every)
    if args.rewards is not None:
        config.reward_weights = json.loads(args.rewards)
    return config.validate()


def main(argv=None):
    args = build_parser().parse_args(argv)
    from course_lib.hf import data, loop

    config = config_from_args(args)
    problems = data.load_problems(args.task, n=args.num_problems, seed=config.rl.seed, dataset=args.dataset)
    model, tokenizer = loop.load_model_and_tokenizer(args.model, device=args.device)
    loop.check_prompt_lengths(
        [data.format_prompt(q, tokenizer) for q, _ in problems],
        tokenizer,
        model,
        config.rl.max_new_tokens,
        name="dataset" if args.dataset else "num_problems",
    )
    history = loop.train(model, tokenizer, problems, config, output_dir=args.output_dir, progress=not args.no_progress)
    if args.history:
        with open(args.history, "w") as f:
            json.dump(asdict(history), f, indent=1)
    print(
        f"mean reward: first step {history.mean_reward[0]:.3f}, last step {history.mean_reward[-1]:.3f}; "
        f"checkpoint: {history.checkpoint}"
    )
    return history


if __name__ == "__main__":
    main()
