"""Mutants that survive their check because they compute what the reference computes on every input the
exercise allows, each with a one-line reason (read by ``benchmarks/check_mutants.py``).

A key is ``<name>:<line>:<column>:<operator>:<n>`` (``benchmarks/_mutate.py``), its line counted from the ``def``;
``<name>`` is ``<reference>><helper>`` for a change in a helper of a thin reference, the line counted from the
helper's ``def``. A key may hold ``*`` (``fnmatch``), for every mutant of one kind at one place.
A survivor that is not equivalent is a missing case: add the case to the check, do not list it here.

The reasons fall in a few kinds, named first in each line:

- **no gradient asked**: a ``.detach()`` added to (or dropped from) a value that no gradient ever reaches: integer
  inputs (ids, counts), data (rewards), or outputs the docstring calls constants and every caller detaches again;
  the values are the reference's exactly;
- **same axis**: ``dim=-1`` written ``dim=1`` (or ``shape[0]`` as ``shape[-1]``) where the function refuses any
  other number of dimensions, so the two name the same axis;
- **padding never read**: padding filled with 1 instead of 0 before ``masked_mean`` (which takes the valid entries
  with ``torch.where``), and ``torch.where`` passes no gradient into the padding either way;
- **validation only**: a changed test of the arguments that still accepts every valid input (the exercises ask
  for no ``ValueError``; where one does, the check has a ``refuses`` case and such mutants are rejected);
- **dead or unobservable**: the rest, each with its own reason.
"""

