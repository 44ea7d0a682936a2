"""The check of chapter 09's mask and log-probs of ``model.generate``'s output (reference:
``course_lib.hf.trl_contract.completion_logps``), on a tiny random Qwen2 built on the spot, and on a tiny random
GPT-2 for one case: Qwen2's rotary positions are relative, so a shift of every position by the left padding changes
nothing there, while GPT-2's learned absolute positions show it."""

from __future__ import annotations

import functools

import torch

from course_lib.checks import Case, Mistake, check_against_reference, drawing
from course_lib.hf.trl_contract import completion_logps

F64 = torch.float64

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


@functools.lru_cache(maxsize=1)
def _tiny_gpt2():
    """A tiny random GPT-2: learned absolute positions, so positions that count the left padding change its logits."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=64,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=EOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        model = GPT2LMHeadModel(config)
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
        "mask is a float tensor (1 = yes)": torch.tensor(float(mask.is_floating_point()), dtype=F64),
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
    eos_padded = prompt.clone()
    eos_padded[prompt_mask == 0] = EOS  # Qwen's tokenizer left-pads prompts with <|endoftext|>, its EOS
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
            "the prompts left-padded with EOS (as Qwen's tokenizer pads): only prompt_mask says what is padding",
            {"sequences": torch.cat([eos_padded, completion], dim=1), **base},
        ),
        Case(
            "a GPT-2 (learned absolute positions), the first case's prompts left-padded by 0, 2 and 1 tokens: "
            "each prompt's first real token is at position 0, as generate() counted it",
            {"model": _tiny_gpt2(), "sequences": padded, **base},
        ),
        Case(
            "no padding, B=2, P=3, L=4, temperature 0.5",
            {"sequences": plain, "prompt_mask": torch.ones(2, 3, dtype=torch.long), "eos_id": EOS, "temperature": 0.5},
        ),
    ]


def _logp_with(
    *,
    shift=1,
    attend=True,
    positions=True,
    where="logits",
    mask_kind="first",
    grad=True,
    log=True,
    token_shift=0,
    softmax_dim=-1,
    mask_dtype=None,
    swapped=False,
):
    def wrong(model, sequences, prompt_mask, eos_id, temperature=1.0):
        P, L = prompt_mask.shape[1], sequences.shape[1] - prompt_mask.shape[1]
        completion = sequences[:, P:]
        attention = torch.cat([prompt_mask.long(), torch.ones_like(completion)], dim=1)
        if attend == "pad":  # every PAD hidden, prompt_mask never read
            attention = (sequences != model.config.pad_token_id).long()
        position_ids = (attention.cumsum(-1) - 1).clamp(min=0) if attend and positions else None
        if attend == "ones":  # the positions right, every token attended, the left padding too
            attention = torch.ones_like(sequences)
        if positions == "from_one":
            position_ids = attention.cumsum(-1)
        with torch.set_grad_enabled(grad):
            logits = model(
                input_ids=sequences, attention_mask=attention if attend else None, position_ids=position_ids
            ).logits.float()
            logits = logits[:, P - shift : P - shift + L]  # (B, L, V)
            if where == "logits":
                logits = logits / temperature
            if where == "times":
                logits = logits * temperature
            logp = torch.log_softmax(logits, dim=softmax_dim)
            if where == "logp":
                logp = logp / temperature
            scored = sequences[:, P - token_shift : P - token_shift + L]  # the tokens each row's logits score
            logp = logp.gather(-1, scored[..., None]).squeeze(-1)  # (B, L)
            if not log:
                logp = logp.exp()
        is_eos, t = (completion == eos_id).long(), torch.arange(L)
        in_sequence = (sequences == eos_id).long()  # the prompt's EOS too (its left padding, with Qwen's tokenizer)
        last = torch.where(is_eos.any(-1), (is_eos * t).argmax(-1), torch.full((len(completion),), L - 1))
        mask = {
            "first": (is_eos.cumsum(-1) - is_eos) == 0,
            "without_eos": is_eos.cumsum(-1) == 0,
            "all": torch.ones(completion.shape, dtype=torch.bool),
            "not_eos": completion != eos_id,
            "last": t[None] <= last[:, None],
            "sequence": ((in_sequence.cumsum(-1) - in_sequence) == 0)[:, P:],
            "second": (is_eos.cumsum(-1) - is_eos) <= 1,
            "not_pad": completion != model.config.pad_token_id,
            "cumsum": is_eos.cumsum(-1) <= 1,
            "argmax": t[None] <= is_eos.argmax(-1, keepdim=True),  # 0 where a row has no EOS
        }[mask_kind].float()  # "last": through the last EOS; "second": through the second
        if mask_dtype is not None:
            mask = mask.to(mask_dtype)
        return (mask, logp) if swapped else (logp, mask)

    return wrong


def check_completion_logps(fn) -> bool:
    """Check a student's ``completion_logps(model, sequences, prompt_mask, eos_id, temperature=1.0)``."""
    model = _tiny_model()
    cases = [Case(c.description, {"model": model, **c.kwargs}) for c in _logp_cases()]
    mistakes = [
        Mistake(
            "the mask looks for the first EOS in the whole sequence, prompt included; a prompt left-padded with EOS "
            "(Qwen's tokenizer pads with <|endoftext|>) then masks the whole completion: look in the completion "
            "only, sequences[:, P:]",
            _logp_with(mask_kind="sequence"),
        ),
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
            "start at the wrong positions; pass attention_mask=cat([prompt_mask, ones]) and the positions "
            "it implies, position_ids=(attention_mask.cumsum(-1) - 1).clamp(min=0), as generate() did",
            _logp_with(attend=False),
        ),
        Mistake(
            "the positions count the left padding: with an attention mask but no position_ids, a padded prompt's "
            "first real token sits at position 2 or 3 instead of 0, which a model with learned absolute positions "
            "(GPT-2) reads as other inputs; pass position_ids=(attention_mask.cumsum(-1) - 1).clamp(min=0), as "
            "generate() did",
            _logp_with(positions=False),
        ),
        Mistake(
            "the positions start at 1: attention_mask.cumsum(-1) counts the first real token as 1; generate() "
            "numbers it 0: position_ids=(attention_mask.cumsum(-1) - 1).clamp(min=0)",
            _logp_with(positions="from_one"),
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
            "each completion token's logits score the token before it: the logits at P - 1 + t are right, but the "
            "ids gathered are sequences[:, P - 1:-1]; gather the completion's own ids, sequences[:, P:]",
            _logp_with(token_shift=1),
        ),
        Mistake(
            "log_softmax runs over the time axis (dim=1); a distribution is over the vocabulary, the last axis of "
            "the (B, L, V) logits: log_softmax(logits, dim=-1)",
            _logp_with(softmax_dim=1),
        ),
        Mistake(
            "the logits are multiplied by the temperature; sampling divides them by it: logits / temperature",
            _logp_with(where="times"),
        ),
        Mistake(
            "the two outputs are in the wrong order: return (logp, mask), the log-probs first",
            _logp_with(swapped=True),
        ),
        Mistake(
            "the mask is not a float tensor (bool or integer); the exercise returns a float mask, 1.0 through the "
            "first EOS and 0.0 after: mask.float()",
            _logp_with(mask_dtype=torch.bool),
        ),
        Mistake(
            "the attention mask is built from the PAD id (sequences != PAD) instead of prompt_mask: a prompt "
            "left-padded with another token (Qwen pads with <|endoftext|>, its EOS) is then attended; use "
            "attention_mask=cat([prompt_mask, ones]), as generate() did",
            _logp_with(attend="pad"),
        ),
        Mistake(
            "the mask is 'token != PAD': where the padding after EOS is EOS itself (Qwen pads with <|endoftext|>) "
            "it keeps the padding; keep every token through the first EOS, (cumsum(is_eos) - is_eos) == 0",
            _logp_with(mask_kind="not_pad"),
        ),
        Mistake(
            "the attention mask is all ones, so the padded prompts attend to their left padding: "
            "attention_mask=cat([prompt_mask, ones]) hides it, as generate() did",
            _logp_with(attend="ones"),
        ),
        Mistake(
            "cumsum(is_eos) <= 1 keeps the tokens after the first EOS (their cumsum is still 1) up to the next EOS: "
            "keep a token when no EOS came before it, (cumsum(is_eos) - is_eos) == 0",
            _logp_with(mask_kind="cumsum"),
        ),
        Mistake(
            "the first EOS was found with argmax(completion == eos_id), which is 0 in a row with no EOS (generation "
            "cut at max_new_tokens): that row keeps only its first token; a row that never stopped keeps every "
            "token: (cumsum(is_eos) - is_eos) == 0, or the argmax only where is_eos.any(-1)",
            _logp_with(mask_kind="argmax"),
        ),
        Mistake(
            "the mask runs past the first EOS, to the second: (cumsum(is_eos) - is_eos) == 0 keeps every token "
            "through the first EOS and nothing after it",
            _logp_with(mask_kind="second"),
        ),
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
        draw=_draw_generated,
        check_dtype=True,
    )


