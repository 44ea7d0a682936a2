"""The same run in TRL: the course's task and rewards, trained by TRL's ``GRPOTrainer``.

    python -m course_lib.hf.trl_grpo --model /tmp/tiny-qwen --iterations 20 --group-size 8 --device cpu
    accelerate launch --config_file course_lib/hf/configs/ddp.yaml -m course_lib.hf.trl_grpo --model ... --device cuda

It takes the command-line flags of ``python -m course_lib.hf`` and translates the course's
hyperparameters (:class:`course_lib.hf.loop.HFGRPOConfig`) into TRL's ``GRPOConfig``
(:func:`trl_config`); ``course_lib.hf.mapping`` prints the whole correspondence. Two
differences of bookkeeping, not of maths:

- TRL counts ``per_device_train_batch_size`` in completions, not prompts: ``B * G``;
- one TRL "step" is one optimiser step, so the course's ``iterations`` rounds of
  ``update_epochs`` optimiser steps each are ``max_steps = iterations * update_epochs``
  with ``num_iterations = update_epochs`` (TRL re-uses each generated batch that many times).
"""

from __future__ import annotations

import os

from course_lib.hf import data
from course_lib.hf.loop import HFGRPOConfig
from course_lib.hf.trl_contract import grpo_config_kwargs


def trl_config(
    config: HFGRPOConfig,
    output_dir: str,
    device: str = "cpu",
    num_processes: int = 1,
    progress: bool = True,
    config_class=None,
    **overrides,
):
    """TRL's ``GRPOConfig`` for the course's hyperparameters; ``overrides`` set any other TRL field.

    The batch, the steps, the schedule and the loss are :func:`course_lib.hf.trl_contract.grpo_config_kwargs`'s
    (chapter 09's exercise) on the loop's own config (``config.rl``); what this adds is the
    run's own: where it saves and how often, the reward weights, the device, the logging.

    Args:
        config: the course's hyperparameters.
        output_dir: TRL's checkpoints (``checkpoint-<step>``) go here.
        device: ``"cpu"`` (``use_cpu``) or ``"cuda"`` (``bf16``).
        num_processes: data-parallel processes; each takes ``B / num_processes`` prompts' groups.
        progress: TRL's tqdm bar.
        config_class: a subclass of ``GRPOConfig`` to build instead (TRL's experimental ``GMPOConfig``, say).
    """
    from trl import GRPOConfig

    config = config.validate()
    B = config.rl.prompts_per_step
    if B % num_processes:
        raise ValueError(f"prompts_per_step: expected a multiple of num_processes={num_processes}, got {B}")
    _, weights = data.trl_reward_functions(config.reward_weights)
    # The batch, the steps, the constant schedule and the loss: chapter 09's exercise, on the loop's own config.
    kwargs = grpo_config_kwargs(config.rl, num_processes)
    # None, not clip_eps: TRL then clips the upper side at its own epsilon, so an override of epsilon alone (GMPO's
    # log-space range, chapter 11) moves both sides, as clip_eps does in the course when clip_eps_high is None.
    kwargs["epsilon_high"] = config.rl.clip_eps_high
    kwargs.update(
        output_dir=output_dir,
        top_k=0,
        weight_decay=0.0,
        reward_weights=weights,
        save_steps=config.save_every * config.rl.update_epochs,  # TRL counts optimiser steps, not rounds
        save_total_limit=1,
        logging_steps=1,
        report_to="none",
        use_cpu=device == "cpu",
        bf16=device == "cuda",
        disable_tqdm=not progress,
        dataloader_num_workers=0,
    )
    kwargs.update(overrides)
    return (config_class or GRPOConfig)(**kwargs)


