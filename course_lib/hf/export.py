"""The capstone's TinyLM as a ``transformers`` model: the same weights, the same function, loaded by path.

Chapter 08's tiny transformer already has GPT-2's shape (Radford et al. 2019): pre-LayerNorm blocks,
learned absolute positions, exact GELU, biases on every linear map but the head. So the export is a
renaming of tensors, and the exported ``GPT2LMHeadModel`` computes the same logits (to float32
rounding) and writes the same greedy completions. Five details decide whether "the same" is true:

1. ``activation_function="gelu"`` (the erf GELU of ``nn.GELU()``), not GPT-2's default ``"gelu_new"``
   (the tanh approximation: about 1e-3 off, enough to change an argmax now and then);
2. ``layer_norm_epsilon=1e-5``, ``nn.LayerNorm``'s default;
3. GPT-2's ``Conv1D`` stores its weight as ``(in, out)``, the transpose of ``nn.Linear``'s ``(out, in)``;
4. attention scaled by ``1 / sqrt(D / H)`` (``scale_attn_weights=True``, not by layer index), as
   ``scaled_dot_product_attention`` does; query, key and value split from one projection in that order;
5. the head untied from the token embedding (``tie_word_embeddings=False``), without bias; every dropout 0
   (TinyLM has none; a trainer's ``model.train()`` would otherwise switch it on).

The character tokenizer becomes a ``PreTrainedTokenizerFast`` with the same ids (digit ``d`` is id ``d``,
then ``+``, ``=``, EOS written ``$``, PAD), padding on the left as generation needs. PAD is a separate
token that TinyLM never writes: the exported generation config suppresses it too.

Learned positions and left padding: ``generate`` derives ``position_ids`` from the attention mask
(``cumsum - 1``), so a left-padded prompt sits at positions 0, 1, ... as TinyLM reads it; a bare forward
pass with an attention mask but no ``position_ids`` counts the padding too, and shifts every position.
Models with rotary positions (Qwen2) are blind to that shift; GPT-2's learned positions are not. The
addition prompts all have the same length, so neither loop pads them.
"""

from __future__ import annotations

from pathlib import Path

import torch

from course_lib.tiny_lm import EOS_TEXT, CharTokenizer, TinyLM

PAD_TEXT = "<pad>"
"""How PAD is written in the exported vocabulary (it is never decoded into a completion)."""


def gpt2_config(lm: TinyLM, eos_id: int, pad_id: int):
    """The ``GPT2Config`` of ``lm``'s shape, with the five details of the module docstring."""
    from transformers import GPT2Config

    c = lm.cfg
    return GPT2Config(
        vocab_size=c.vocab_size,
        n_positions=c.block_size,
        n_embd=c.d_model,
        n_layer=c.n_layer,
        n_head=c.n_head,
        n_inner=4 * c.d_model,
        activation_function="gelu",
        layer_norm_epsilon=1e-5,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        scale_attn_weights=True,
        scale_attn_by_inverse_layer_idx=False,
        reorder_and_upcast_attn=False,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        use_cache=True,
    )


def gpt2_state_dict(lm: TinyLM) -> dict[str, torch.Tensor]:
    """TinyLM's tensors under GPT-2's names; ``Conv1D`` weights transposed to ``(in, out)``."""
    sd = {
        "transformer.wte.weight": lm.tok_emb.weight,
        "transformer.wpe.weight": lm.pos_emb.weight,
        "transformer.ln_f.weight": lm.ln_f.weight,
        "transformer.ln_f.bias": lm.ln_f.bias,
        "lm_head.weight": lm.head.weight,
    }
    for i, block in enumerate(lm.blocks):
        h = f"transformer.h.{i}."
        linears = {
            "attn.c_attn": block.attn.qkv,
            "attn.c_proj": block.attn.proj,
            "mlp.c_fc": block.mlp[0],
            "mlp.c_proj": block.mlp[2],
        }
        for name, linear in linears.items():
            sd[h + name + ".weight"] = linear.weight.t()  # nn.Linear (out, in) -> Conv1D (in, out)
            sd[h + name + ".bias"] = linear.bias
        for name in ("ln_1", "ln_2"):
            sd[h + name + ".weight"] = getattr(block, name).weight
            sd[h + name + ".bias"] = getattr(block, name).bias
    return {k: v.detach().clone().contiguous() for k, v in sd.items()}