def _draw_generated(g: torch.Generator) -> list[Case]:
    """Fresh ``generate`` outputs: batch sizes, left padding, completion lengths, EOS anywhere or nowhere, PAD as
    EOS, temperatures."""
    model = _tiny_model()
    cases = []
    for _ in range(3):
        B, P, L = drawing.integer(g, 1, 4), drawing.integer(g, 2, 6), drawing.integer(g, 2, 6)
        pads = torch.randint(0, P, (B,), generator=g)  # each prompt keeps at least one token
        prompt_mask = (torch.arange(P) >= pads[:, None]).long()  # (B, P), left-padded
        prompt = torch.randint(2, VOCAB, (B, P), generator=g)
        prompt[prompt_mask == 0] = PAD
        completion = torch.randint(2, VOCAB, (B, L), generator=g)
        pad = drawing.choice(g, (PAD, EOS))
        for row in range(B):
            stop = drawing.integer(g, 0, L)  # L: no EOS, cut at max_new_tokens
            if stop < L:
                completion[row, stop], completion[row, stop + 1 :] = EOS, pad
        temperature = drawing.choice(g, (1.0, 0.7, 1.3, 0.5))
        cases.append(
            Case(
                f"B={B}, prompts left-padded by {pads.tolist()} tokens (P={P}), L={L}, "
                f"{'PAD = EOS' if pad == EOS else 'PAD after EOS'}, temperature {temperature}",
                {
                    "model": model,
                    "sequences": torch.cat([prompt, completion], dim=1),
                    "prompt_mask": prompt_mask,
                    "eos_id": EOS,
                    "temperature": temperature,
                },
            )
        )
    return cases
