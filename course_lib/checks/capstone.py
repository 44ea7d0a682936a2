"""The exercise checks of chapter 08 (the capstone): a reward, the completion mask, one GRPO step.

Each check compares the student's function with the reference over edge cases and, when
they differ, names the classic mistake the student's output reproduces:

- ``addition_exact_reward(completion, answer)``: missing EOS, leading zeros, extra text,
  text after EOS (which must never earn reward);
- ``completion_mask(completions, eos_id)``: the EOS token dropped, the mask off by one,
  rows with no EOS, the last EOS in place of the first;
- ``grpo_step(...)``: log-probs read at the wrong position (logits not shifted, or the
  prompt's last token skipped), the EOS dropped from the mask, padding counted, no
  gradient clipping, a stale gradient (no ``zero_grad``).
"""

from __future__ import annotations

import copy

import torch
from einops import rearrange, repeat

from course_lib.checks import Case, Mistake, check_against_reference, forget_pass, record_pass, recording, scalar_reply
from course_lib.grpo import grpo_loss
from course_lib.lectures.capstone import grpo_step
from course_lib.lm_rl import completion_mask, token_logps
from course_lib.rewards import addition_exact_reward
from course_lib.tiny_lm import TinyLM, TinyLMConfig

# ---------------------------------------------------------------------------
# 1. The exact-answer reward
# ---------------------------------------------------------------------------

_REWARD_CASES = [  # (completion, answer, description)
    ("132$", "132", "the right answer then EOS"),
    ("131$", "132", "a wrong answer then EOS"),
    ("132", "132", "the right digits but no EOS: the model never stopped"),
    ("0132$", "132", "a leading zero"),
    ("00$", "0", "a leading zero on 0"),
    ("0$", "0", "the answer 0"),
    ("132$7", "132", "text after EOS (must be ignored: the model stopped)"),
    ("13$2", "132", "EOS too early, the rest after it"),
    ("1320$", "132", "an extra digit before EOS"),
    (" 132$", "132", "a space before the answer"),
    ("132 $", "132", "a space before EOS"),
    ("+132$", "132", "a sign before the answer"),
    ("$", "7", "EOS at once, nothing written"),
    ("", "7", "an empty completion"),
    ("7$$", "7", "two EOS in a row"),
]


def _reward_mistakes():
    def ignores_eos(c, a):
        return float(c.split("$")[0] == a)

    def reads_past_eos(c, a):
        return float(c.endswith("$") and c.replace("$", "") == a)

    def numeric_compare(c, a):
        head, eos, _ = c.partition("$")
        return float(bool(eos) and head.isdigit() and int(head) == int(a))

    def strips_spaces(c, a):
        head, eos, _ = c.partition("$")
        return float(bool(eos) and head.strip() == a)

    def startswith_answer(c, a):
        return float("$" in c and c.startswith(a))

    return [
        Mistake("a completion with no EOS is rewarded: the model must also stop (require the EOS '$')", ignores_eos),
        Mistake(
            "the reward reads text after the first EOS: the model stopped there, so score only what "
            "comes before the first '$'",
            reads_past_eos,
        ),
        Mistake(
            "the answers are compared as numbers, so leading zeros ('0132') pass: compare the strings", numeric_compare
        ),
        Mistake("spaces are stripped, so extra text passes: the completion must be exactly the digits", strips_spaces),
        Mistake("only the beginning is compared, so extra digits before EOS pass", startswith_answer),
    ]


