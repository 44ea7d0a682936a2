"""A tiny character-level transformer language model, small enough to train with RL on a CPU.

The model is a decoder-only transformer in the shape of GPT-2 (Radford et al. 2019),
written top to bottom in the manner of nanoGPT's ``model.py``:

    x_0   = E_tok[ids] + E_pos[0..T-1]                       (B, T, D)
    x_l+1 = x_l + Attn(LN(x_l));  x_l+1 += MLP(LN(x_l+1))    pre-LayerNorm blocks, causal attention
    logits = W_head LN(x_L)                                   (B, T, V)

``logits[:, t]`` is the distribution of the token at position ``t + 1``: everything the
RL chapters need follows from that one shift. The head is *untied* from the token
embedding: with a vocabulary of 14 symbols tying would save fewer than 1% of the
parameters, and an untied head keeps the embedding free to serve the value head that
PPO adds on the same hidden states (chapter 08).

:meth:`TinyLM.generate` samples completions token by token and stops each row at EOS, as a
``transformers`` model's ``generate`` does; :class:`ValueModel` is PPO's critic, the same trunk with a scalar
head; :func:`save_checkpoint` / :func:`load_checkpoint` keep config, weights and history in one file. What RL
does with the model (the completion mask, per-token log-probs, the GRPO and PPO updates) is in
:mod:`course_lib.lm_rl`, shared with ``transformers`` models (chapter 09).

Shapes: ``B`` sequences, ``P`` prompt tokens, ``L`` completion tokens, ``T`` tokens fed to the
model, ``V`` vocabulary, ``D`` model width, ``H`` heads.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from course_lib import _validate
from course_lib._distinct import distinct_rows

# ---------------------------------------------------------------------------
# 1. The tokenizer: one id per character, plus EOS and PAD
# ---------------------------------------------------------------------------

EOS_TEXT = "$"
"""How EOS is written when a completion is decoded to text (``"132$"``: the answer, then the stop)."""


class CharTokenizer:
    """A character-level tokenizer over a fixed alphabet, with explicit EOS and PAD ids.

    The ids of the alphabet come first, in order (for ``"0123456789+="`` the digit ``d``
    has id ``d``), then ``eos_id`` and ``pad_id``. EOS ends a completion: the model learns
    to write it. PAD fills the positions after EOS so that a batch is rectangular; it is
    never a target and never decoded.

    Args:
        alphabet: the characters, each once; must not contain ``EOS_TEXT``.
    """

    def __init__(self, alphabet: str = "0123456789+="):
        if not isinstance(alphabet, str) or not alphabet or len(set(alphabet)) != len(alphabet):
            raise ValueError(f"alphabet: expected a non-empty string of distinct characters, got {alphabet!r}")
        if EOS_TEXT in alphabet:
            raise ValueError(f"alphabet: must not contain {EOS_TEXT!r}, which stands for EOS")
        self.alphabet = alphabet
        self.stoi = {ch: i for i, ch in enumerate(alphabet)}
        self.eos_id = len(alphabet)
        self.pad_id = len(alphabet) + 1
        self.vocab_size = len(alphabet) + 2

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; ``EOS_TEXT`` becomes ``eos_id``."""
        if not isinstance(text, str):
            raise ValueError(f"text: expected a string, got {type(text).__name__}")
        unknown = sorted({ch for ch in text if ch not in self.stoi and ch != EOS_TEXT})
        if unknown:
            raise ValueError(f"text: characters {unknown} are not in the alphabet {self.alphabet!r}")
        return [self.eos_id if ch == EOS_TEXT else self.stoi[ch] for ch in text]

    def decode(self, ids) -> str:
        """Text of ``ids`` up to and including the first EOS (written ``EOS_TEXT``); PAD is skipped."""
        out = []
        for i in ids.tolist() if torch.is_tensor(ids) else list(ids):
            if i == self.eos_id:
                out.append(EOS_TEXT)
                break
            if i != self.pad_id:
                out.append(self.alphabet[i])
        return "".join(out)

    def encode_batch(self, texts: list[str]) -> torch.Tensor:
        """``(B, T)`` ids of texts of equal length (prompts of the task all have the same length)."""
        rows = [self.encode(t) for t in texts]
        if not rows or len({len(r) for r in rows}) != 1:
            raise ValueError("texts: expected a non-empty list of strings of the same length")
        return torch.tensor(rows, dtype=torch.long)  # (B, T)


# ---------------------------------------------------------------------------
# 2. The model
# ---------------------------------------------------------------------------


