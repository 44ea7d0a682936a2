"""The exercise checks of chapter 09 (TRL): a reward function in TRL's calling convention, the mask and log-probs
of ``model.generate``'s output, a course config as ``GRPOConfig``'s kwargs (references: ``hf.trl_contract``).

Rewards and config fields are not tensors: each check's ``outputs`` turns a reply into named numbers (rewards into a
float tensor with NaN for None; a config field into a number, a string into its index in TRL's names, spelled out in
the label), so the comparison, the known mistakes and grading's record-then-judge work as for every other check.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import torch

from course_lib.checks import Case, Mistake, check_against_reference
from course_lib.hf.trl_contract import LOSS_TYPES, answer_reward, completion_logps, completion_text, grpo_config_kwargs
from course_lib.lm_rl import LMRLConfig
from course_lib.rewards import math_answer_reward

F64 = torch.float64

# ---------------------------------------------------------------------------
# 1. answer_reward(prompts, completions, answer, **kwargs)
# ---------------------------------------------------------------------------


def _reward_list(result) -> dict:
    """A reward function's reply as ``{"rewards": float64 tensor}``; None becomes NaN, as in TRL."""
    if isinstance(result, torch.Tensor):
        raise TypeError(
            "TRL's contract is a Python list with one float (or None) per completion; return "
            "rewards.tolist() rather than a tensor"
        )
    if isinstance(result, (int, float)):
        raise TypeError(
            "one number for the whole batch; TRL needs one reward per completion, a list as long as completions"
        )
    if not isinstance(result, (list, tuple)):
        raise TypeError(f"TRL needs a list of floats, one per completion, got {type(result).__name__}")
    values = []
    for i, reward in enumerate(result):
        if reward is not None and not isinstance(reward, (int, float)):
            raise TypeError(
                f"reward [{i}] is a {type(reward).__name__}; each reward is a float, or None for "
                "no reward (use float(...))"
            )
        values.append(math.nan if reward is None else float(reward))
    return {"rewards": torch.tensor(values, dtype=F64)}


def _reward_cases() -> list[Case]:
    G = 3
    questions = ["What is 5 + 7?", "What is 9 - 2?"]
    texts = ["5 + 7 = 12. Answer: 12", "Answer: 13", "I think it is 12", "Answer: 7", "\\boxed{7}", "7 apples"]
    answers = ["12", "7"]
    plain_prompts = [q for q in questions for _ in range(G)]  # TRL repeats every prompt G times...
    repeated = [a for a in answers for _ in range(G)]  # ...and every column with it
    chat = [[{"role": "user", "content": q}] for q in plain_prompts]
    said = [[{"role": "assistant", "content": t}] for t in texts]
    tools = [
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "calculator", "arguments": {"expression": q.split("is ")[1].rstrip("?")}},
                    }
                ],
            },
            {"role": "tool", "name": "calculator", "content": a},
            {"role": "assistant", "content": f"Answer: {a if i % 2 == 0 else '0'}"},
        ]
        for i, (q, a) in enumerate(zip(plain_prompts, repeated))
    ]
    ids = [[5, 6, 0]] * len(texts)
    extra = {"completion_ids": ids, "trainer_state": None, "level": ["easy"] * len(texts)}
    three = ["What is 1 + 1?", "What is 4 - 2?", "What is 3 + 4?"]
    return [
        Case(
            "B=2 prompts, G=3 plain-text completions each (TRL repeats each answer G times)",
            {"prompts": plain_prompts, "completions": texts, "answer": repeated, **extra},
        ),
        Case(
            "conversational: prompts and completions are lists of messages",
            {"prompts": chat, "completions": said, "answer": repeated, **extra},
        ),
        Case(
            "a tool call: each completion is three messages (call, result, answer); the answer is in the last",
            {"prompts": chat, "completions": tools, "answer": repeated, **extra},
        ),
        Case(
            "rows without an answer (answer None: no reward from this function) beside rows with one",
            {"prompts": plain_prompts, "completions": texts, "answer": ["12", "12", "12", None, None, None], **extra},
        ),
        Case(
            "B=3 prompts, G=2, two prompts with the same answer",
            {
                "prompts": [q for q in three for _ in range(2)],
                "answer": ["2", "2", "2", "2", "7", "7"],
                "completions": ["Answer: 2", "Answer: 3", "Answer: 2", "Answer: 2", "Answer: 2", "Answer: 7"],
                "completion_ids": [[5, 0]] * 6,
            },
        ),
    ]