def check_addition_exact_reward(fn) -> bool:
    """Check a student's ``addition_exact_reward(completion, answer) -> float`` on a table of strings."""
    name = "addition_exact_reward"
    forget_pass(name)  # until this run of the check passes (the demo cells ask)
    if not callable(fn):
        raise AssertionError(f"{name}: expected a function, got {type(fn).__name__}")

    # Every call is recorded in the grading kernel and replayed by the grader (checks.recording).
    student = [
        recording.replayable(lambda c=c, a=a: scalar_reply(fn, name, f"{name}({c!r}, {a!r})", (c, a)))
        for c, a, _ in _REWARD_CASES
    ]
    expected = [addition_exact_reward(c, a) for c, a, _ in _REWARD_CASES]
    if student == expected:
        recording.report(f"\u2714 {name}: correct on all {len(_REWARD_CASES)} completions.")
        record_pass(name, fn)
        return True
    first = next(i for i, (s, e) in enumerate(zip(student, expected)) if s != e)
    c, a, description = _REWARD_CASES[first]
    for mistake in _reward_mistakes():
        wrong = [float(mistake.fn(cc, aa)) for cc, aa, _ in _REWARD_CASES]
        if wrong[first] == student[first] and all(
            student[i] == wrong[i] for i, (w, e) in enumerate(zip(wrong, expected)) if w != e
        ):
            raise AssertionError(
                f"{name}: {mistake.message}\n  seen on {c!r} with answer {a!r} ({description}): "
                f"returned {student[first]}, expected {expected[first]}"
            )
    raise AssertionError(
        f"{name}({c!r}, {a!r}) returned {student[first]}, expected {expected[first]}\n  on the case: {description}"
    )


# ---------------------------------------------------------------------------
# 2. The completion mask
# ---------------------------------------------------------------------------


def _mask_drops_eos(completion_ids, eos_id):
    return (torch.cumsum((completion_ids == eos_id).long(), -1) == 0).float()