@dataclass
class TinyLMConfig:
    """Size of a :class:`TinyLM`; the defaults give about 70k parameters."""

    vocab_size: int = 14
    """V, the tokenizer's vocabulary (alphabet + EOS + PAD)."""
    block_size: int = 16
    """The longest sequence (prompt + completion) the model reads: the number of learned positions."""
    n_layer: int = 2
    """Transformer blocks."""
    n_head: int = 4
    """Attention heads per block; must divide d_model."""
    d_model: int = 64
    """D, the width of every hidden state."""

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "d_model"):
            _validate.require_int(name, getattr(self, name), minimum=1)
        if self.d_model % self.n_head:
            raise ValueError(f"n_head: must divide d_model={self.d_model}, got {self.n_head}")


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t attends to positions <= t only."""

    def __init__(self, cfg: TinyLMConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor, cache: dict | None = None, last_only: bool = False) -> torch.Tensor:
        """``(B, T, D)`` to ``(B, T, D)``; ``cache`` (generation only) keeps the keys and values of earlier
        calls, so that a step that adds one token attends to them without computing them again.
        ``last_only``: only the last position asks (``(B, 1, D)`` out); every position still gives its key
        and value."""
        B, T_in, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)  # 3 x (B, T_in, D)
        T = 1 if last_only else T_in  # the positions that ask
        q = q[:, -T:].view(B, T, self.n_head, D // self.n_head).transpose(1, 2)  # (B, H, T, D/H)
        k, v = (z.view(B, T_in, self.n_head, D // self.n_head).transpose(1, 2) for z in (k, v))  # (B, H, T_in, D/H)
        if cache is not None:  # the KV cache: earlier positions' keys and values, then these
            if cache:
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)  # (B, H, T_past + T, D/H)
            cache["k"], cache["v"] = k, v
        past = k.shape[2] - T  # positions already in the cache (0 without one)
        # The causal mask is what makes this a language model: no position sees its future. New tokens
        # see every cached position (the cache holds only the past), and each other causally.
        mask = None if past == 0 or T == 1 else torch.ones(T, past + T, dtype=torch.bool, device=x.device).tril(past)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=past == 0)  # (B, H, T, D/H)
        return self.proj(y.transpose(1, 2).reshape(B, T, D))  # (B, T, D)


class Block(nn.Module):
    """A pre-LayerNorm transformer block: ``x + Attn(LN(x))``, then ``x + MLP(LN(x))``."""

    def __init__(self, cfg: TinyLMConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(), nn.Linear(4 * cfg.d_model, cfg.d_model)
        )

    def forward(self, x: torch.Tensor, cache: dict | None = None, last_only: bool = False) -> torch.Tensor:
        """``(B, T, D)`` to ``(B, T, D)``, or ``(B, 1, D)``: the last position's only (``last_only``)."""
        attended = self.attn(self.ln_1(x), cache, last_only)  # (B, T, D) or (B, 1, D)
        x = (x[:, -1:] if last_only else x) + attended
        return x + self.mlp(self.ln_2(x))


