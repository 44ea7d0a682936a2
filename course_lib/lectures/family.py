"""Chapter 11: the GRPO family as switches of the one loop, and the problem each variant was made for.

Every variant changes one piece of GRPO (Shao et al. 2024): the advantage (RLOO, REINFORCE++, Dr. GRPO's std),
which groups and tokens the loss sees and how it averages them (DAPO's parts, Dr. GRPO's normaliser), or the ratio
and its clip (GSPO, GMPO, CISPO, SAPO). Each paper claims a fix for one problem, and a problem that is absent cannot
be fixed: on chapter 08's easy task, with one pass per batch and short answers, nothing separates them. So each
variant meets the problem it was made for, on a testbed built so that plain GRPO has that problem
(:mod:`course_lib.lectures.family_testbeds` runs them; :mod:`course_lib.lectures.family_claims` states each claim
and its verdict):

1. :data:`VARIANTS`: each variant as a small dict of the loop's switches (:class:`course_lib.lm_rl_config.LMRLConfig`),
   its paper and the one line of the objective it changes; DAPO's parts are variants of their own, so each part
   is measured alone;
2. :data:`TESTBEDS`: the four problems and the accuracy table, each with the variants it compares, the variant
   they are compared with, and the learning rates every one of them is tuned over.
"""

from __future__ import annotations

from dataclasses import dataclass

from course_lib.lectures import capstone

# ---------------------------------------------------------------------------
# 1. The variants: switches of the one loop
# ---------------------------------------------------------------------------

VARIANTS: dict[str, dict] = {
    "GRPO": {
        "switches": {},
        "paper": "Shao et al. 2024, DeepSeekMath (arXiv 2402.03300)",
        "changes": "A_i = (r_i - mean(r)) / std(r) within the group; PPO's clipped ratio per token; k3 KL in the loss",
    },
    "PPO": {
        # chapter 08's PPO: its value model, GAE, and PPO_CHANGES (token mean, k1 KL in the reward, symmetric clip,
        # a 20-round lr warm-up, whitened advantages), on chapter 08's passes and minibatches
        "switches": {"algo": "ppo", **capstone.PPO_CHANGES},
        "paper": "Schulman et al. 2017; Ouyang et al. 2022, InstructGPT (arXiv 2203.02155)",
        "changes": "A_t = GAE(r_t - beta KL_t, V(s_t)) per token against a learned value model (chapter 08's recipe)",
    },
    "RLOO": {
        "switches": {"adv_estimator": "rloo"},
        "paper": "Ahmadian et al. 2024, Back to Basics (arXiv 2402.14740); Kool et al. 2019",
        "changes": "A_i = r_i - mean_{j != i} r_j: the others' mean, no std",
    },
    "REINFORCE++": {
        "switches": {"adv_estimator": "reinforce++"},
        "paper": "Hu 2025, REINFORCE++ (arXiv 2501.03262)",
        "changes": "A_i = (a_i - mean_batch(a)) / std_batch(a), a_i = r_i - mean_group(r): one scale for the batch",
    },
    "Dr.GRPO": {
        "switches": {"normalize_std": False, "loss_agg": "seq-mean-token-sum-norm"},
        "paper": "Liu et al. 2025, Understanding R1-Zero-Like Training (arXiv 2503.20783)",
        "changes": "A_i = r_i - mean(r) (no std); token sums divided by a constant L, not by |o_i|",
    },
    "DAPO": {
        "switches": {
            "clip_eps_high": 0.28,
            "dynamic_sampling": True,
            "loss_agg": "token-mean",
            "kl_coef": 0.0,
            "overlong_filter": True,
        },
        "paper": "Yu et al. 2025, DAPO (arXiv 2503.14476)",
        "changes": "clip-higher 0.28; only groups with 0 < acc < 1; mean over all tokens; no KL; cut-off ones masked",
    },
    "DAPO-clip-higher": {
        "switches": {"clip_eps_high": 0.28},
        "paper": "Yu et al. 2025, DAPO, section 3.1",
        "changes": "clip(ratio, 1 - 0.2, 1 + 0.28): the upper clip range alone",
    },
    "DAPO-dyn-sampling": {
        "switches": {"dynamic_sampling": True},
        "paper": "Yu et al. 2025, DAPO, section 3.2",
        "changes": "groups whose rewards are all equal are dropped, and only the missing ones sampled again",
    },
    "DAPO-token-mean": {
        "switches": {"loss_agg": "token-mean"},
        "paper": "Yu et al. 2025, DAPO, section 3.3",
        "changes": "1/sum|o_i| sum_i sum_t: the mean over all tokens of the batch, that alone",
    },
    "DAPO-overlong-filter": {
        "switches": {"overlong_filter": True},
        "paper": "Yu et al. 2025, DAPO, section 3.4",
        "changes": "a completion cut off without EOS leaves the loss (its mask is zeroed)",
    },
    "DAPO-soft-overlong": {
        # DAPO's cache is a fifth of its limit (4,096 of 20,480 tokens); here 3 of the length testbed's 14
        "switches": {"overlong_cache": 3},
        "paper": "Yu et al. 2025, DAPO, section 3.4, eq. 13",
        "changes": "reward - (|o| - (L - 3)) / 3 over the last 3 tokens before the limit L, -1 when cut off",
    },
    "GSPO": {
        "switches": {"policy_loss": "gspo", "clip_eps": 3e-4, "clip_eps_high": 4e-4},
        "paper": "Zheng et al. 2025, Group Sequence Policy Optimization (arXiv 2507.18071)",
        "changes": "s_i = (pi/pi_old)(o_i)^(1/|o_i|), one ratio and one clip (3e-4, 4e-4) per sequence",
    },
    "GMPO": {
        "switches": {"policy_loss": "gmpo", "clip_eps": 0.4},
        "paper": "Zhao et al. 2025, Geometric-Mean Policy Optimization (arXiv 2507.20673)",
        "changes": "A_i * (prod_t clipped ratio_t)^(1/|o_i|): a geometric mean over tokens, log-ratio clip 0.4",
    },
    "CISPO": {
        # the cap 1 + 4 = 5 is TRL's recommended epsilon_high, which TRL's help attributes to ScaleRL
        # (arXiv 2510.13786); MiniMax-M1 tunes only the upper bound and sets no lower one
        "switches": {"policy_loss": "cispo", "clip_eps_high": 4.0, "loss_agg": "token-mean"},
        "paper": "MiniMax 2025, MiniMax-M1 (arXiv 2506.13585), section 3.1",
        "changes": "-sg(min(ratio, 5)) A_t log pi(o_t): the weight clipped and detached; every token keeps a gradient",
    },
    "SAPO": {
        "switches": {"policy_loss": "sapo"},
        "paper": "Gao et al. 2025, Soft Adaptive Policy Optimization (arXiv 2511.20347)",
        "changes": "-(4/tau) sigmoid(tau (ratio - 1)) A_t: a smooth gate in place of the hard clip",
    },
}
"""Every variant as switches of :func:`course_lib.lm_rl.train` beside GRPO's recipe (no switch changed), its
paper, and the one line of the objective it changes. The DAPO bundle leaves out the soft overlong punishment: on a
task whose right answers can be as long as the limit (chapter 08's 3 digits + EOS), it costs right answers reward."""