def _reward_with(*, text=completion_text, none=None, align="same", dedupe=False):
    def wrong(prompts, completions, answer, **kwargs):
        firsts = [i for i, p in enumerate(prompts) if prompts.index(p) == i]  # each distinct prompt once
        if dedupe:  # one reward per prompt
            return [math_answer_reward(text(completions[i]), answer[i]) for i in firsts]
        G = len(completions) // len(firsts) if align == "per_prompt" else 1
        return [
            none if answer[i // G] is None else math_answer_reward(text(c), answer[i // G])
            for i, c in enumerate(completions)
        ]

    return wrong


def _reward_hint(message: str) -> str:
    """A crash of a reward function, explained by how TRL calls it."""
    if "unexpected keyword argument" in message:
        return (
            "TRL calls a reward function with every dataset column and more (completion_ids, trainer_state, "
            "log_extra, log_metric) as keyword arguments: end its signature with **kwargs"
        )
    if "required positional argument" in message or "required keyword" in message:
        return (
            "TRL passes arguments by name only: prompts=, completions=, and each dataset column under its "
            "column's name; a parameter named otherwise (solution, target) is never given: call it answer"
        )
    if "unhashable" in message:
        return (
            "conversational prompts are lists of messages (no set or dict key); TRL already repeated every "
            "column per completion: zip(completions, answer)"
        )
    if "NoneType" in message:
        return "some rows have answer None: return None for them (TRL's 'no reward')"
    if "got list" in message or "'list' object" in message or "'dict' object" in message:
        return "a conversational completion is a list of messages: its text is completion[-1]['content']"
    return ""


def check_answer_reward(fn) -> bool:
    """Check a student's ``answer_reward(prompts, completions, answer, **kwargs)``, called as TRL calls it."""
    mistakes = [
        Mistake(
            "TRL has already repeated each row's columns G times: answer[i] belongs to completions[i]; "
            "indexing answer[i // G] (one answer per prompt) scores completions against other prompts' answers",
            _reward_with(align="per_prompt"),
        ),
        Mistake(
            "one reward per distinct prompt; TRL needs one per completion (B * G): the G completions of a "
            "prompt are scored one by one against the same answer",
            _reward_with(dedupe=True),
        ),
        Mistake(
            "a conversational completion is a list of messages; str() of it is not its text: take "
            "completion[-1]['content']",
            _reward_with(text=lambda c: c if isinstance(c, str) else str(c)),
        ),
        Mistake(
            "the text is in the last message (after a tool call and its result), not the first: "
            "completion[-1]['content']",
            _reward_with(text=lambda c: c if isinstance(c, str) else c[0]["content"]),
        ),
        Mistake(
            "a row with answer None gets 0.0, a punishment; return None: TRL reads it as no reward (NaN) and "
            "leaves it out of the sum over reward functions",
            _reward_with(none=0.0),
        ),
    ]
    try:
        return check_against_reference(
            fn,
            answer_reward,
            _reward_cases(),
            name="answer_reward",
            mistakes=mistakes,
            outputs=_reward_list,
            dtypes=(F64,),
        )
    except AssertionError as error:
        hint = _reward_hint(str(error))
        if hint and "raised" in str(error):
            raise AssertionError(f"{error}\n  {hint}") from None
        raise


# ---------------------------------------------------------------------------
# 2. completion_logps(model, sequences, prompt_mask, eos_id, temperature=1.0)
# ---------------------------------------------------------------------------

EOS, PAD, VOCAB = 0, 1, 40


@functools.lru_cache(maxsize=1)
def _tiny_model():
    """A tiny random Qwen2 (``course_lib.hf.tiny``), built without touching the caller's random state."""
    from course_lib.hf.tiny import build_tiny_model

    with torch.random.fork_rng(devices=[]):
        model = build_tiny_model(
            VOCAB, hidden_size=32, num_layers=1, max_positions=64, seed=9, eos_token_id=EOS, pad_token_id=PAD
        )
    return model.eval()


def _logp_outputs(result) -> dict:
    """``(logp, mask)`` as named tensors: the mask, logp where the mask is 1, and whether logp has a gradient."""
    if not isinstance(result, tuple) or len(result) != 2:
        raise TypeError("return a tuple (logp, mask)")
    logp, mask = result
    if not isinstance(logp, torch.Tensor) or not isinstance(mask, torch.Tensor):
        raise TypeError("logp and mask are tensors")
    mask64 = mask.detach().to(F64)
    valid = logp.detach().to(F64) * mask64 if logp.shape == mask.shape else logp.detach().to(F64)
    return {
        "mask": mask64,
        "logp (where mask is 1)": valid,
        "logp carries a gradient (1 = yes)": torch.tensor(float(logp.requires_grad), dtype=F64),
    }


def _logp_cases() -> list[Case]:
    g = torch.Generator().manual_seed(9)

    def tokens(*shape):
        return torch.randint(2, VOCAB, shape, generator=g)

    # B=3: prompts of 4, 2 and 3 tokens left-padded to P=4; completions end at EOS at t=1, t=3 and never (L=5)
    prompt = tokens(3, 4)
    prompt_mask = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1], [0, 1, 1, 1]])
    prompt[prompt_mask == 0] = PAD
    completion = tokens(3, 5)
    completion[0, 1:] = torch.tensor([EOS, PAD, PAD, PAD])
    completion[1, 3:] = torch.tensor([EOS, PAD])
    padded = torch.cat([prompt, completion], dim=1)  # (3, 9)
    first = completion.clone()
    first[:, 0], first[:, 1:] = EOS, PAD  # every answer empty: EOS first
    as_pad = completion.clone()
    as_pad[as_pad == PAD] = EOS  # Qwen's tokenizer pads with <|endoftext|>, its EOS
    plain = torch.cat([tokens(2, 3), tokens(2, 4)], dim=1)
    plain[1, 5] = EOS
    base = {"prompt_mask": prompt_mask, "eos_id": EOS}
    return [
        Case(
            "B=3, prompts left-padded by 0, 2 and 1 tokens (P=4), EOS at t=1, t=3 and never (L=5)",
            {"sequences": padded, **base},
        ),
        Case("the same at temperature 0.7", {"sequences": padded, **base, "temperature": 0.7}),
        Case(
            "EOS as the first completion token of every row (the mask is the EOS alone)",
            {"sequences": torch.cat([prompt, first], dim=1), **base, "temperature": 1.3},
        ),
        Case(
            "PAD = EOS (Qwen's tokenizer pads with <|endoftext|>): EOS repeated after the first",
            {"sequences": torch.cat([prompt, as_pad], dim=1), **base},
        ),
        Case(
            "no padding, B=2, P=3, L=4, temperature 0.5",
            {"sequences": plain, "prompt_mask": torch.ones(2, 3, dtype=torch.long), "eos_id": EOS, "temperature": 0.5},
        ),
    ]