EQUIVALENT: dict[str, str] = {
    # chapter 00
    "discounted_return:14:4:detach:1": "no gradient asked: the return of rewards, which are data",
    "reward_to_go:18:4:detach:1": "no gradient asked: returns of rewards, which are data",
    "reward_to_go:14:44:constant:2": "dead: rewards[..., -1] for rewards[..., 0] inside zeros_like, whose shape only is read",
    # chapter 01
    "sort_inclusion_ordering_reward:26:4:detach:1": "no gradient asked: a reward computed from integer token ids",
    # chapter 02
    "mc_policy_gradient:34:4:detach:1": "no gradient asked: both inputs are detached on line 27, so nothing is attached",
    "mc_policy_gradient:27:*:detach:1": (
        "no gradient asked: the same numbers; only whether the estimate stays attached to the caller's graph "
        "changes, and the docstring returns an estimate (a number per action), not a differentiable function"
    ),
    "mc_policy_gradient:24:58:constant:2": "validation only: n_samples=0 is outside 'a positive int'",
    "mc_policy_gradient:29:36:constant:2": "same axis: logits are (V,), 1-D (line 21 refuses others): dim=0 is dim=-1",
    "mc_policy_gradient:32:62:constant:2": "same axis: logits are (V,), 1-D: shape[-1] is shape[0]",
    "reinforce_loss:25:36:constant:1": "padding never read: logp's padding is 1 instead of 0 before masked_mean",
    # chapter 03
    "compute_deltas:*:*:detach:1": (
        "no gradient asked: deltas are the loss's constant weights (reinforce_loss and grpo_loss detach them), "
        "computed from rewards, which are data"
    ),
    "compute_deltas:*:*:negate:1": "same axis: rewards are (B, G), exactly 2-D (require_rewards_table): -1 is 1",
    "gradient_variance:16:62:constant:1": "same values: the mean without keepdim is (P,), which broadcasts as (1, P)",
    "gradient_variance:18:42:constant:*": (
        "same total: the next line sums per_coordinate over all of it, so summing the squares over the other "
        "axis first adds the same N * P numbers in another order (within rtol)"
    ),
    # chapter 04
    "compute_gae:34:4:detach:*": (
        "no gradient asked: advantages and returns are targets, constants in every loss (the losses detach them)"
    ),
    "compute_gae:29:41:constant:2": "same values: running starts as a 0-dim zero, which broadcasts to (...) at t = T-1",
    "td_residuals:18:4:detach:1": "no gradient asked: the residuals feed GAE's advantages, constants in the losses",
    # chapter 05
    "clipped_surrogate_loss:37:4:detach:2": "the mutant is the reference: info is a dict, _detach_if_tensor returns it",
    "clipped_surrogate_loss:3[123]:*:constant:1": (
        "padding never read: the padding is 1 instead of 0 before masked_mean and clip_diagnostics, which read the "
        "valid entries only"
    ),
    "value_loss:3[126]:*:constant:1": "padding never read: the padding is 1 instead of 0 before masked_mean",
    # chapter 06
    "group_advantages:20:4:detach:1": "no gradient asked: advantages are constants (grpo_loss detaches them again)",
    "grpo_loss:69:4:detach:2": "the mutant is the reference: info is a dict, _detach_if_tensor returns it",
    "grpo_loss:51:31:detach:1": "no gradient asked: the advantages made from rewards are detached on the next line",
    "grpo_loss:52:10:detach:1": (
        "no gradient asked: clipped_surrogate (ppo.py) detaches adv itself, and the diagnostics run under no_grad"
    ),
    "grpo_loss:59:8:inplace:1": (
        "same values and gradients: per_token is the fresh tensor clipped_surrogate returned on the line before, "
        "so += changes nothing the caller holds, and autograd accepts it"
    ),
    # chapter 07
    "read_sweep:21:*": "validation only: the dtype test of group_sizes still accepts every integer tensor",
    "read_sweep:26:*": (
        "validation only: the test of each axis still accepts every non-empty 1-D strictly increasing axis"
    ),
    "read_sweep:35:35:constant:2": "same values: nonzero() of a 1-D mask is (n, 1), so [0, -1] is [0, 0]",
    # chapter 08
    "completion_mask:19:4:detach:1": "no gradient asked: a mask made from integer ids",
    "completion_mask:14:87:constant:2": "validation only: min_dim=0 lets a 0-dim tensor in, which has no L axis",
    "grpo_step:36:33:compare:1": (
        "same values: with kl_coef=0 the reference's log-probs are computed and added times 0 (finite: k3 of "
        "finite log-probs), which changes neither the loss nor the gradient"
    ),
    "grpo_step:36:43:constant:2": "same values: kl_coef > -1 is kl_coef >= 0 for the weights allowed (non-negative)",
    # chapter 09
    "completion_logps:25:4:detach:2": "no gradient asked: the mask is made from integer ids",
    "answer_reward>completion_text:9:7:boolop:1": (
        "validation only: the test of a conversation still takes every non-empty list of messages (dicts); it lets "
        "other sequences through, and the exercise asks for no ValueError on completions of another kind"
    ),
    "answer_reward>completion_text:9:78:constant:2": (
        "validation only: every message of a conversation is a dict, so testing the first one tests the last"
    ),
    "grpo_config_kwargs:21:66:constant:2": (
        "validation only: num_processes=0 is no number of processes; the exercise asks for ValueError only where a "
        "config cannot be translated or split, and its check refuses those"
    ),
    "grpo_config_kwargs:28:38:binop:1": "unobservable: a number inside the ValueError's message, whose wording is not compared",
    # chapter 10
    "aggregation_token_weight:44:4:detach:1": "no gradient asked: weights computed from lengths, which are counts",
    "aggregation_token_weight:32:*": "validation only: the test of length still accepts every non-empty tensor of lengths >= 0",
    "aggregation_token_weight:36:14:inplace:1": "same values: clamp_ on o.max(), a fresh tensor nobody else holds",
    "aggregation_token_weight:41:33:inplace:1": "same values: clamp_ on o.sum(), a fresh tensor nobody else holds",
    "aggregation_token_weight:36:32:constant:2": (
        "dead: max(o).clamp(min=0) differs from min=1 only when every length is 0, where torch.where gives 0 anyway"
    ),
    "aggregation_token_weight:39:35:constant:2": "dead: o.clamp(min=0) differs only where o = 0, where torch.where gives 0",
    "aggregation_token_weight:41:51:constant:2": (
        "dead: sum(o).clamp(min=0) differs only when every length is 0, where torch.where gives 0 anyway"
    ),
    "pass_at_k:34:4:detach:1": "no gradient asked: an estimate from integer counts",
    "completion_style>parse_completion:13:56:constant:2": (
        "validation only: n_digits=0 is no number of digits per operand (the task has 1 to 4), and the exercise "
        "asks for no ValueError"
    ),
    "style_share:13:53:constant:1": "same values: numpy's reshape infers any negative size, so reshape(-2) is reshape(-1)",
    # chapter 11
    "cispo_loss:31:29:detach:1": "no gradient asked: the ratio feeds only the weight, which is detached on line 33",
    "rloo_advantages:2[25]:*:detach:1": "no gradient asked: advantages are constants (the losses detach them) of rewards, data",
    "rloo_advantages:*:*:negate:1": "same axis: rewards are (B, G), exactly 2-D (require_rewards_table): -1 is 1",
}
