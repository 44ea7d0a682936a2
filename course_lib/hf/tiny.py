"""An offline stand-in for a hub model: a tiny random Qwen2 and a character tokenizer, saved to a folder.

Tests, the notebook and CI never download anything. They build this pair once into a
folder with ``save_pretrained`` and then load it by path, with the very calls that load
``Qwen/Qwen2.5-0.5B-Instruct`` from the hub (``AutoModelForCausalLM.from_pretrained``,
``AutoTokenizer.from_pretrained``), so every tool meets it as it would a real model.

- The model is a ``Qwen2ForCausalLM`` (the architecture of Qwen2.5) built from a
  ``Qwen2Config`` with a few hundred thousand random parameters: the same code paths as
  the 0.5B model (rotary positions, grouped-query attention, RMSNorm, SwiGLU), only smaller.
- The tokenizer is made with the ``tokenizers`` library the way Qwen's is: a byte-level BPE
  (NFC, Qwen2's pre-tokenizer regex that splits every digit apart, byte-level alphabet), its
  few merges trained on arithmetic problems, plus ``"Answer:"`` as a single token (so an
  untrained model states an answer now and then and the answer reward has something to
  reinforce), an explicit EOS (``<|endoftext|>``) and PAD (``<|pad|>``), left padding and a
  small chat template. Same pipeline as Qwen's means that ``AutoTokenizer`` (which picks
  ``Qwen2Tokenizer`` for any Qwen2 folder and rebuilds the pipeline) encodes exactly as we do.
"""

from __future__ import annotations

from pathlib import Path

import torch

EOS, PAD = "<|endoftext|>", "<|pad|>"
# Qwen2's pre-tokenizer: words with their leading space, every digit on its own, punctuation runs.
QWEN2_PRETOKENIZE_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""  # noqa: E501 (one regex, kept whole)
ANSWER_TOKEN = "Answer:"
# A minimal chat template: role tags a model can learn; Qwen's own template is the same idea with <|im_start|>.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def build_tiny_tokenizer(vocab_size: int = 320):
    """A byte-level BPE ``PreTrainedTokenizerFast`` with explicit EOS and PAD tokens, trained offline.

    Args:
        vocab_size: tokens before ``"Answer:"`` is added: 256 bytes, EOS, PAD and the trained merges.

    Returns:
        The tokenizer (``V = vocab_size + 1``; EOS = 0, PAD = 1), padding on the left as generation needs.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    from course_lib.tasks import arithmetic_problems

    tok = Tokenizer(BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    # A few merges learned from the task's own text: short prompts, so a CPU step stays fast.
    corpus = [f"{question} {ANSWER_TOKEN} {answer}" for question, answer in arithmetic_problems(500, seed=123)]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS, PAD],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    tok.add_tokens([AddedToken(ANSWER_TOKEN, normalized=False)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD, padding_side="left")
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_model(
    vocab_size: int,
    hidden_size: int = 128,
    num_layers: int = 2,
    max_positions: int = 512,
    seed: int = 0,
    eos_token_id: int = 0,
    pad_token_id: int = 1,
):
    """A randomly initialised ``Qwen2ForCausalLM`` of about 300 thousand parameters.

    Args:
        vocab_size: ``V``, the tokenizer's length.
        hidden_size: width of the residual stream (4 heads of ``hidden_size / 4``; 2 key-value heads).
        num_layers: transformer blocks.
        max_positions: the context length, prompt plus completion.
        seed: seeds the initialisation.
        eos_token_id, pad_token_id: written into the config and the generation config.
    """
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos_token_id, pad_token_id=pad_token_id)
    return model


def save_tiny_model(path, hidden_size: int = 128, num_layers: int = 2, seed: int = 0) -> Path:
    """Build the tiny tokenizer and model and ``save_pretrained`` both into ``path``.

    Loading it back is the same as loading a hub model:
    ``AutoModelForCausalLM.from_pretrained(path)``, ``AutoTokenizer.from_pretrained(path)``.

    Args:
        path: a folder (created if missing).
        hidden_size, num_layers, seed: as :func:`build_tiny_model`.

    Returns:
        The folder, as a ``Path``.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tiny_tokenizer()
    model = build_tiny_model(
        len(tokenizer),
        hidden_size=hidden_size,
        num_layers=num_layers,
        seed=seed,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


if __name__ == "__main__":  # python -m course_lib.hf.tiny FOLDER
    import sys

    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m course_lib.hf.tiny FOLDER")
    print(f"tiny Qwen2 saved to {save_tiny_model(sys.argv[1])}")