class TinyLM(nn.Module):
    """A decoder-only transformer: ``(B, T)`` token ids to ``(B, T, V)`` next-token logits.

    Args:
        cfg: its size (:class:`TinyLMConfig`).
        seed: seeds the initialisation (a private generator: the global RNG is untouched).
    """

    fast_paths: bool = True
    """Read a prompt that several rows share once (:meth:`continuation_hidden`, :meth:`generate`) and let RL take
    the sampler's own log-probs: the same numbers up to float rounding. False (on a model, or its class): every
    pass in full, bit for bit as the loop computed before these shortcuts (``tests/test_lm_rl_bit_identity.py``)."""

    def __init__(self, cfg: TinyLMConfig | None = None, seed: int = 0):
        super().__init__()
        self.cfg = TinyLMConfig() if cfg is None else cfg
        c = self.cfg
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.block_size, c.d_model)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():  # GPT-2's initialisation: N(0, 0.02) weights, zero biases
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.02)
                elif "ln" not in name:
                    p.zero_()

    def hidden(self, ids: torch.Tensor, cache: list[dict] | None = None, last_only: bool = False) -> torch.Tensor:
        """``(B, T)`` ids to ``(B, T, D)`` final hidden states (after the last LayerNorm).

        ``cache`` (:meth:`generate`'s): one dict per block, holding the keys and values of the positions
        seen so far; ``ids`` then continue those positions instead of starting at position 0.
        ``last_only``: the ``(B, 1, D)`` state of the last position only; the last block spends nothing on the
        others but their keys and values (a prompt read into a cache needs those, and one state).
        """
        B, T = ids.shape
        start = cache[0]["k"].shape[2] if cache and cache[0] else 0  # positions already in the cache
        if start + T > self.cfg.block_size:
            raise ValueError(f"ids: {start + T} tokens exceed block_size={self.cfg.block_size}")
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(start, start + T, device=ids.device))  # (B, T, D)
        for i, block in enumerate(self.blocks):
            last = last_only and i == len(self.blocks) - 1
            x = block(x, None if cache is None else cache[i], last)  # (B, T, D), the last block's (B, 1, D)
        return self.ln_f(x)  # (B, T, D) or (B, 1, D)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """``(B, T)`` ids to ``(B, T, V)`` logits; ``logits[:, t]`` scores the token at ``t + 1``."""
        return self.head(self.hidden(ids))  # (B, T, V)

    def continuation_hidden(self, prompts: torch.Tensor, continuation: torch.Tensor) -> torch.Tensor | None:
        """``(N, P)`` prompts and the ``(N, C)`` tokens after them to the ``(N, 1 + C, D)`` final hidden states at
        positions ``P - 1`` to ``P + C - 1``, reading each distinct prompt once; None when no two rows share one.

        RL scores ``G`` completions of every prompt. A causal model's states at the prompt's positions do not
        depend on what follows, so a group's rows need them once: the distinct prompts go through the model
        first, and their keys and values (the KV cache of :meth:`generate`) are then shared by every row that
        continues them. The result is the full pass's, up to float rounding (the products are summed in another
        order); with a group of 8 and a 6-token prompt it is about half the work of the full pass.
        """
        if not self.fast_paths:
            return None
        unique, row_prompt = distinct_rows(prompts)  # (U, P), (N,)
        if len(unique) == len(prompts):
            return None  # nothing to share: the caller's plain pass is as cheap
        cache = [{} for _ in self.blocks]
        prompt_last = self.hidden(unique, cache, last_only=True)  # (U, 1, D): the state that scores the first token
        if continuation.shape[1] == 0:
            return prompt_last[row_prompt]  # (N, 1, D)
        shared = [{"k": block["k"][row_prompt], "v": block["v"][row_prompt]} for block in cache]  # (N, H, P, D/H)
        return torch.cat([prompt_last[row_prompt], self.hidden(continuation, shared)], dim=1)  # (N, 1 + C, D)

    @torch.no_grad()
    def generate(
        self,
        prompts: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        greedy: bool = False,
        eos_id: int | None = None,
        pad_id: int | None = None,
        generator: torch.Generator | None = None,
        return_logps: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Sample a completion of every prompt, one token at a time, stopping each row at EOS.

        Args:
            prompts: ``(B, P)`` ids, all prompts of the same length ``P``.
            max_new_tokens: ``L``, the most tokens a completion may have (EOS included).
            temperature: divides the logits before sampling (positive); ignored when ``greedy``.
            top_k: sample among the ``top_k`` most likely tokens only (``None``: all of them).
            greedy: take the most likely token at every step (no sampling).
            eos_id, pad_id: the tokenizer's ids (default: the last two ids of the vocabulary,
                as :class:`CharTokenizer` lays them out).
            generator: ``torch.Generator`` for the sampling (the global RNG when ``None``).
            return_logps: also return the log-prob of every token under the distribution it was drawn from.

        Returns:
            ``(B, L)`` completion ids, PAD after each row's first EOS (the mask of the tokens that count
            is :func:`course_lib.lm_rl.completion_mask`'s business); with ``return_logps``, also their ``(B, L)``
            log-probs at ``temperature`` with PAD out of the distribution (0 at PAD), what
            :func:`course_lib.lm_sampling.token_logps` computes in a pass of its own (``top_k`` aside).
        """
        _validate.require_tensor("prompts", prompts, floating=False)
        if prompts.dim() != 2 or prompts.is_floating_point():
            raise ValueError(f"prompts: expected (B, P) integer ids, got {tuple(prompts.shape)} of {prompts.dtype}")
        L = _validate.require_int("max_new_tokens", max_new_tokens, minimum=1)
        if prompts.shape[1] + L - 1 > self.cfg.block_size:
            raise ValueError(
                f"max_new_tokens: P + L - 1 = {prompts.shape[1] + L - 1} exceeds block_size={self.cfg.block_size}"
            )
        if not greedy:
            _validate.require_positive("temperature", temperature)
        if top_k is not None:
            _validate.require_int("top_k", top_k, minimum=1)
        V = self.cfg.vocab_size
        eos_id = V - 2 if eos_id is None else eos_id
        pad_id = V - 1 if pad_id is None else pad_id

        ids = prompts.long()  # (B, P), grows by one column per step
        done = torch.zeros(ids.shape[0], dtype=torch.bool)  # (B,): the row has written its EOS
        # A KV cache, as transformers' generate keeps: the prompt is read once (and a prompt that several rows
        # share, once for all of them), then each step feeds only the token it sampled (the same logits as a
        # full pass, for about a third of the work here).
        cache = [{} for _ in self.blocks]
        new = ids  # (B, T_new): what the model has not read yet
        logps = []
        for step in range(L):
            state = self._read_prompts(ids, cache) if step == 0 else self.hidden(new, cache)[:, -1, :]  # (B, D)
            logits = self.head(state)  # (B, V): the distribution of the next token
            logits[:, pad_id] = -float("inf")  # PAD is a filler, never a word
            if greedy:
                nxt = logits.argmax(-1)  # (B,)
            else:
                logits = logits / temperature
                if top_k is not None and top_k < V:
                    kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (B, 1)
                    logits = logits.masked_fill(logits < kth, -float("inf"))
                probs = torch.softmax(logits.double(), dim=-1)  # float64: multinomial is picky about sums
                nxt = torch.multinomial(probs, 1, generator=generator)[:, 0]  # (B,)
            nxt = torch.where(done, torch.full_like(nxt, pad_id), nxt)  # a finished row only pads
            if return_logps:  # the sampled token's log-prob, at the temperature it was drawn at (PAD: 0)
                scaled = logits / temperature if greedy else logits  # sampling divided them already
                logp = torch.log_softmax(scaled, dim=-1)  # (B, V)
                logps.append(logp.gather(-1, nxt[:, None])[:, 0].masked_fill(nxt == pad_id, 0.0))
            new = nxt[:, None]  # (B, 1)
            ids = torch.cat([ids, new], dim=1)  # (B, P + t + 1)
            done = done | (nxt == eos_id)
            if bool(done.all()):
                break
        completions = ids[:, prompts.shape[1] :]  # (B, <= L)
        completions = F.pad(completions, (0, L - completions.shape[1]), value=pad_id)  # (B, L)
        if not return_logps:
            return completions
        return completions, F.pad(torch.stack(logps, dim=1), (0, L - len(logps)), value=0.0)  # (B, L) each

    def _read_prompts(self, prompts: torch.Tensor, cache: list[dict]) -> torch.Tensor:
        """Fill the empty ``cache`` with the ``(B, P)`` prompts' keys and values, each distinct prompt read once;
        the ``(B, D)`` final state of every prompt's last position (a group's G copies of a prompt share it)."""
        unique, row_prompt = distinct_rows(prompts)  # (U, P), (B,)
        if len(unique) == len(prompts) or not self.fast_paths:
            return self.hidden(prompts, cache)[:, -1, :]
        last = self.hidden(unique, cache, last_only=True)[:, 0, :]  # (U, D)
        for block in cache:
            block["k"], block["v"] = block["k"][row_prompt], block["v"][row_prompt]  # (B, H, P, D/H)
        return last[row_prompt]


class ValueModel(nn.Module):
    """PPO's critic: a copy of a :class:`TinyLM`'s trunk with a scalar head, ``(N, T)`` ids to ``(N, T)`` values.

    ``values[:, t]`` estimates the return from the state that ends at token ``t`` (the same
    position that predicts token ``t + 1``). With a programmatic reward there is no reward model to
    start from; as OpenRLHF and verl allow, the critic starts from the (warmed-up) policy's weights.
    The head starts at zero, so every value starts at 0.
    """

    def __init__(self, lm: TinyLM):
        super().__init__()
        self.body = copy.deepcopy(lm)
        self.body.head = None  # the critic predicts no tokens
        self.value_head = nn.Linear(lm.cfg.d_model, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.value_head(self.body.hidden(ids))[..., 0]  # (N, T)


# ---------------------------------------------------------------------------
# 3. Checkpoints (what RL does with the model is in course_lib.lm_rl)
# ---------------------------------------------------------------------------


def save_checkpoint(path, model: TinyLM, history: dict | None = None, **extra) -> None:
    """Save the model's config and weights, a training history and any extra fields in one file."""
    torch.save(
        {"config": dataclasses.asdict(model.cfg), "state_dict": model.state_dict(), "history": history or {}, **extra},
        path,
    )


def load_checkpoint(path) -> tuple[TinyLM, dict]:
    """The model saved by :func:`save_checkpoint`, and the whole saved dict (history and extras).

    Returns:
        ``(model, checkpoint)``: a :class:`TinyLM` in eval mode and the dict.
    """
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    model = TinyLM(TinyLMConfig(**ckpt["config"]))
    model.load_state_dict(ckpt["state_dict"])
    return model.eval(), ckpt
