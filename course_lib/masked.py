"""Masked reductions: sums and means over the valid entries of a padded batch.

Responses have different lengths, so every per-token quantity of the course lives in a
padded ``[..., T]`` tensor with a mask beside it (1 for a real token, 0 for padding). Every
loss and diagnostic reduces it with the two functions below, written once:

- :func:`masked_sum` adds the valid entries (over one axis or all of them);
- :func:`masked_mean` divides that sum by the number of valid entries, and gives 0, not NaN,
  where there is none (an empty response contributes nothing).

Padding may hold anything, a NaN or an infinite log-prob included: the reductions pick the
valid entries with ``torch.where``, never with ``x * mask`` (``0 * nan`` is ``nan``).
"""

from __future__ import annotations

import torch

from course_lib import _validate


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of the valid entries of ``x`` and their count, over ``dim`` (or over all entries when ``None``).

    Args:
        x: ``[...]`` any tensor.
        mask: ``[...]`` same shape, 1 (True) for valid entries, 0 for padding.
        dim: the axis to reduce, or ``None`` for all of them.

    Returns:
        ``(total, count)``: the sums and the numbers of valid entries, both of ``x``'s shape without ``dim``.
    """
    _check_masked_sum(x, mask, dim)
    valid = mask.bool()  # (...): the mask holds only 0 and 1 (checked); a bool one is used as it is
    x = torch.where(valid, x, torch.zeros_like(x))  # not x * valid: a NaN in the padding would survive
    if dim is None:
        return x.sum(), valid.sum()
    return x.sum(dim=dim), valid.sum(dim=dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of the valid entries of ``x`` (over ``dim``, or over all entries when ``None``).

    Args:
        x: ``[...]`` any tensor.
        mask: ``[...]`` same shape, 1 (True) for valid entries, 0 for padding.
        dim: the axis to reduce, or ``None`` for all of them.

    Returns:
        The mean; where no entry is valid it is 0, not NaN (nothing to contribute).
    """
    total, count = masked_sum(x, mask, dim)  # checks the arguments
    return total / count.clamp(min=1)


def masked_normalize(
    x: torch.Tensor, mask: torch.Tensor, dim: int | None = None, normalize_constant: float = 1.0
) -> torch.Tensor:
    """Sum of the valid entries of ``x`` (over ``dim``, or all), divided by a constant.

    Args:
        x: ``[...]`` any tensor.
        mask: ``[...]`` same shape, 1 (True) for valid entries, 0 for padding.
        dim: the axis to reduce, or ``None`` for all of them.
        normalize_constant: the divisor, positive (Dr. GRPO's ``max_len``).
    """
    _validate.require_positive("normalize_constant", normalize_constant)
    total, _ = masked_sum(x, mask, dim)
    return total / normalize_constant


# ---------------------------------------------------------------------------
# Argument checks: a public function's first line calls its own
# ---------------------------------------------------------------------------


def _check_masked_sum(x, mask, dim) -> None:
    _validate.require_tensor("x", x)
    _validate.require_mask("mask", mask, "x", x)
    if dim is not None and not -x.dim() <= dim < max(x.dim(), 1):
        raise ValueError(f"dim: expected an axis of x (shape {tuple(x.shape)}), got {dim}")