def _mask_off_by_one(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    before = torch.cumsum(is_eos, -1) - is_eos
    shifted = torch.cat([torch.zeros_like(before[..., :1]), before[..., :-1]], -1)  # one token too far
    return (shifted == 0).float()


def _mask_no_eos_rows_empty(completion_ids, eos_id):
    mask = completion_mask(completion_ids, eos_id)
    return mask * (completion_ids == eos_id).any(-1, keepdim=True).float()


def _mask_last_eos(completion_ids, eos_id):
    is_eos = (completion_ids == eos_id).long()
    after = torch.flip(torch.cumsum(torch.flip(is_eos, [-1]), -1), [-1])  # EOS at or after t
    return ((after > 0) | (is_eos.sum(-1, keepdim=True) == 0)).float()


def _mask_not_pad(completion_ids, eos_id):
    return (completion_ids != eos_id + 1).float()  # PAD = eos_id + 1 in the course's tokenizer


def check_completion_mask(fn) -> bool:
    """Check a student's ``completion_mask(completion_ids, eos_id) -> float mask``."""
    E, P = 12, 13
    cases = [
        Case("EOS in the middle, PAD after it", {"completion_ids": torch.tensor([[1, 3, 2, E, P]]), "eos_id": E}),
        Case("EOS first: one valid token", {"completion_ids": torch.tensor([[E, P, P, P]]), "eos_id": E}),
        Case(
            "a row with no EOS (ran out of tokens): all valid",
            {"completion_ids": torch.tensor([[1, 2, 3, 4], [5, E, P, P]]), "eos_id": E},
        ),
        Case("EOS at the last position", {"completion_ids": torch.tensor([[4, 5, 6, E]]), "eos_id": E}),
        Case(
            "two EOS: only the first counts, and what follows it is not PAD",
            {"completion_ids": torch.tensor([[1, E, 2, E, 7]]), "eos_id": E},
        ),
        Case(
            "a (B, G, L) batch",
            {"completion_ids": torch.tensor([[[1, E, P], [2, 3, E]], [[E, P, P], [4, 5, 6]]]), "eos_id": E},
        ),
        Case("another EOS id (3)", {"completion_ids": torch.tensor([[0, 1, 3, 2, 2]]), "eos_id": 3}),
    ]
    mistakes = [
        Mistake(
            "the EOS token is masked out: it is part of the completion (the model chose to stop, "
            "and that choice must get the advantage too)",
            _mask_drops_eos,
        ),
        Mistake("the mask is off by one: it keeps the token after EOS", _mask_off_by_one),
        Mistake(
            "rows with no EOS get an empty mask: a completion that ran out of tokens is valid everywhere",
            _mask_no_eos_rows_empty,
        ),
        Mistake("the mask runs to the last EOS: everything after the first EOS is masked", _mask_last_eos),
        Mistake(
            "the mask tests for PAD instead of finding the first EOS: tokens after EOS are not always PAD",
            _mask_not_pad,
        ),
    ]

    def reference(completion_ids, eos_id):
        return completion_mask(completion_ids, eos_id)

    def as_float(result):
        return {"mask": torch.as_tensor(result).float()}

    return check_against_reference(
        fn, reference, cases, name="completion_mask", mistakes=mistakes, outputs=as_float, dtypes=(torch.float64,)
    )


# ---------------------------------------------------------------------------
# 3. One GRPO step
# ---------------------------------------------------------------------------

_E, _PAD = 12, 13


def _step_setup(seed: int, kl_coef: float):
    """A tiny LM, its reference, sampled-looking completions (some without EOS), rewards and logp_old."""
    cfg = TinyLMConfig(vocab_size=14, block_size=10, n_layer=1, n_head=2, d_model=16)
    ref = TinyLM(cfg, seed=seed)
    policy = copy.deepcopy(ref)
    with torch.no_grad():  # move the policy off the reference, so the KL term and its gradient are not zero
        for p in policy.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(seed + 1)))
    g = torch.Generator().manual_seed(seed + 2)
    prompts = torch.randint(0, 10, (2, 6), generator=g)
    prompts[:, 2], prompts[:, 5] = 10, 11
    completions = torch.tensor(
        [[[1, 3, 2, _E], [4, _E, _PAD, _PAD], [7, 7, 7, 7]], [[_E, _PAD, _PAD, _PAD], [9, 1, _E, _PAD], [2, _E, 5, _E]]]
    )  # (2, 3, 4)
    rewards = torch.tensor([[1.0, 0.0, 0.5], [0.0, 1.0, 1.0]])
    with torch.no_grad():  # the sampling policy: a little different from the current one, so ratios are not 1
        logp_old = _logp(ref, prompts, completions) + 0.1 * torch.randn(completions.shape, generator=g)
    # SGD, not Adam: Adam's first step is lr * sign(grad), which flips on rounding noise where a
    # gradient is ~0, so the same right answer could differ between the kernel and the grader.
    opt = torch.optim.SGD(policy.parameters(), lr=0.5)
    # A stale gradient from a previous step: a step that forgets zero_grad() adds it in.
    for p in policy.parameters():
        p.grad = torch.full_like(p, 0.5)
    return dict(
        policy=policy,
        ref_model=ref if kl_coef > 0 else None,
        optimizer=opt,
        prompts=prompts,
        completions=completions,
        rewards=rewards,
        logp_old=logp_old,
        eos_id=_E,
        clip_eps=0.2,
        kl_coef=kl_coef,
        max_grad_norm=0.5,
    )


def _logp(model, prompts, completions, shifted: bool = True):
    G = completions.shape[1]
    fp = repeat(prompts, "B P -> (B G) P", G=G)
    fc = rearrange(completions, "B G L -> (B G) L")
    if shifted:
        out = token_logps(model, fp, None, fc)
    else:  # the classic wrong position: the logits of the completion's own positions, logits[:, P:]
        P, L = fp.shape[1], fc.shape[1]
        logits = model(torch.cat([fp, fc], 1))[:, P : P + L]  # (B*G, L): each scores the token *after* y_t
        out = torch.log_softmax(logits, -1).gather(-1, fc[..., None])[..., 0]
    return rearrange(out, "(B G) L -> B G L", G=G)


def _wrong_step(shifted=True, mask="eos", clip=True, zero_grad=True):
    def step(
        policy,
        ref_model,
        optimizer,
        prompts,
        completions,
        rewards,
        logp_old,
        eos_id,
        clip_eps=0.2,
        kl_coef=0.04,
        max_grad_norm=1.0,
    ):
        logp = _logp(policy, prompts, completions, shifted)
        logp_ref = None
        if ref_model is not None and kl_coef > 0:
            with torch.no_grad():
                logp_ref = _logp(ref_model, prompts, completions, shifted)
        if mask == "eos":
            m = completion_mask(completions, eos_id)
        elif mask == "drop_eos":
            m = _mask_drops_eos(completions, eos_id)
        else:
            m = torch.ones(completions.shape)
        loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, m, clip_eps=clip_eps, kl_coef=kl_coef)
        if zero_grad:
            optimizer.zero_grad()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
        optimizer.step()
        return loss.item()

    return step


