"""Benchmark: seconds per GRPO step of the course's Hugging Face loop and of TRL's GRPOTrainer, as a ratio.

Both train the tiny offline Qwen2 (``course_lib.hf.tiny``) on the same arithmetic prompts with
the same hyperparameters (4 prompts x 8 completions, 12 new tokens, 2 updates per batch). They
alternate, ``--repeats`` times each, so load from other programs hits both alike; the per-step
time of a run is its median step (the course loop's own timer; TRL's ``step_time`` summed over
a round's updates). The last line is ``ratio_trl_over_course=X``, the median over repeats.

Usage::

    python benchmarks/hf_loops.py              # 3 repeats of 10 rounds each, about a minute on 2 cores
    python benchmarks/hf_loops.py --repeats 5 --iterations 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from course_lib.hf import data, loop, trl_grpo
from course_lib.hf.tiny import save_tiny_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    model_dir = str(save_tiny_model(tempfile.mkdtemp(prefix="tiny_qwen_")))
    problems = data.load_problems(n=64)
    rl = loop.hf_rl_config(iterations=args.iterations, lr=3e-3, max_new_tokens=12)  # B = 4, G = 8, 2 passes
    config = loop.HFGRPOConfig(rl=rl, save_every=args.iterations)
    ratios = []
    for repeat in range(args.repeats):
        model, tokenizer = loop.load_model_and_tokenizer(model_dir)
        course = loop.train(model, tokenizer, problems, config, progress=False)
        trainer = trl_grpo.make_trainer(model_dir, problems, config, tempfile.mkdtemp(), progress=False)
        trainer.train()
        trl = trl_grpo.history_from_trl(trainer)
        course_s, trl_s = statistics.median(course.seconds), statistics.median(trl.seconds)
        ratios.append(trl_s / course_s)
        print(f"repeat {repeat}: course {course_s:.3f} s/step, TRL {trl_s:.3f} s/step, ratio {ratios[-1]:.2f}")
    print(f"ratio_trl_over_course={statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
