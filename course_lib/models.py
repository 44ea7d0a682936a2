"""Policies small enough to train in seconds: the CS336 sorting model and a one-step categorical policy.

:class:`SortingPolicy` is the model of Stanford CS336 (2025), lecture 17 ("Policy
gradient"), written here from its description. It is *non-autoregressive*: it reads
the whole prompt once, squeezes it into one hidden vector, and then scores every
response position independently of the tokens chosen at the others:

    e_p   = E[prompt_p]                              embedding of prompt token p    (D,)
    h     = sum_p  e_p @ W_enc[p]                    one hidden vector              (D,)
    d_t   = h @ W_dec[t]                             one query per response position (D,)
    logits[t, v] = d_t . E[v]                        scored against the same table   (V,)

The embedding table ``E`` is used twice, to read the prompt and to score the
response (tied weights, as in GPT-2). Because the positions are independent given
the prompt, ``pi(y | x) = prod_t softmax(logits[t])[y_t]``, and a response is
sampled one position at a time *in parallel*: no token depends on an earlier one.
That is what makes the model tiny and fast, and also what limits it: it cannot
avoid repeating a token it already wrote, because it never sees what it wrote.

:class:`CategoricalPolicy` is even smaller: one distribution over ``V`` actions,
its logits a parameter. Its expected reward can be summed exactly, so chapter 02
checks Monte-Carlo policy gradients against the exact one on it
(:func:`course_lib.policy_gradient.expected_reward_gradient`).

Shapes: ``B`` prompts, ``G`` responses per prompt, ``T`` positions, ``V`` vocabulary,
``D`` embedding dimension.
"""

from __future__ import annotations

import math

import torch
from einops import einsum, rearrange
from torch import nn

from course_lib import _validate


class SortingPolicy(nn.Module):
    """The CS336 lecture-17 sorting model: encode the prompt into one vector, decode each position.

    Parameters, every entry drawn from ``N(0, 1/D)`` (a standard normal scaled by
    ``1 / sqrt(D)``, so a product with a matrix keeps the scale of its input). The
    lecture's own code differs in one place: its table is an ``nn.Embedding``, whose
    default init is ``N(0, 1)``; ``embedding_std=1.0`` reproduces it:

    =========== ============= ================================================
    name        shape         meaning
    =========== ============= ================================================
    embedding   ``(V, D)``    one vector per token, read and scored (tied)
    encode      ``(Tp, D, D)`` one matrix per prompt position
    decode      ``(Tr, D, D)`` one matrix per response position
    =========== ============= ================================================

    Args:
        vocab_size: ``V``, the number of token ids.
        embedding_dim: ``D``, the width of the embeddings and of the hidden vector.
        prompt_length: ``Tp``, the tokens per prompt.
        response_length: ``Tr``, the tokens per response.
        generator: optional ``torch.Generator`` for the initialisation (the global
            RNG when ``None``), so that a run can be reproduced without touching
            global state.
        embedding_std: standard deviation of the embedding table at initialisation;
            ``None`` (the course's default) takes ``1 / sqrt(D)`` like the matrices, ``1.0``
            is the lecture's ``nn.Embedding``.
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        prompt_length: int,
        response_length: int,
        generator: torch.Generator | None = None,
        embedding_std: float | None = None,
    ):
        super().__init__()
        for name, value in (
            ("vocab_size", vocab_size),
            ("embedding_dim", embedding_dim),
            ("prompt_length", prompt_length),
            ("response_length", response_length),
        ):
            _validate.require_int(name, value, minimum=1)
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.prompt_length = prompt_length
        self.response_length = response_length
        D = embedding_dim
        scale = 1.0 / math.sqrt(D)
        # The table is scaled like the matrices: the initial logits then have variance Tp / D
        # (0.3 for the lecture's Tp = 3, D = 10), so the untrained policy is close to uniform
        # and explores. A unit-variance table (nn.Embedding's default) would give logits of
        # variance Tp * D = 30: a policy nearly deterministic before it has learnt anything.
        if embedding_std is not None:
            _validate.require_positive("embedding_std", embedding_std)
        table_std = scale if embedding_std is None else float(embedding_std)
        self.embedding = nn.Parameter(torch.randn(vocab_size, D, generator=generator) * table_std)  # (V, D)
        self.encode = nn.Parameter(torch.randn(prompt_length, D, D, generator=generator) * scale)  # (Tp, D, D)
        self.decode = nn.Parameter(torch.randn(response_length, D, D, generator=generator) * scale)  # (Tr, D, D)

    def forward(self, prompts: torch.Tensor) -> torch.Tensor:
        """Logits of every response position.

        Args:
            prompts: ``(B, Tp)`` integer token ids in ``[0, V)``.

        Returns:
            ``(B, Tr, V)`` logits; ``logits[b, t]`` is the distribution of response token ``t``.
        """
        _require_prompts(prompts, self.vocab_size, self.prompt_length)
        embedded = self.embedding[prompts.long()]  # (B, Tp, D)
        # Encode: each prompt position has its own matrix; summing over positions gives one vector.
        hidden = einsum(embedded, self.encode, "B Tp Din, Tp Din Dout -> B Dout")  # (B, D)
        # Decode: each response position has its own matrix, applied to the same vector.
        queries = einsum(hidden, self.decode, "B Din, Tr Din Dout -> B Tr Dout")  # (B, Tr, D)
        # Tied weights: score each query against every token's embedding.
        return einsum(queries, self.embedding, "B Tr D, V D -> B Tr V")  # (B, Tr, V)


def sample_responses(
    model: nn.Module, prompts: torch.Tensor, group_size: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``G`` responses per prompt, every position sampled independently from its softmax.

    The model is non-autoregressive, so one forward pass gives the distributions of
    all positions and one ``torch.multinomial`` call samples them all. No gradient
    flows through sampling (the log-derivative trick is what makes that fine).

    Args:
        model: maps ``(B, T)`` prompts to ``(B, T, V)`` logits (a :class:`SortingPolicy`).
        prompts: ``(B, T)`` integer token ids.
        group_size: ``G``, responses per prompt, a positive int.
        generator: ``torch.Generator`` for the sampling (the global RNG when ``None``).

    Returns:
        ``(B, G, T)`` LongTensor of sampled token ids.
    """
    _validate.require_int("group_size", group_size, minimum=1)
    _validate.require_tensor("prompts", prompts, floating=False)
    if prompts.dim() != 2:
        raise ValueError(f"prompts: expected shape (B, T), got {tuple(prompts.shape)}")
    with torch.no_grad():
        logits = model(prompts)  # (B, T, V)
        B, T, V = logits.shape
        probs = torch.softmax(logits.double(), dim=-1)  # float64: multinomial is picky about sums
        flat = rearrange(probs, "B T V -> (B T) V")
        samples = torch.multinomial(flat, group_size, replacement=True, generator=generator)  # (B*T, G)
    return rearrange(samples, "(B T) G -> B G T", B=B, T=T)  # (B, G, T)


