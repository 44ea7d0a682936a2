"""What RL reads from a language model: completions, their mask, per-token log-probs and values.

The small pieces that :mod:`course_lib.lm_rl`'s loop is made of, for the course's ``TinyLM`` and any
``transformers`` causal LM alike: ``model(ids)`` gives ``(N, T, V)`` logits for a TinyLM, while a
``transformers`` model is called with ``input_ids`` and ``attention_mask`` (left-padded prompts) and its
``.logits`` read; :func:`model_logits` is the only place that knows the difference.

- :func:`sample_completions`: ``G`` completions per prompt, each stopped at EOS and padded after it;
- :func:`completion_mask`: 1 for every token up to and including the first EOS, 0 after;
- :func:`token_logps`: ``log pi(y_t | x, y_<t)`` of every completion token in one forward pass over
  prompt + completion, from the logits one position to the left;
- :func:`token_values`: a value model's ``V(s_t)`` at the same positions.

Shapes: ``B`` prompts, ``G`` completions per prompt, ``N`` sequences, ``P`` prompt tokens, ``L`` completion
tokens, ``V`` vocabulary.
"""

from __future__ import annotations

import torch
from einops import repeat
from torch import nn

from course_lib import _validate
from course_lib.policy_gradient import gather_log_probs
from course_lib.tiny_lm import TinyLM, ValueModel


def _is_transformers(model) -> bool:  # every transformers PreTrainedModel has this attribute
    return getattr(model, "main_input_name", None) == "input_ids"


def model_logits(
    model, ids: torch.Tensor, attention_mask: torch.Tensor | None = None, keep_last: int | None = None
) -> torch.Tensor:
    """``(N, T)`` ids to ``(N, T', V)`` logits of the last ``keep_last`` positions (all when None)."""
    if not _is_transformers(model):
        if attention_mask is not None and not bool(attention_mask.all()):
            raise ValueError("prompt_mask: the course's TinyLM reads unpadded prompts only (all ones, or None)")
        logits = model(ids)  # (N, T, V)
        return logits if keep_last is None else logits[:, -keep_last:]
    # The attention mask hides left padding; the positions start at 0 at the first real token, as generate()
    # counts them. A rotary model (Qwen2) sees only relative positions and would not notice; GPT-2's learned
    # absolute positions would be shifted by the padding without them.
    attention_mask = torch.ones_like(ids) if attention_mask is None else attention_mask
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)  # (N, T)
    out = model(
        input_ids=ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        logits_to_keep=keep_last or 0,
    )  # logits_to_keep=0 keeps every position
    return out.logits.float()


def _shared_prompt_logits(model, prompt_ids, prompt_mask, completion_ids) -> torch.Tensor | None:
    """TinyLM's ``(N, L, V)`` completion logits with each distinct prompt read once
    (:meth:`~course_lib.tiny_lm.TinyLM.continuation_hidden`); None where no prompt is shared, or another model."""
    if not isinstance(model, TinyLM) or prompt_mask is not None:
        return None
    hidden = model.continuation_hidden(prompt_ids.long(), completion_ids[:, :-1].long())  # (N, L, D) or None
    return None if hidden is None else model.head(hidden)


def completion_mask(completion_ids: torch.Tensor, eos_id: int) -> torch.Tensor:
    """1.0 for every token up to and including the first EOS of its row, 0.0 after it.

    The EOS is part of the completion: stopping is an action the policy took, and it gets the
    completion's advantage like any other token. A row without EOS (cut at ``max_new_tokens``)
    is valid everywhere.

    Args:
        completion_ids: ``[..., L]`` integer ids.
        eos_id: the id of EOS.

    Returns:
        ``[..., L]`` float32 mask.
    """
    _validate.require_tensor("completion_ids", completion_ids, floating=False, min_dim=1)
    if completion_ids.is_floating_point():
        raise ValueError(f"completion_ids: expected integer ids, got {completion_ids.dtype}")
    is_eos = (completion_ids == eos_id).long()  # (..., L)
    eos_before = torch.cumsum(is_eos, dim=-1) - is_eos  # (..., L): EOS strictly before t; 0 through the first EOS
    return (eos_before == 0).float()


