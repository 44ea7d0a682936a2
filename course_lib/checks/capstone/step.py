"""The check of chapter 08's one GRPO step of the tiny model (reference: ``course_lib.lectures.capstone.grpo_step``)."""

from __future__ import annotations

import copy

import torch
from einops import rearrange, repeat

from course_lib.checks import (
    Mistake,
    drawing,
    forget_pass,
    record_pass,
    recording,
)
from course_lib.checks.capstone.mask import _mask_drops_eos, _mask_runs_on
from course_lib.checks.compare import _crash_hint
from course_lib.grpo import grpo_loss
from course_lib.lectures.capstone import grpo_step
from course_lib.lm_sampling import completion_mask, token_logps
from course_lib.tiny_lm import TinyLM, TinyLMConfig

# ---------------------------------------------------------------------------
# 3. One GRPO step
# ---------------------------------------------------------------------------

_E, _PAD = 12, 13


def _step_setup(seed: int, kl_coef: float, variant: str = ""):
    """A tiny LM, its reference, sampled-looking completions (some without EOS), rewards and logp_old.

    ``variant``: ``"defaults"`` leaves out ``clip_eps``, ``kl_coef`` and ``max_grad_norm`` (the signature's
    defaults, with a reference model); ``"no_ref"`` passes ``ref_model=None`` with a positive ``kl_coef`` (the
    docstring's "None: no KL", whatever the weight)."""
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
    kwargs = dict(
        policy=policy,
        ref_model=ref if kl_coef > 0 and variant != "no_ref" else None,
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
    if variant == "narrow_clip":  # a clip range other than the default, so that a step that ignores it shows
        kwargs["clip_eps"] = 0.1
    if variant == "defaults":
        kwargs["ref_model"] = ref
        for default in ("clip_eps", "kl_coef", "max_grad_norm"):
            del kwargs[default]
    return kwargs


def _logp(model, prompts, completions, shifted: bool = True, tiled: bool = False, regrouped: bool = False):
    G = completions.shape[1]
    fp = repeat(prompts, "B P -> (G B) P", G=G) if tiled else repeat(prompts, "B P -> (B G) P", G=G)
    fc = rearrange(completions, "B G L -> (B G) L")
    if shifted:
        out = token_logps(model, fp, None, fc)
    else:  # the classic wrong position: the logits of the completion's own positions, logits[:, P:]
        P, L = fp.shape[1], fc.shape[1]
        logits = model(torch.cat([fp, fc], 1))[:, P : P + L]  # (B*G, L): each scores the token *after* y_t
        out = torch.log_softmax(logits, -1).gather(-1, fc[..., None])[..., 0]
    if regrouped:  # unflattened in the other order than it was flattened in
        return rearrange(out, "(G B) L -> B G L", G=G)
    return rearrange(out, "(B G) L -> B G L", G=G)


def _wrong_step(
    shifted=True,
    mask="eos",
    clip=True,
    zero_grad=True,
    tiled=False,
    regrouped=False,
    recompute_old=False,
    loss_options=None,
    clipper="norm",
):
    """A wrong step: one slip switched on. ``loss_options``: what is passed to grpo_loss in place of
    ``clip_eps=clip_eps, kl_coef=kl_coef`` (``{"clip_eps": None}`` leaves clip_eps out: its default is used);
    ``clipper``: ``"norm"``, ``"value"`` (clip_grad_value_) or a number (the norm used whatever is passed)."""

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
        logp = _logp(policy, prompts, completions, shifted, tiled, regrouped)
        if recompute_old:
            logp_old = logp.detach()
        logp_ref = None
        if ref_model is not None and kl_coef > 0:
            with torch.no_grad():
                logp_ref = _logp(ref_model, prompts, completions, shifted, tiled, regrouped)
        if mask == "eos":
            m = completion_mask(completions, eos_id)
        elif mask == "drop_eos":
            m = _mask_drops_eos(completions, eos_id)
        elif callable(mask):  # a wrong completion mask of chapter 08's first exercise
            m = mask(completions, eos_id)
        else:
            m = torch.ones(completions.shape)
        options = {"clip_eps": clip_eps, "kl_coef": kl_coef, **(loss_options or {})}
        options = {key: value for key, value in options.items() if value is not None}
        loss, _ = grpo_loss(logp, logp_old, logp_ref, rewards, m, **options)
        if zero_grad is True:
            optimizer.zero_grad()
        loss.backward()
        if zero_grad == "after":
            optimizer.zero_grad()
        if clip and clipper == "value":
            torch.nn.utils.clip_grad_value_(policy.parameters(), max_grad_norm)
        elif clip and clipper == "l1":
            torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm, norm_type=1.0)
        elif clip:
            norm = max_grad_norm if clipper == "norm" else clipper
            torch.nn.utils.clip_grad_norm_(policy.parameters(), norm)
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
            "the mask runs on after the first EOS (up to the next EOS or the row's end), so tokens after the "
            "completion ended are trained on: keep the tokens through the FIRST EOS only",
            _wrong_step(mask=_mask_runs_on),
        ),
        Mistake(
            "the step used an unclipped gradient: call torch.nn.utils.clip_grad_norm_ after backward() and before "
            "optimizer.step() (not at all, or after the step, is the same to the step)",
            _wrong_step(clip=False),
        ),
        Mistake(
            "optimizer.zero_grad() is missing: the previous step's gradient is added to this one",
            _wrong_step(zero_grad=False),
        ),
        Mistake(
            "optimizer.zero_grad() comes after loss.backward(): it wipes the gradient just computed, and the step "
            "does nothing; call it before the backward pass",
            _wrong_step(zero_grad="after"),
        ),
        Mistake(
            "the prompts are tiled (prompts.repeat(G, 1): prompt 0, 1, 0, 1, ...) but each prompt's G completions "
            "sit together: repeat each prompt G times in place, repeat_interleave(G, dim=0)",
            _wrong_step(tiled=True),
        ),
        Mistake(
            "the log-probs are put back with '(G B) L -> B G L', but the batch was flattened as '(B G)': each "
            "completion's log-probs land on another prompt's completion; unflatten with the pattern you flattened "
            "with, '(B G) L -> B G L'",
            _wrong_step(regrouped=True),
        ),
        Mistake(
            "logp_old is recomputed from the policy (logp.detach()), so every ratio is 1 and the clip never acts; "
            "use the logp_old passed in: the log-probs of the policy that sampled the completions",
            _wrong_step(recompute_old=True),
        ),
        Mistake(
            "kl_coef is not passed to grpo_loss, so its default 0.04 is used whatever is asked: pass kl_coef=kl_coef",
            _wrong_step(loss_options={"kl_coef": None}),
        ),
        Mistake(
            "clip_eps is not passed to grpo_loss, so its default 0.2 is used whatever is asked: pass clip_eps=clip_eps",
            _wrong_step(loss_options={"clip_eps": None}),
        ),
        *(
            Mistake(
                f"the KL estimator is {kind}; the step uses k3 (grpo_loss's default kl_kind)",
                _wrong_step(loss_options={"kl_kind": kind}),
            )
            for kind in ("k1", "k2")
        ),
        Mistake(
            "normalize_std=False (Dr. GRPO) is passed: the step uses GRPO's advantages, divided by the group std "
            "(grpo_loss's default)",
            _wrong_step(loss_options={"normalize_std": False}),
        ),
        Mistake(
            "each gradient entry is clipped (clip_grad_value_); the step clips the global gradient norm, "
            "torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)",
            _wrong_step(clipper="value"),
        ),
        Mistake(
            "the gradient norm is clipped with norm_type=1 (the sum of absolute values); the step clips the global "
            "L2 norm, clip_grad_norm_'s default norm_type=2",
            _wrong_step(clipper="l1"),
        ),
        Mistake(
            "max_grad_norm is ignored (1.0 is used whatever is passed): clip_grad_norm_(policy.parameters(), "
            "max_grad_norm)",
            _wrong_step(clipper=1.0),
        ),
    ]