ESTIMATOR_REFERENCE = {
    "REINFORCE": {
        "paper": "Williams 1992 (chapter 02)",
        "changes": "A_i = r_i: no baseline; the reference every baseline is measured against",
    },
}
"""The estimator testbed's reference, which is not a variant of GRPO."""


# ---------------------------------------------------------------------------
# 2. The testbeds: a problem each, the variants that meet it
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Testbed:
    """One problem, built so that plain GRPO has it, and the variants measured on it."""

    name: str
    problem: str
    """The problem, in one line."""
    task: str
    """Where it is measured, in one line."""
    variants: tuple[str, ...]
    """The variants compared, the baseline first."""
    lr_grid: tuple[float, ...] = ()
    """The learning rates every variant is tuned over (empty: nothing is trained)."""

    @property
    def baseline(self) -> str:
        return self.variants[0]


TESTBEDS: dict[str, Testbed] = {
    "estimators": Testbed(
        "estimators",
        "a group advantage can be biased (the group mean, the group's std) and is noisy",
        "a contextual bandit whose exact gradient is known; prompts with p = 0.02 to 0.98; binary reward",
        ("GRPO", "REINFORCE", "Dr.GRPO", "RLOO", "REINFORCE++"),
    ),
    "length": Testbed(
        "length",
        "completions run out of room, and a wrong answer's tokens weigh 1/|o| under GRPO's mean",
        "chapter 10's 3-digit addition with a scratchpad, max_new_tokens 14 (the longest scratchpads need 15)",
        ("GRPO", "Dr.GRPO", "DAPO-token-mean", "DAPO-overlong-filter", "DAPO-soft-overlong"),
        lr_grid=(5e-4, 1e-3, 2e-3),
    ),
    "sparse": Testbed(
        "sparse",
        "most groups are all wrong (or all right): zero advantage, zero gradient",
        "chapter 08's 2-digit addition with an exact-match reward (1 or 0) from its warm-up",
        ("GRPO", "DAPO-clip-higher", "DAPO-dyn-sampling"),
        lr_grid=(1e-3, 2e-3, 4e-3),
    ),
    "drift": Testbed(
        "drift",
        "8 passes x 4 minibatches per batch: the ratios drift far from 1 and a hard clip silences tokens",
        "chapter 08's task and reward, 32 optimiser steps on each batch instead of 8",
        ("GRPO", "GSPO", "GMPO", "CISPO", "SAPO"),
        lr_grid=(1e-3, 2e-3, 4e-3),
    ),
    "accuracy": Testbed(
        "accuracy",
        "none on purpose: chapter 08's task, where the problems above barely occur",
        "chapter 08's task and recipe (4 passes x 2 minibatches), 48 of its rounds",
        (
            "GRPO",
            "PPO",
            "RLOO",
            "REINFORCE++",
            "Dr.GRPO",
            "DAPO",
            "DAPO-clip-higher",
            "DAPO-dyn-sampling",
            "GSPO",
            "CISPO",
        ),
        lr_grid=(1e-3, 2e-3, 4e-3),
    ),
}
"""The testbeds in the order the chapter meets them; ``benchmarks/grpo_family.py`` runs every trained one."""

TRAINED = ("length", "sparse", "drift", "accuracy")
"""The testbeds that train a model (the estimator one is exact and Monte Carlo)."""


def variant_switches(name: str) -> dict:
    """The loop's switches of variant ``name`` (a copy), or ValueError naming the unknown variant."""
    if name not in VARIANTS:
        raise ValueError(f"name: one of {sorted(VARIANTS)}, got {name!r}")
    return dict(VARIANTS[name]["switches"])


def measured_variants() -> list[str]:
    """Every variant some trained testbed measures, in the order of :data:`VARIANTS`."""
    used = {name for bed in TRAINED for name in TESTBEDS[bed].variants}
    return [name for name in VARIANTS if name in used]
