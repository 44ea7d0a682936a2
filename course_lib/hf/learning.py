"""Chapter 09's learning runs: the capstone's GRPO three ways, from one warmed-up model.

1. the course's loop (:func:`course_lib.lm_rl.train`) on chapter 08's TinyLM;
2. the same loop on the model exported to ``transformers`` (:mod:`course_lib.hf.export`), called
   through ``model.generate`` and ``model(input_ids=..., attention_mask=...)``;
3. TRL's ``GRPOTrainer`` on the exported folder, with :func:`trl_config` translating the loop's config
   and :class:`HeldOutCallback` measuring held-out greedy exact match during training.

All three score completions with the same verifier (``course_lib.tasks.score_completions``, digit-wise
credit plus 1 when exact) and see the same number of completions per round.

Shapes: ``B`` prompts per round, ``G`` completions per prompt, ``L`` completion tokens.
"""

from __future__ import annotations

import dataclasses
import time

import torch

from course_lib import lm_rl
from course_lib.hf.trl_grpo import grpo_config
from course_lib.lectures import capstone
from course_lib.tasks import AdditionTask, score_completions

CHAPTER_09_RECIPE = {"iterations": 150, "num_minibatches": 1, "clip_eps_high": None}
"""Chapter 09's own recipe: chapter 08's loop config as it stood when chapter 09's runs were made (one minibatch
per pass, the ratio clipped symmetrically), on 150 rounds instead of chapter 08's 300, so that nine runs (three ways
x three seeds) fit a shared 2-core machine. Chapter 08 later took two minibatches per pass and DAPO's clip-higher;
chapter 09's results are this recipe's, and ``benchmarks/hf_learning.py`` regenerates them with it."""


def chapter_09_config() -> capstone.CapstoneConfig:
    """Chapter 08's task and warm-up with :data:`CHAPTER_09_RECIPE` for the loop."""
    cfg = capstone.CapstoneConfig()
    return dataclasses.replace(cfg, rl=dataclasses.replace(cfg.rl, **CHAPTER_09_RECIPE))


REWARD_PARTS = ("digits", "exact")
"""The capstone's reward ``"digits+exact"`` as two TRL reward functions of weight 1: TRL sums them, as the
loop's verifier does, and logs each one (``rewards/digits/mean``, ``rewards/exact/mean``)."""