@torch.no_grad()
def sample_completions(
    model,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor | None,
    group_size: int,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    temperature: float = 1.0,
    greedy: bool = False,
    generator: torch.Generator | None = None,
    top_p: float = 1.0,
    return_logps: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``(B, P)`` prompts to ``(B * G, L)`` completions: G per prompt, adjacent rows, PAD after each EOS.

    TinyLM samples with its own ``generate`` (which never writes PAD); a ``transformers`` model with
    ``model.generate`` (seed it with ``torch.manual_seed``: it takes no generator).

    ``return_logps`` (TinyLM only): also the ``(B * G, L)`` log-probs of the tokens under the distribution they
    were drawn from, which the sampler has in hand: :func:`token_logps` with ``pad_id`` (PAD out of the
    distribution) gives the same, up to float rounding, in a forward pass of its own.
    """
    ids = repeat(prompt_ids, "B P -> (B G) P", G=group_size)  # each prompt G times, in group order
    if not _is_transformers(model):
        if top_p < 1.0:
            raise ValueError(f"top_p: the course's TinyLM samples the whole distribution (top_p=1), got {top_p}")
        return model.generate(
            ids,
            max_new_tokens,
            temperature=temperature,
            greedy=greedy,
            eos_id=eos_id,
            pad_id=pad_id,
            generator=generator,
            return_logps=return_logps,
        )  # (N, L), or (N, L) ids and (N, L) log-probs
    if return_logps:
        raise ValueError("return_logps: only the course's TinyLM returns its log-probs (use token_logps)")
    mask = torch.ones_like(ids) if prompt_mask is None else repeat(prompt_mask, "B P -> (B G) P", G=group_size)
    sampling = (
        {"do_sample": False} if greedy else {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0}
    )  # top_k=0: no cut
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=max_new_tokens,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        **sampling,
    )[:, ids.shape[1] :]  # (N, <= L)
    return nn.functional.pad(out, (0, max_new_tokens - out.shape[1]), value=pad_id)  # (N, L)


def token_logps(
    model,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor | None,
    completion_ids: torch.Tensor,
    temperature: float = 1.0,
    pad_id: int | None = None,
    with_entropy: bool = False,
):
    """``log pi(y_t | x, y_<t)`` of every completion token, in one forward pass over prompt + completion.

    The logits at position ``P - 1 + t`` score completion token ``t``: the last prompt token
    predicts the first completion token. Forget the shift and every log-prob scores the wrong token.

    Args:
        prompt_ids, prompt_mask: ``(N, P)`` prompts (left-padded, mask 0 on padding; None: no padding).
        completion_ids: ``(N, L)`` completions.
        temperature: divides the logits, as at sampling time, so ratios compare like with like.
        pad_id: a token the sampler never writes (TinyLM's PAD): removed from the distribution here
            too, so the probabilities scored are the ones sampled from; its own positions score 0.
        with_entropy: also return the ``(N, L)`` entropy of each position's distribution.

    Returns:
        ``(N, L)`` log-probs (differentiable), or ``(logp, entropy)``.
    """
    _validate.require_positive("temperature", temperature)
    N, L = completion_ids.shape
    logits = _shared_prompt_logits(model, prompt_ids, prompt_mask, completion_ids)  # (N, L, V), or None
    if logits is None:  # one pass over prompt + completion
        ids = torch.cat([prompt_ids, completion_ids[:, :-1]], dim=1).long()  # (N, P + L - 1)
        mask = None if prompt_mask is None else torch.cat([prompt_mask, torch.ones_like(completion_ids[:, :-1])], 1)
        logits = model_logits(model, ids, mask, keep_last=L)  # (N, L, V)
    logits = logits / temperature
    if pad_id is not None:
        logits = logits.masked_fill(torch.arange(logits.shape[-1], device=logits.device) == pad_id, -float("inf"))
    logp = gather_log_probs(logits, completion_ids.long())  # (N, L)
    if pad_id is not None:
        logp = logp.masked_fill(completion_ids == pad_id, 0.0)  # padding: outside the mask, kept finite
    if not with_entropy:
        return logp
    probs = torch.softmax(logits, dim=-1)
    entropy = -(probs * torch.log_softmax(logits, dim=-1).nan_to_num(neginf=0.0)).sum(-1)  # (N, L)
    return logp, entropy


def token_values(value_model: nn.Module, prompt_ids: torch.Tensor, completion_ids: torch.Tensor) -> torch.Tensor:
    """``(N, L)`` values ``V(s_t)`` of the state before completion token ``t``.

    The same shift as :func:`token_logps`: the position before a token holds the state it is chosen in.
    """
    if isinstance(value_model, ValueModel):  # each distinct prompt read once, as in token_logps
        hidden = value_model.body.continuation_hidden(prompt_ids.long(), completion_ids[:, :-1].long())  # (N, L, D)
        if hidden is not None:
            return value_model.value_head(hidden)[..., 0]  # (N, L)
    P = prompt_ids.shape[1]
    ids = torch.cat([prompt_ids, completion_ids[:, :-1]], dim=1).long()  # (N, P + L - 1)
    return value_model(ids)[:, P - 1 :]  # (N, L)