def make_trainer(
    model: str,
    problems,
    config: HFGRPOConfig,
    output_dir: str,
    device: str = "cpu",
    progress: bool = True,
    trainer_class=None,
    config_class=None,
    **overrides,
):
    """TRL's ``GRPOTrainer`` on the course's prompts and rewards, the model loaded by path or hub id.

    Args:
        model: a folder written by ``save_pretrained`` or a hub id.
        problems: ``(question, answer)`` pairs (``course_lib.hf.data.load_problems``).
        config: the course's hyperparameters, translated by :func:`trl_config`.
        output_dir: TRL's output folder.
        device: ``"cpu"`` or ``"cuda"``.
        trainer_class, config_class: subclasses of ``GRPOTrainer`` and ``GRPOConfig`` to build instead (TRL's
            ``trl.experimental.gmpo.GMPOTrainer`` and ``GMPOConfig``: chapter 11's agreement).
        overrides: more ``GRPOConfig`` fields.
    """
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from course_lib.hf.loop import check_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    check_tokenizer(tokenizer)
    tokenizer.padding_side = "left"
    num_processes = int(os.environ.get("WORLD_SIZE", "1"))  # set by accelerate launch
    args = trl_config(
        config,
        output_dir,
        device=device,
        num_processes=num_processes,
        progress=progress,
        config_class=config_class,
        **overrides,
    )
    # The prompts are already chat-templated text, the same strings the course loop sends to generate.
    dataset = Dataset.from_dict(
        {
            "prompt": [data.format_prompt(question, tokenizer) for question, _ in problems],
            "answer": [str(answer) for _, answer in problems],
        }
    )
    functions, _ = data.trl_reward_functions(config.reward_weights)
    trainer = (trainer_class or GRPOTrainer)(
        model=model, reward_funcs=functions, args=args, train_dataset=dataset, processing_class=tokenizer
    )
    if not progress:  # without a bar, transformers prints every log row instead: keep quiet
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    return trainer


def history_from_trl(trainer):
    """The course's history (``course_lib.hf.loop.HFGRPOHistory``) from TRL's log, one entry per generation round."""
    from course_lib.hf.loop import HFGRPOHistory

    history = HFGRPOHistory()
    # TRL logs one row per optimiser step; the rewards only on the first step of each generation round.
    # The course logs a round's reward with the loss, KL and clip fraction of its last update: so do we.
    steps = [row for row in trainer.state.log_history if "loss" in row]
    k = trainer.args.num_iterations
    for start in range(0, len(steps) - k + 1, k):
        first, last = steps[start], steps[start + k - 1]  # a round's k optimiser steps
        history.mean_reward.append(first["reward"])
        history.completion_length.append(first.get("completions/mean_length", float("nan")))
        history.loss.append(last["loss"])
        history.kl.append(last.get("kl", 0.0))
        history.clip_fraction.append(last.get("clip_ratio/region_mean", 0.0))
        history.grad_norm.append(last.get("grad_norm", float("nan")))
        # TRL's step_time: each training_step (generation on a round's first, forward, backward; not the update).
        history.seconds.append(sum(row.get("step_time", float("nan")) for row in steps[start : start + k]))
    return history


def main(argv=None):
    from course_lib.hf.__main__ import build_parser, config_from_args

    parser = build_parser()
    parser.prog = "python -m course_lib.hf.trl_grpo"
    args = parser.parse_args(argv)
    config = config_from_args(args)
    import json

    from course_lib.hf.loop import load_model_and_tokenizer  # the same checks of the model path as the course loop

    load_model_and_tokenizer(args.model, device="cpu")
    problems = data.load_problems(args.task, n=args.num_problems, seed=config.rl.seed, dataset=args.dataset)
    trainer = make_trainer(
        args.model,
        problems,
        config,
        args.output_dir or "trl_grpo_output",
        device=args.device,
        progress=not args.no_progress,
    )
    trainer.train()
    history = history_from_trl(trainer)
    if trainer.accelerator.is_main_process:
        if args.history:
            from dataclasses import asdict

            with open(args.history, "w") as f:
                json.dump(asdict(history), f, indent=1)
        print(
            f"TRL: {trainer.state.global_step} optimiser steps on {trainer.accelerator.num_processes} process(es) "
            f"({trainer.accelerator.distributed_type}); mean reward by round: "
            f"{[round(r, 3) for r in history.mean_reward]}"
        )
    return trainer


if __name__ == "__main__":
    main()