def to_gpt2(lm: TinyLM, tokenizer: CharTokenizer):
    """A ``GPT2LMHeadModel`` that computes what ``lm`` computes (eval mode, float32)."""
    from transformers import GenerationConfig, GPT2LMHeadModel

    if lm.cfg.vocab_size != tokenizer.vocab_size:
        raise ValueError(f"tokenizer: its vocabulary has {tokenizer.vocab_size} ids, the model {lm.cfg.vocab_size}")
    model = GPT2LMHeadModel(gpt2_config(lm, tokenizer.eos_id, tokenizer.pad_id))
    missing, unexpected = model.load_state_dict(gpt2_state_dict(lm), strict=False)
    missing = [k for k in missing if not k.endswith(".attn.bias") and not k.endswith(".attn.masked_bias")]
    if missing or unexpected:  # a renaming that forgot a tensor must fail loudly, not leave it random
        raise RuntimeError(f"export: missing {missing}, unexpected {unexpected}")
    # TinyLM never writes PAD (it is not a word); the exported model's generate must not either.
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_id, pad_token_id=tokenizer.pad_id, suppress_tokens=[tokenizer.pad_id]
    )
    return model.eval()


def to_fast_tokenizer(tokenizer: CharTokenizer):
    """The character tokenizer as a ``PreTrainedTokenizerFast``: same ids, EOS ``$``, PAD, left padding."""
    from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for ch, i in tokenizer.stoi.items()}
    vocab[EOS_TEXT], vocab[PAD_TEXT] = tokenizer.eos_id, tokenizer.pad_id
    tok = Tokenizer(WordLevel(vocab, unk_token=PAD_TEXT))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")  # one token per character
    tok.decoder = decoders.Fuse()  # and back to text without spaces
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS_TEXT, pad_token=PAD_TEXT, padding_side="left")
    fast.model_max_length = 10**6
    return fast


def export(lm: TinyLM, tokenizer: CharTokenizer, path) -> Path:
    """``save_pretrained`` the exported model and tokenizer into ``path`` (created if missing).

    Load them back as any hub model: ``AutoModelForCausalLM.from_pretrained(path)``,
    ``AutoTokenizer.from_pretrained(path)``.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    to_gpt2(lm, tokenizer).save_pretrained(path)
    to_fast_tokenizer(tokenizer).save_pretrained(path)
    return path


def load(path):
    """``(model, tokenizer)`` from a folder written by :func:`export`, the model in eval mode."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    tokenizer.padding_side = "left"
    return AutoModelForCausalLM.from_pretrained(str(path)).eval(), tokenizer


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """``(N, T)`` positions that skip left padding, as ``generate`` computes them: ``cumsum - 1``, 0 on padding."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def main(argv=None) -> Path:
    """``python -m course_lib.hf.export FOLDER [--sft]``: export chapter 08's shipped model (or its warm-up) by path."""
    import argparse

    from course_lib.tasks import AdditionTask
    from course_lib.tiny_lm import load_checkpoint

    parser = argparse.ArgumentParser(prog="python -m course_lib.hf.export", description=main.__doc__)
    parser.add_argument("folder", help="where save_pretrained writes the model and tokenizer")
    parser.add_argument("--sft", action="store_true", help="the warm-up's weights instead of the GRPO-trained ones")
    parser.add_argument(
        "--checkpoint",
        default=str(Path(__file__).resolve().parent.parent / "lectures" / "data" / "capstone_08.pt"),
        help="a TinyLM checkpoint (chapter 08's)",
    )
    args = parser.parse_args(argv)
    lm, ckpt = load_checkpoint(args.checkpoint)
    if args.sft:
        if "sft_state_dict" not in ckpt:
            raise ValueError(f"checkpoint: {args.checkpoint} holds no warm-up weights (sft_state_dict)")
        lm.load_state_dict(ckpt["sft_state_dict"])
    path = export(lm, AdditionTask(2).tokenizer, args.folder)
    print(f"exported {'the warm-up' if args.sft else 'the GRPO-trained'} TinyLM to {path} (GPT2LMHeadModel)")
    return path


if __name__ == "__main__":
    main()