def _logp_with(*, shift=1, attend=True, where="logits", mask_kind="first", grad=True, log=True):
    def wrong(model, sequences, prompt_mask, eos_id, temperature=1.0):
        P, L = prompt_mask.shape[1], sequences.shape[1] - prompt_mask.shape[1]
        completion = sequences[:, P:]
        attention = torch.cat([prompt_mask.long(), torch.ones_like(completion)], dim=1)
        with torch.set_grad_enabled(grad):
            logits = model(input_ids=sequences, attention_mask=attention if attend else None).logits.float()
            logits = logits[:, P - shift : P - shift + L]  # (B, L, V)
            if where == "logits":
                logits = logits / temperature
            logp = torch.log_softmax(logits, dim=-1)
            if where == "logp":
                logp = logp / temperature
            logp = logp.gather(-1, completion[..., None]).squeeze(-1)  # (B, L)
            if not log:
                logp = logp.exp()
        is_eos, t = (completion == eos_id).long(), torch.arange(L)
        last = torch.where(is_eos.any(-1), (is_eos * t).argmax(-1), torch.full((len(completion),), L - 1))
        mask = {
            "first": (is_eos.cumsum(-1) - is_eos) == 0,
            "without_eos": is_eos.cumsum(-1) == 0,
            "all": torch.ones(completion.shape, dtype=torch.bool),
            "not_eos": completion != eos_id,
            "last": t[None] <= last[:, None],
        }[mask_kind].float()  # "last": through the last EOS
        return logp, mask

    return wrong


