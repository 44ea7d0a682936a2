"""The exercise checks of chapter 05 (PPO): edge cases, and the classic mistakes each one names.

They sit in their own file so that ``course_lib/ppo.py`` reads as the algorithm alone; students call
``course_lib.checks.ppo.check_clipped_surrogate_loss(fn)`` as everywhere else. The wrong implementations a
student's output is matched against are built in :mod:`course_lib.checks.ppo_mistakes`; the messages are here.
"""

from __future__ import annotations

import torch

from course_lib.checks import Case, Mistake, check_against_reference, forget_pass, record_pass
from course_lib.checks.ppo_cases import padded_case, padded_value_case, policy_case, value_case
from course_lib.checks.ppo_loss_mistakes import PPO_LOSS_MISTAKES
from course_lib.checks.ppo_mistakes import SURROGATE_MISTAKES, surrogate, wrong_loss
from course_lib.checks.value_mistakes import VALUE_MISTAKES
from course_lib.ppo import PPOLoss, clipped_surrogate, clipped_surrogate_loss, value_loss


def check_clipped_surrogate(fn) -> bool:
    """Check a student's ``clipped_surrogate(logp, logp_old, adv, clip_eps, clip_eps_high=None)``."""
    cases = [
        policy_case("ratio exactly 1 (logp == logp_old): the plain surrogate -adv", 0, (6,), same=True),
        policy_case("ratios near 1, inside the clip range", 1, (8,), spread=0.05),
        policy_case("ratios far outside [1 - eps, 1 + eps], advantages of both signs", 2, (4, 6), spread=1.5),
        policy_case("a (2, 3, 5) batch, clip_eps = 0.1", 3, (2, 3, 5), spread=0.5, clip_eps=0.1),
        policy_case("clip-higher: clip_eps = 0.2, clip_eps_high = 0.28", 4, (5, 6), spread=0.4, clip_eps_high=0.28),
        policy_case("a scalar (0-d) entry", 5, (), spread=1.0),
    ]
    mistakes = [Mistake(message, surrogate(**options)) for message, options in SURROGATE_MISTAKES]
    return check_against_reference(
        fn, clipped_surrogate, cases, name="clipped_surrogate", mistakes=mistakes, check_dtype=True
    )


_INFO = ("clip_fraction", "clip_active_fraction", "approx_kl")


def loss_and_info(result, keys: tuple[str, ...], note: str = "") -> dict:
    """The loss and the diagnostics ``keys`` of a ``(loss, info)`` result, each compared with the reference's.

    A result of another form raises ``TypeError`` that says what was expected (``note`` is added to the list of
    keys asked for). Chapter 06's ``grpo_loss`` check reads its results with it too.
    """
    if not (isinstance(result, tuple) and len(result) == 2):
        raise TypeError("it should return a tuple (loss, info)")
    loss, info = result
    if not isinstance(info, dict):
        raise TypeError(f"the second returned value should be the info dict, got {type(info).__name__}")
    missing = [key for key in keys if key not in info]
    if missing:
        raise TypeError(
            f"its info dict has no {', '.join(map(repr, missing))}: the exercise asks for {', '.join(keys)}{note}"
        )
    return {"loss": loss, **{key: info[key] for key in keys}}


def _loss_outputs(result):
    """The loss and PPO's three diagnostics."""
    return loss_and_info(result, _INFO)


