"""Left padding must not move a model's positions (issue 44: chapter 09's reference and its exercise agree).

A tiny GPT-2 (learned absolute positions, built here with random weights, no network) scores a completion
the same whether its prompt is left-padded or not, through the reference path of chapter 09's log-probs
exercise (trl_contract.completion_logps -> token_logps -> model_logits). Without position_ids, the padding
shifts every position and the log-probs move by about 0.1.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

EOS, PAD = 1, 0


@pytest.fixture(scope="module")
def tiny_gpt2():
    config = transformers.GPT2Config(
        vocab_size=24, n_positions=32, n_embd=16, n_layer=1, n_head=2, eos_token_id=EOS, pad_token_id=PAD
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return transformers.GPT2LMHeadModel(config).eval()


def test_left_padding_does_not_change_gpt2_logps(tiny_gpt2):
    from course_lib.hf.trl_contract import completion_logps

    prompt, completion = torch.tensor([[5, 6, 7]]), torch.tensor([[8, 9, EOS]])
    alone, _ = completion_logps(tiny_gpt2, torch.cat([prompt, completion], 1), torch.ones(1, 3, dtype=torch.long), EOS)
    padded_prompt = torch.tensor([[PAD, PAD, 5, 6, 7]])
    padded_mask = torch.tensor([[0, 0, 1, 1, 1]])
    padded, _ = completion_logps(tiny_gpt2, torch.cat([padded_prompt, completion], 1), padded_mask, EOS)
    assert torch.allclose(alone, padded, atol=1e-5), (alone, padded)


def test_without_positions_the_padding_would_show(tiny_gpt2):
    # The defence measured: the same model called without position_ids moves by far more than the tolerance.
    ids = torch.tensor([[PAD, PAD, 5, 6, 7, 8, 9]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1]])
    unpadded = tiny_gpt2(input_ids=ids[:, 2:]).logits[:, -2:]
    without = tiny_gpt2(input_ids=ids, attention_mask=mask).logits[:, -2:]
    assert (unpadded - without).abs().max() > 1e-2