def check_completion_logps(fn) -> bool:
    """Check a student's ``completion_logps(model, sequences, prompt_mask, eos_id, temperature=1.0)``."""
    model = _tiny_model()
    cases = [Case(c.description, {"model": model, **c.kwargs}) for c in _logp_cases()]
    mistakes = [
        Mistake(
            "no shift: each token is scored by the logits at its own position, which predict the NEXT "
            "token; the logits at P - 1 + t score completion token t: logits[:, P - 1:-1]",
            _logp_with(shift=0),
        ),
        Mistake(
            "the mask leaves out the EOS; stopping is an action the policy took: keep every token up to and "
            "including the first EOS, (cumsum(is_eos) - is_eos) == 0",
            _logp_with(mask_kind="without_eos"),
        ),
        Mistake(
            "the mask counts the tokens after EOS (padding the policy never chose): stop after the first EOS",
            _logp_with(mask_kind="all"),
        ),
        Mistake(
            "the mask is 'token != EOS': it drops the EOS and keeps the padding after it; keep every token "
            "through the first EOS",
            _logp_with(mask_kind="not_eos"),
        ),
        Mistake(
            "the mask runs to the last EOS; it ends at the first (where PAD = EOS, as with Qwen's "
            "tokenizer, every padding token is an EOS)",
            _logp_with(mask_kind="last"),
        ),
        Mistake(
            "the left padding's attention mask is ignored: the padded prompts attend to PAD tokens and "
            "start at the wrong positions; pass attention_mask=cat([prompt_mask, ones]) (the model derives "
            "its positions from it, as generate() did)",
            _logp_with(attend=False),
        ),
        Mistake(
            "no temperature: sampling divided the logits by it, so must the log-probs (else the ratio "
            "compares two different distributions): log_softmax(logits / temperature)",
            _logp_with(where="none"),
        ),
        Mistake(
            "the temperature divides the log-probs; it divides the logits, before log_softmax", _logp_with(where="logp")
        ),
        Mistake("these are probabilities; the loss needs log-probs: log_softmax, then gather", _logp_with(log=False)),
        Mistake(
            "logp carries no gradient (torch.no_grad or .detach()): the loss differentiates it with respect "
            "to the model's parameters",
            _logp_with(grad=False),
        ),
    ]
    return check_against_reference(
        fn,
        completion_logps,
        cases,
        name="completion_logps",
        mistakes=mistakes,
        outputs=_logp_outputs,
        dtypes=(torch.float32,),
    )


# ---------------------------------------------------------------------------
# 3. grpo_config_kwargs(cfg, num_processes=1)
# ---------------------------------------------------------------------------

# String fields compare as their index in these lists (TRL's and transformers' names), spelled out in the label.
NAMES = {
    "loss_type": ("grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none"),
    "lr_scheduler_type": (
        "linear",
        "cosine",
        "constant",
        "constant_with_warmup",
        "cosine_with_restarts",
        "polynomial",
        "inverse_sqrt",
        "reduce_lr_on_plateau",
        "cosine_with_min_lr",
        "warmup_stable_decay",
    ),
}


@functools.lru_cache(maxsize=1)
def _grpo_config_defaults() -> dict:
    """``{field: default}`` of the installed TRL's ``GRPOConfig`` (its dataclass fields; nothing instantiated)."""
    from trl import GRPOConfig

    defaults = {}
    for f in dataclasses.fields(GRPOConfig):
        factory = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        defaults[f.name] = factory() if factory else (None if f.default is dataclasses.MISSING else f.default)
    return defaults