def greedy_responses(model: nn.Module, prompts: torch.Tensor) -> torch.Tensor:
    """The most likely token at every position: the model's answer when it stops exploring.

    Args:
        model: maps ``(B, T)`` prompts to ``(B, T, V)`` logits.
        prompts: ``(B, T)`` integer token ids.

    Returns:
        ``(B, T)`` LongTensor.
    """
    _validate.require_tensor("prompts", prompts, floating=False)
    if prompts.dim() != 2:
        raise ValueError(f"prompts: expected shape (B, T), got {tuple(prompts.shape)}")
    with torch.no_grad():
        return model(prompts).argmax(dim=-1)  # (B, T)


class CategoricalPolicy(nn.Module):
    """One categorical distribution over ``V`` actions, its logits the only parameter.

    ``pi = softmax(logits)``. A one-step "language model" whose every response is a
    single token: small enough to enumerate, so its exact policy gradient is known.

    Args:
        n_actions: ``V``, the number of actions.
        logits: optional ``(V,)`` initial logits (zeros, the uniform policy, when ``None``).
    """

    def __init__(self, n_actions: int, logits: torch.Tensor | None = None):
        super().__init__()
        _validate.require_int("n_actions", n_actions, minimum=1)
        if logits is None:
            logits = torch.zeros(n_actions)
        _validate.require_tensor("logits", logits)
        _validate.require_shape("logits", logits, (n_actions,), like="n_actions")
        self.logits = nn.Parameter(logits.detach().clone())  # (V,)

    def forward(self) -> torch.Tensor:
        """The logits, ``(V,)``."""
        return self.logits

    def probs(self) -> torch.Tensor:
        """``pi = softmax(logits)``, ``(V,)``."""
        return torch.softmax(self.logits, dim=-1)

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` actions drawn i.i.d. from ``pi``, a ``(n,)`` LongTensor."""
        _validate.require_int("n", n, minimum=1)
        with torch.no_grad():
            return torch.multinomial(self.probs().double(), n, replacement=True, generator=generator)


# ---------------------------------------------------------------------------
# Validation helpers
# ---------------------------------------------------------------------------


def _require_prompts(prompts, vocab_size: int, prompt_length: int) -> None:
    _validate.require_tensor("prompts", prompts, floating=False)
    if prompts.is_floating_point() or prompts.dtype == torch.bool:
        raise ValueError(f"prompts: expected an integer tensor of token ids, got dtype {prompts.dtype}")
    if prompts.dim() != 2 or prompts.shape[1] != prompt_length:
        raise ValueError(
            f"prompts: expected shape (B, {prompt_length}) for prompt_length={prompt_length}, "
            f"got {tuple(prompts.shape)}"
        )
    if prompts.numel() and (int(prompts.min()) < 0 or int(prompts.max()) >= vocab_size):
        raise ValueError(
            f"prompts: expected token ids in [0, {vocab_size}), "
            f"got values in [{int(prompts.min())}, {int(prompts.max())}]"
        )