def check_clipped_surrogate_loss(fn) -> bool:
    """Check a student's ``clipped_surrogate_loss(logp, logp_old, adv, clip_eps, mask=None)``: the loss and its
    gradients, ``clip_fraction``, ``clip_active_fraction`` and ``approx_kl``."""
    cases = [
        policy_case("ratio exactly 1 (logp == logp_old), no mask", 0, (6,), same=True),
        policy_case("ratios far outside [1 - eps, 1 + eps], advantages of both signs", 2, (4, 6), spread=1.5),
        policy_case("ratios near 1, an uneven mask (padding at random places)", 1, (3, 7), spread=0.1, mask_p=0.6),
        policy_case("ratios far outside the range with an uneven mask", 3, (4, 5), spread=1.5, mask_p=0.5),
        policy_case("a (2, 3, 4) batch, clip_eps = 0.1, mask", 4, (2, 3, 4), spread=0.5, clip_eps=0.1, mask_p=0.7),
        policy_case("one entry", 5, (1,), spread=1.0),
        policy_case(
            "clip-higher: clip_eps = 0.2, clip_eps_high = 0.28, a mask",
            6,
            (4, 6),
            spread=0.4,
            mask_p=0.7,
            clip_eps_high=0.28,
        ),
        padded_case(
            policy_case("", 7, (3, 6), spread=1.0, mask_p=0.6),
            float("-inf"),
            "padding whose log-probs are -inf (the mask says so): it changes nothing, gradients included",
        ),
        padded_case(
            policy_case("", 8, (3, 5), spread=1.0, mask_p=0.6),
            float("nan"),
            "padding whose log-probs are NaN: it changes nothing, gradients included",
        ),
        Case(
            "an empty mask (no valid entry): the loss is 0 and so are the diagnostics",
            {**policy_case("", 9, (2, 4)).kwargs, "mask": torch.zeros(2, 4, dtype=torch.bool)},
            grad=("logp", "logp_old", "adv"),
            last=True,
        ),
    ]
    mistakes = [Mistake(message, wrong_loss(surrogate(**options))) for message, options in SURROGATE_MISTAKES]
    mistakes += [
        Mistake(
            "the mask is ignored: average only over valid entries (sum of masked losses / number valid)",
            wrong_loss(ignore_mask=True, count="all"),
        ),
        Mistake(
            "the diagnostics count padding: clip_fraction, clip_active_fraction and approx_kl are averages "
            "over the valid entries only",
            wrong_loss(count="all"),
        ),
        Mistake(
            "padding is counted in the denominator: divide by the number of valid entries, mask.sum(), "
            "not by mask.numel()",
            wrong_loss(reduce="numel"),
        ),
        Mistake(
            "each row is averaged first, then the rows: rows with fewer valid entries weigh more; the loss is the "
            "mean over all valid entries at once, sum / mask.sum()",
            wrong_loss(reduce="per_row"),
        ),
        Mistake(
            "approx_kl counts the padding: it is the mean over the valid entries only (divide by mask.sum())",
            wrong_loss(kl_count="all"),
        ),
        Mistake(
            "clip_fraction's upper bound ignores clip_eps_high: it counts ratios outside "
            "[1 - clip_eps, 1 + clip_eps_high], the range the loss clips to",
            wrong_loss(fraction_high=False),
        ),
        *(
            Mistake(
                "the advantages are normalised inside the loss (CleanRL's norm_adv, done before the call there): "
                "clipped_surrogate_loss uses adv as given",
                wrong_loss(normalise_adv=pool),
            )
            for pool in ("valid", "all")
        ),
        Mistake(
            "the loss is right, but its gradient is NaN: the padding's -inf (or NaN) log-probs reach the ratio, "
            "and torch.where(mask, loss, 0) afterwards still sends 0 * NaN = NaN back through them; select the "
            "valid log-probs first, torch.where(mask, logp, 0), before the ratio",
            wrong_loss(padding="where_after"),
        ),
        Mistake("you summed the per-entry losses; average them over the valid entries", wrong_loss(reduce="sum")),
        Mistake(
            "the padding's -inf (or NaN) log-probs reach the loss: x * mask is NaN there (0 * inf), and so is the "
            "gradient; select the valid entries first, torch.where(mask, x, 0), before the ratio",
            wrong_loss(padding="multiplied"),
        ),
        Mistake(
            "an empty mask (no valid entry) gives 0 / 0 = NaN: divide by mask.sum().clamp(min=1), so the loss is 0",
            wrong_loss(reduce="unclamped"),
        ),
        Mistake(
            "clip_fraction counts only where the clip binds (TRL's definition); the course counts every valid "
            "entry with |ratio - 1| > clip_eps, whatever the sign of adv",
            wrong_loss(clip_fraction="binding"),
        ),
        Mistake(
            "clip_active_fraction counts every ratio outside the range (that is clip_fraction); it counts only "
            "where the clip binds: ratio > 1 + eps with adv > 0, or ratio < 1 - eps with adv < 0",
            wrong_loss(active="outside"),
        ),
        Mistake(
            "clip_fraction counts only ratios above 1 + clip_eps; count both sides, ratio < 1 - clip_eps too",
            wrong_loss(clip_fraction="high"),
        ),
        Mistake(
            "clip_active_fraction has the signs swapped: the clip binds above the range where adv > 0 and below "
            "it where adv < 0 (there the clipped term is the smaller one and the gradient stops)",
            wrong_loss(active="swapped"),
        ),
        Mistake(
            "clip_active_fraction counts only ratios above 1 + clip_eps; the clip also binds below "
            "1 - clip_eps where adv < 0",
            wrong_loss(active="high"),
        ),
        Mistake(
            "approx_kl is the mean of logp_old - logp (k1); the course reports the mean of "
            "(ratio - 1) - log(ratio) (k3, as CleanRL), never negative",
            wrong_loss(kl="k1"),
        ),
        Mistake(
            "approx_kl is the mean of logp - logp_old; the course reports the mean of (ratio - 1) - log(ratio) "
            "(k3, as CleanRL)",
            wrong_loss(kl="k1_reversed"),
        ),
        Mistake(
            "approx_kl is the mean of 0.5 * log(ratio)**2 (k2); the course reports the mean of "
            "(ratio - 1) - log(ratio) (k3, as CleanRL)",
            wrong_loss(kl="k2"),
        ),
        Mistake(
            "approx_kl's ratio is inverted: it is the mean of (ratio - 1) - log(ratio) with "
            "ratio = exp(logp - logp_old)",
            wrong_loss(kl="k3_reversed"),
        ),
    ]
    return check_against_reference(
        fn,
        clipped_surrogate_loss,
        cases,
        name="clipped_surrogate_loss",
        mistakes=mistakes,
        outputs=_loss_outputs,
        check_dtype=True,
    )