def _config_fields(result) -> dict:
    """What ``GRPOConfig(**result)`` would hold in each field the reference sets (TRL's default where unset)."""
    if not isinstance(result, dict):
        raise TypeError(f"GRPOConfig(**kwargs) needs a dict of keyword arguments, got {type(result).__name__}")
    defaults = _grpo_config_defaults()
    unknown = [key for key in result if key not in defaults]
    if unknown:
        raise TypeError(f"GRPOConfig has no field {unknown[0]!r}: GRPOConfig(**kwargs) would raise TypeError")
    value = {**{k: defaults[k] for k in FIELDS}, **result}
    # TRL's own conversions (GRPOConfig.__post_init__ and the trainer): write either form
    value["scale_rewards"] = {True: "group", False: "none"}.get(value["scale_rewards"], value["scale_rewards"])
    if value["epsilon_high"] is None:
        value["epsilon_high"] = value["epsilon"]
    if value["steps_per_generation"] is None:
        value["steps_per_generation"] = value["gradient_accumulation_steps"]
    out = {}
    for key in FIELDS:
        v = getattr(value[key], "value", value[key])  # an enum (SchedulerType) -> its string
        if key in NAMES:
            if v not in NAMES[key]:
                raise TypeError(f"{key}={v!r} is not one of TRL's names: {', '.join(NAMES[key])}")
            names = ", ".join(f"{i}={n}" for i, n in enumerate(NAMES[key]))
            out[f"{key} ({names})"] = torch.tensor(float(NAMES[key].index(v)), dtype=F64)
        elif isinstance(v, (int, float)):  # bools too
            out[key] = torch.tensor(float(v), dtype=F64)
        else:
            raise TypeError(f"{key} should be a number, got {type(v).__name__}")
    return out


FIELDS = tuple(grpo_config_kwargs(LMRLConfig()))


def _config_cases() -> list[Case]:
    return [
        Case(
            "LMRLConfig's defaults (B=64, G=8, 4 epochs of 1 minibatch, 250 rounds), one process",
            {"cfg": LMRLConfig(), "num_processes": 1},
        ),
        Case(
            "B=4, G=8, 2 epochs of 2 minibatches, 50 rounds",
            {"cfg": LMRLConfig(prompts_per_step=4, group_size=8, update_epochs=2, num_minibatches=2, iterations=50)},
        ),
        Case(
            "B=8, G=4, 1 epoch of 2 minibatches, micro_batch_size=4, on 2 processes",
            {
                "cfg": LMRLConfig(
                    prompts_per_step=8,
                    group_size=4,
                    update_epochs=1,
                    num_minibatches=2,
                    micro_batch_size=4,
                    iterations=30,
                ),
                "num_processes": 2,
            },
        ),
        Case(
            "DAPO's settings: token-mean, clip_eps_high=0.28, no KL, overlong filter; B=16, G=4 on 4 processes",
            {
                "cfg": LMRLConfig(
                    prompts_per_step=16,
                    group_size=4,
                    loss_agg="token-mean",
                    clip_eps_high=0.28,
                    kl_coef=0.0,
                    overlong_filter=True,
                    iterations=20,
                ),
                "num_processes": 4,
            },
        ),
        Case(
            "Dr. GRPO: seq-mean-token-sum-norm, normalize_std=False; 5 warm-up rounds, cosine; B=2, G=4",
            {
                "cfg": LMRLConfig(
                    prompts_per_step=2,
                    group_size=4,
                    loss_agg="seq-mean-token-sum-norm",
                    normalize_std=False,
                    warmup_iterations=5,
                    lr_schedule="cosine",
                    iterations=40,
                    max_new_tokens=64,
                    lr=1e-6,
                    seed=3,
                )
            },
        ),
        Case(
            "a constant learning rate after 3 warm-up rounds; temperature 0.7, top_p 0.9, 3 epochs",
            {
                "cfg": LMRLConfig(
                    prompts_per_step=4,
                    group_size=2,
                    lr_schedule="constant",
                    warmup_iterations=3,
                    temperature=0.7,
                    top_p=0.9,
                    update_epochs=3,
                    iterations=10,
                    max_grad_norm=0.5,
                )
            },
        ),
        Case(
            "a constant learning rate, no warm-up",
            {"cfg": LMRLConfig(prompts_per_step=4, group_size=2, lr_schedule="constant", iterations=10)},
        ),
    ]


def _config_with(**changes):
    """The reference's kwargs with some fields computed wrongly (a value, or a function of cfg and num_processes)."""

    def wrong(cfg, num_processes=1):
        kwargs = grpo_config_kwargs(cfg, num_processes)
        for key, change in changes.items():
            if change is None:
                kwargs.pop(key)
            else:
                kwargs[key] = change(cfg, num_processes, kwargs) if callable(change) else change
        return kwargs

    return wrong