def trl_config(rl: lm_rl.LMRLConfig, output_dir: str, pad_id: int, **overrides):
    """TRL's ``GRPOConfig`` for the loop's config ``rl`` (GRPO, one minibatch per pass).

    :func:`course_lib.hf.trl_grpo.grpo_config`: the batch, the steps, the schedule and the loss are
    :func:`course_lib.hf.trl_contract.grpo_config_kwargs`'s (chapter 09's exercise): with one minibatch,
    ``per_device_train_batch_size = B * G`` completions, ``steps_per_generation = 1``,
    ``num_iterations = update_epochs`` and ``max_steps = iterations * update_epochs``
    (a linear schedule over those steps: the loop's decays once per round, TRL's once per optimiser step, a
    difference of at most one round's decay). What this adds is the run's own: the loop's Adam betas, the
    sampler's PAD, the reward weights, a quiet CPU run without dropout and without saving.
    """
    rl = rl.validate()
    # run_trl counts a round as update_epochs optimiser steps (its held-out clock, its iteration axis), so this run
    # keeps one minibatch per pass; grpo_config_kwargs itself maps any number.
    if rl.algo != "grpo" or rl.num_minibatches != 1 or rl.adv_estimator != "grpo" or rl.policy_loss != "clip":
        raise ValueError("rl: only the plain GRPO recipe (one minibatch, grpo advantages, clipped loss) is mapped")
    run = dict(
        adam_beta1=0.9,  # the loop's Adam, spelled out
        adam_beta2=0.999,
        adam_epsilon=1e-8,
        reward_weights=[1.0] * len(REWARD_PARTS),
        generation_kwargs={"suppress_tokens": [pad_id]},  # TinyLM never writes PAD; neither does the export
        disable_dropout=True,
        gradient_checkpointing=False,
        bf16=False,
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    return grpo_config(rl, output_dir, **{**run, **overrides})


def trl_reward_functions(task: AdditionTask):
    """The verifier as TRL calls a reward function: ``f(prompts, completions, completion_ids, **kw) -> list``.

    It scores the token ids (``completion_ids``, cut after EOS by TRL), not the decoded text, so EOS counts
    exactly as in the loop.
    """
    tok, L = task.tokenizer, task.max_new_tokens
    functions = []
    for part in REWARD_PARTS:

        def reward(prompts, completions, completion_ids, _part=part, **kwargs):
            p = torch.tensor([tok.encode(text) for text in prompts])  # (N, P)
            c = torch.tensor([ids[:L] + [tok.pad_id] * (L - len(ids)) for ids in completion_ids])  # (N, L)
            return score_completions(p, c, tok, _part).tolist()

        reward.__name__ = part  # TRL logs rewards/<__name__>/mean
        functions.append(reward)
    return functions


def held_out_callback(task: AdditionTask, pairs, every_steps: int):
    """A ``TrainerCallback`` that measures greedy exact match on ``pairs`` every ``every_steps`` optimiser steps.

    It keeps its own clock: ``seconds`` counts training only, its evaluations excluded (as the loop's).
    """
    from transformers import TrainerCallback

    class HeldOutCallback(TrainerCallback):
        def __init__(self):
            self.eval = {"step": [], "seconds": [], "score": []}
            self._start, self._eval_seconds = None, 0.0

        def _evaluate(self, state, model):
            t = time.perf_counter()
            was_training = model.training
            model.eval()
            score = capstone.accuracy(model, task, pairs)
            model.train(was_training)
            self._eval_seconds += time.perf_counter() - t
            self.eval["step"].append(state.global_step)
            self.eval["seconds"].append(self.seconds())
            self.eval["score"].append(score)

        def seconds(self) -> float:
            return 0.0 if self._start is None else time.perf_counter() - self._start - self._eval_seconds

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self._evaluate(state, model)
            self._start, self._eval_seconds = time.perf_counter(), 0.0

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % every_steps == 0 or state.global_step == state.max_steps:
                self._evaluate(state, model)

    return HeldOutCallback()


def run_trl(
    model_dir: str,
    task: AdditionTask,
    split: dict,
    rl: lm_rl.LMRLConfig,
    eval_every: int,
    output_dir: str,
    eval_on: str = "heldout",
) -> dict:
    """TRL's ``GRPOTrainer`` on the exported model in ``model_dir``: held-out curve, TRL's log, seconds."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    args = trl_config(rl, output_dir, task.tokenizer.pad_id)
    dataset = Dataset.from_dict({"prompt": [task.prompt_text(a, b) for a, b in split["train"]]})
    callback = held_out_callback(task, split[eval_on], eval_every * rl.update_epochs)
    trainer = GRPOTrainer(
        model=model_dir,
        reward_funcs=trl_reward_functions(task),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[callback],
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    trainer.train()
    log = [row for row in trainer.state.log_history if "loss" in row]
    return {
        "eval": {
            "iteration": [s // rl.update_epochs for s in callback.eval["step"]],
            "seconds": callback.eval["seconds"],
            "score": callback.eval["score"],
        },
        "log": log,
        "seconds": callback.seconds(),
        "iterations": rl.iterations,
    }


def run_course(
    model, task: AdditionTask, split: dict, rl: lm_rl.LMRLConfig, eval_every: int, eval_on: str = "heldout"
) -> dict:
    """The course's loop on ``model`` (TinyLM or the exported ``transformers`` model), trained in place."""
    prompts = task.prompts(split["train"])
    tok = task.tokenizer
    return lm_rl.train(
        model,
        capstone._reward_fn(task, prompts, "digits+exact"),
        prompts,
        rl,
        tok.eos_id,
        tok.pad_id,
        eval_fn=lambda m: capstone.accuracy(m, task, split[eval_on]),
        eval_every=eval_every,
    )


def same_start(lm, hf_model) -> bool:
    """Whether the exported model computes TinyLM's logits on a few prompts (a guard before a comparison)."""
    ids = torch.randint(0, lm.cfg.vocab_size - 2, (4, lm.cfg.block_size))
    with torch.no_grad():
        return bool(torch.allclose(lm(ids), hf_model(input_ids=ids).logits, atol=1e-5))