def check_value_loss(fn) -> bool:
    """Check a student's ``value_loss(values, returns, values_old=None, clip_eps=None, mask=None)``."""
    cases = [
        value_case("no clipping, one environment", 0, (6,)),
        value_case("no clipping, an uneven mask", 1, (3, 5), mask_p=0.6),
        value_case("value clipping with clip_eps = 0.2", 2, (4, 6), clip_eps=0.2),
        value_case("value clipping with clip_eps = 0.1 and a mask", 3, (2, 3, 4), clip_eps=0.1, mask_p=0.6),
        Case(
            "a mask with no valid entry: the loss is 0 (the docstring's promise), and so is its gradient",
            {**value_case("", 4, (2, 3)).kwargs, "mask": torch.zeros(2, 3, dtype=torch.bool)},
            grad=("values", "returns"),
            last=True,
        ),
        padded_value_case(5, (3, 4)),
    ]
    mistakes = VALUE_MISTAKES
    return check_against_reference(fn, value_loss, cases, name="value_loss", mistakes=mistakes, check_dtype=True)


def _ppo_loss_reference(clip_epsilon=0.2, value_loss_coef=0.5, entropy_coef=0.01, **tensors):
    """:class:`PPOLoss` as a function of a case's arguments: its three coefficients and its six tensors by name."""
    return PPOLoss(clip_epsilon, value_loss_coef, entropy_coef)(**tensors)


def check_ppo_loss(fn) -> bool:
    """Check a student's full PPO loss.

    ``fn`` is either a class like :class:`PPOLoss` (built as ``fn(clip_epsilon, value_loss_coef,
    entropy_coef)``, then called with the six tensors) or a function taking the six tensors and
    those three keyword arguments.
    """
    student = fn
    forget_pass(student)  # until this run of the check passes
    if isinstance(fn, type):
        cls = fn
        fn = lambda clip_epsilon, value_loss_coef, entropy_coef, **tensors: cls(  # noqa: E731
            clip_epsilon, value_loss_coef, entropy_coef
        )(**tensors)

    def case(description, seed, shape, spread=1.0, **coefs):
        policy = policy_case(description, seed, shape, spread=spread).kwargs
        value = value_case(description, seed + 100, shape).kwargs
        g = torch.Generator().manual_seed(seed + 200)
        kwargs = dict(
            policy_logprobs=policy["logp"],
            old_policy_logprobs=policy["logp_old"],
            values=value["values"],
            returns=value["returns"],
            advantages=policy["adv"],
            entropy=torch.rand(shape, generator=g, dtype=torch.float64) * 2.0,
            **coefs,
        )
        return Case(description, kwargs, grad=tuple(k for k in kwargs if isinstance(kwargs[k], torch.Tensor)))

    masked = case("a mask, the padding's log-probs -inf", 3, (3, 6), spread=0.5)
    g = torch.Generator().manual_seed(303)
    mask = torch.rand(3, 6, generator=g) < 0.6
    mask[:, 0] = True  # every row holds a valid entry
    for key in ("policy_logprobs", "old_policy_logprobs"):
        masked.kwargs[key] = masked.kwargs[key].masked_fill(~mask, float("-inf"))
    masked.kwargs.update(mask=mask, clip_epsilon=0.2, value_loss_coef=0.5, entropy_coef=0.1)
    masked.description = (
        "a mask (padding at random places, its log-probs -inf): every term averages the valid entries only"
    )
    cases = [
        masked,
        case(
            "default coefficients (0.2, 0.5, 0.01), ratios far outside the clip range",
            0,
            (4, 6),
            spread=1.5,
            clip_epsilon=0.2,
            value_loss_coef=0.5,
            entropy_coef=0.01,
        ),
        case(
            "coefficients clip 0.1, value 1.0, entropy 0.1",
            1,
            (8,),
            spread=0.3,
            clip_epsilon=0.1,
            value_loss_coef=1.0,
            entropy_coef=0.1,
        ),
        case(
            "a (2, 3, 4) batch, no entropy bonus",
            2,
            (2, 3, 4),
            clip_epsilon=0.3,
            value_loss_coef=0.25,
            entropy_coef=0.0,
        ),
    ]
    mistakes = PPO_LOSS_MISTAKES
    passed = check_against_reference(
        fn, _ppo_loss_reference, cases, name="PPOLoss", mistakes=mistakes, check_dtype=True
    )
    record_pass("PPOLoss", student)  # the class itself, which the demo cells hand to the trainer
    return passed