def _run_step(fn, seed, kl_coef, variant=""):
    kwargs = _step_setup(seed, kl_coef, variant)
    loss = fn(**kwargs)
    if loss is None:
        raise AssertionError("grpo_step returned None: return the loss (loss.item())")
    # The docstring promises a Python float (what a training loop logs): whether it is one is the third value.
    is_number = isinstance(loss, (int, float)) and not isinstance(loss, bool)
    loss = float(loss.detach() if torch.is_tensor(loss) else loss)
    params = torch.cat([p.detach().flatten() for p in kwargs["policy"].parameters()])
    return loss, params, is_number


def check_grpo_step(fn) -> bool:
    """Check a student's ``grpo_step(policy, ref_model, optimizer, prompts, completions, rewards, logp_old,
    eos_id, clip_eps, kl_coef, max_grad_norm) -> float``: same loss and same parameters after the step."""
    name = "grpo_step"
    forget_pass(fn)  # until this run of the check passes (the demo cells ask)
    cases = [
        (0, 0.0, "no KL term", ""),
        (1, 0.1, "with the k3 KL to a reference", ""),
        (2, 0.1, "ref_model=None with kl_coef=0.1: no KL term (there is no reference to compare with)", "no_ref"),
        # seed 20: the gradient norm is 1.8, so the default max_grad_norm=1.0 binds (and 2.0 would not)
        (20, 0.04, "clip_eps, kl_coef and max_grad_norm left at their defaults (0.2, 0.04, 1.0), with KL", "defaults"),
        (3, 0.1, "clip_eps=0.1 (not the default 0.2), with KL", "narrow_clip"),
    ]
    session = recording.current()
    if session is not None:  # at grading, a model, batch and KL weight drawn afresh too
        g = torch.Generator().manual_seed(session.seed * 1000 + 997)
        seed, kl_coef = drawing.integer(g, 2, 10**6), drawing.choice(g, (0.0, 0.05, 0.2))
        cases.append((seed, kl_coef, f"a case drawn at grading time: model seed {seed}, kl_coef {kl_coef}", ""))

    def ask(seed, kl_coef, description, variant):
        try:
            loss, params, is_number = _run_step(fn, seed, kl_coef, variant)
        except (NotImplementedError, AssertionError):
            raise
        except Exception as error:  # noqa: BLE001 - any crash becomes feedback
            raise AssertionError(
                f"{name} raised {type(error).__name__}: {error}{_crash_hint(error)}\n  on the case: {description}"
            ) from error
        return loss, params.double(), float(is_number)  # plain data, for the grading kernel's record

    # Both cases are asked before any is judged, and recorded in the grading kernel (checks.recording).
    replies = [recording.replayable(lambda case=case: ask(*case)) for case in cases]

    def same(reply, other):
        (loss, params, _), (other_loss, other_params, _) = reply, other
        same_loss = abs(loss - other_loss) <= 1e-5 + 1e-4 * abs(other_loss)
        return same_loss and torch.allclose(params, other_params.double(), rtol=1e-4, atol=1e-6)

    for (seed, kl_coef, description, variant), (got_loss, got_params, _) in zip(cases, replies):
        exp_loss, exp_params, _ = _run_step(grpo_step, seed, kl_coef, variant)
        exp_params = exp_params.double()
        same_loss = abs(got_loss - exp_loss) <= 1e-5 + 1e-4 * abs(exp_loss)
        same_params = torch.allclose(got_params, exp_params, rtol=1e-4, atol=1e-6)
        if same_loss and same_params:
            continue
        # A mistake is named only when it gives the student's loss and update on every case.
        for mistake in _step_mistakes():
            if all(
                same(reply, _run_step(mistake.fn, case[0], case[1], case[3])) for reply, case in zip(replies, cases)
            ):
                raise AssertionError(f"{name}: {mistake.message}\n  seen on the case: {description}")
        what = (
            f"the loss is {got_loss:.6g}, expected {exp_loss:.6g}"
            if not same_loss
            else "the loss is right but the parameters after the step differ (clipping? zero_grad? the optimizer?)"
        )
        raise AssertionError(f"{name}: {what}\n  on the case: {description}")
    # Every value is right: now the kind (told last, as every check tells a kind).
    if not all(is_number for _, _, is_number in replies):
        raise AssertionError(
            f"{name}: the loss and the update are right, but the loss is returned as a tensor; the exercise asks "
            "for a Python float (`loss.item()`)"
        )
    recording.report(f"\u2714 {name}: same loss and same parameter update as the reference, with and without KL.")
    record_pass(name, fn)
    return True