def _step_mistakes():
    return [
        Mistake(
            "the log-probs are taken at the wrong position: the logits are not shifted (logits[:, P:]), so "
            "the prompt's last token is skipped; logits[:, t] predicts token t + 1, so the first completion "
            "token is scored by the logits at position P - 1",
            _wrong_step(shifted=False),
        ),
        Mistake(
            "the EOS token is masked out of the loss: the decision to stop gets no gradient",
            _wrong_step(mask="drop_eos"),
        ),
        Mistake("the padding after EOS is counted in the loss: use the completion mask", _wrong_step(mask="ones")),
        Mistake(
            "the gradient is not clipped: call torch.nn.utils.clip_grad_norm_ before optimizer.step()",
            _wrong_step(clip=False),
        ),
        Mistake(
            "optimizer.zero_grad() is missing: the previous step's gradient is added to this one",
            _wrong_step(zero_grad=False),
        ),
    ]


def _run_step(fn, seed, kl_coef):
    kwargs = _step_setup(seed, kl_coef)
    loss = fn(**kwargs)
    if loss is None:
        raise AssertionError("grpo_step returned None: return the loss (loss.item())")
    loss = float(loss.detach() if torch.is_tensor(loss) else loss)
    params = torch.cat([p.detach().flatten() for p in kwargs["policy"].parameters()])
    return loss, params


def check_grpo_step(fn) -> bool:
    """Check a student's ``grpo_step(policy, ref_model, optimizer, prompts, completions, rewards, logp_old,
    eos_id, clip_eps, kl_coef, max_grad_norm) -> float``: same loss and same parameters after the step."""
    name = "grpo_step"
    forget_pass(name)  # until this run of the check passes (the demo cells ask)
    cases = [(0, 0.0, "no KL term"), (1, 0.1, "with the k3 KL to a reference")]

    def ask(seed, kl_coef, description):
        try:
            loss, params = _run_step(fn, seed, kl_coef)
        except (NotImplementedError, AssertionError):
            raise
        except Exception as error:  # noqa: BLE001 - any crash becomes feedback
            raise AssertionError(
                f"{name} raised {type(error).__name__}: {error}\n  on the case: {description}"
            ) from error
        return float(loss), params.double()

    # Both cases are asked before any is judged, and recorded in the grading kernel (checks.recording).
    replies = [recording.replayable(lambda case=case: ask(*case)) for case in cases]
    for (seed, kl_coef, description), (got_loss, got_params) in zip(cases, replies):
        exp_loss, exp_params = _run_step(grpo_step, seed, kl_coef)
        exp_params = exp_params.double()
        same_loss = abs(got_loss - exp_loss) <= 1e-5 + 1e-4 * abs(exp_loss)
        same_params = torch.allclose(got_params, exp_params, rtol=1e-4, atol=1e-6)
        if same_loss and same_params:
            continue
        for mistake in _step_mistakes():
            w_loss, w_params = _run_step(mistake.fn, seed, kl_coef)
            if abs(w_loss - got_loss) <= 1e-5 + 1e-4 * abs(w_loss) and torch.allclose(
                w_params.double(), got_params, rtol=1e-4, atol=1e-6
            ):
                raise AssertionError(f"{name}: {mistake.message}\n  seen on the case: {description}")
        what = (
            f"the loss is {got_loss:.6g}, expected {exp_loss:.6g}"
            if not same_loss
            else "the loss is right but the parameters after the step differ (clipping? zero_grad? the optimizer?)"
        )
        raise AssertionError(f"{name}: {what}\n  on the case: {description}")
    recording.report(f"\u2714 {name}: same loss and same parameter update as the reference, with and without KL.")
    record_pass(name, fn)
    return True