def check_grpo_config_kwargs(fn) -> bool:
    """Check a student's ``grpo_config_kwargs(cfg, num_processes=1)`` field by field, as ``GRPOConfig`` reads it."""
    mistakes = [
        Mistake(
            "per_device_train_batch_size counts completions, not prompts: one optimiser step sees "
            "B * G / num_minibatches of them (per process)",
            _config_with(per_device_train_batch_size=lambda c, n, k: k["per_device_train_batch_size"] // c.group_size),
        ),
        Mistake(
            "max_steps counts TRL's optimiser steps, not the course's rounds: each round takes "
            "update_epochs * num_minibatches of them, so max_steps = iterations * update_epochs * "
            "num_minibatches",
            _config_with(max_steps=lambda c, n, k: c.iterations),
        ),
        Mistake(
            "max_steps = iterations * update_epochs forgets the minibatches: each epoch takes num_minibatches "
            "optimiser steps",
            _config_with(max_steps=lambda c, n, k: c.iterations * c.update_epochs),
        ),
        Mistake(
            "warmup_steps counts optimiser steps too: warmup_iterations * update_epochs * num_minibatches",
            _config_with(warmup_steps=lambda c, n, k: c.warmup_iterations),
        ),
        Mistake(
            "a minibatch is B * G / num_minibatches completions: per_device_train_batch_size is not the whole "
            "B * G when num_minibatches > 1",
            _config_with(
                per_device_train_batch_size=lambda c, n, k: c.prompts_per_step * c.group_size // n,
                gradient_accumulation_steps=1,
                steps_per_generation=1,
            ),
        ),
        Mistake(
            "steps_per_generation is not set: TRL then generates every gradient_accumulation_steps forward "
            "passes, B / num_minibatches prompts at a time; set it to num_minibatches * "
            "gradient_accumulation_steps so one generation serves the round",
            _config_with(steps_per_generation=None),
        ),
        Mistake(
            "the processes are forgotten: per_device_train_batch_size is per process, the minibatch "
            "divided by num_processes",
            lambda cfg, num_processes=1: grpo_config_kwargs(cfg, 1),
        ),
        Mistake(
            "loss_type is not set: TRL's default is 'dapo' (token-mean); map loss_agg: "
            f"{', '.join(f'{a} -> {b}' for a, b in LOSS_TYPES.items())}",
            _config_with(loss_type=None),
        ),
        Mistake(
            "the loss_type names are swapped: TRL's 'grpo' is the per-sequence mean (seq-mean-token-mean), "
            "'dapo' the token mean, 'dr_grpo' the sum over max_completion_length",
            _config_with(
                loss_type=lambda c, n, k: {"grpo": "dapo", "dapo": "grpo"}.get(k["loss_type"], k["loss_type"])
            ),
        ),
        Mistake("beta is not set: TRL's default is 0.0 (no KL term); beta = kl_coef", _config_with(beta=None)),
        Mistake(
            "use_bias_correction_kl is left at TRL's default (True: k3 times the ratio pi / pi_old); the "
            "course's k3 (DeepSeekMath's) has no such factor: set it to False",
            _config_with(use_bias_correction_kl=None),
        ),
        Mistake(
            "scale_rewards is reversed: normalize_std=True divides by the group's std, 'group'; False is "
            "Dr. GRPO's 'none'",
            _config_with(scale_rewards=lambda c, n, k: "none" if c.normalize_std else "group"),
        ),
        Mistake(
            "HF's 'constant' schedule ignores warmup_steps; a warm-up then a constant rate is 'constant_with_warmup'",
            _config_with(
                lr_scheduler_type=lambda c, n, k: "constant" if c.lr_schedule == "constant" else c.lr_schedule
            ),
        ),
        Mistake(
            "num_iterations is TRL's epochs over one generated batch: update_epochs",
            _config_with(num_iterations=lambda c, n, k: c.num_minibatches),
        ),
    ]
    return check_against_reference(
        fn,
        grpo_config_kwargs,
        _config_cases(),
        name="grpo_config_kwargs",
        mistakes=mistakes,
        outputs=_config_fields,
        dtypes=(F64,),
    )
