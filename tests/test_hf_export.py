"""The capstone's TinyLM exported to transformers computes the same function; chapter 09's TRL mapping."""

from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("transformers")

from course_lib import lm_rl, lm_sampling  # noqa: E402
from course_lib.hf import export, learning  # noqa: E402
from course_lib.tasks import AdditionTask, score_completions  # noqa: E402
from course_lib.tiny_lm import TinyLM, TinyLMConfig  # noqa: E402


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A TinyLM with non-trivial weights (biases and LayerNorms moved off their init) and its export, by path."""
    task = AdditionTask(2)
    lm = TinyLM(
        TinyLMConfig(vocab_size=task.tokenizer.vocab_size, block_size=task.prompt_length + task.max_new_tokens), seed=3
    )
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in lm.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))  # every tensor matters, the LayerNorms' too
    path = export.export(lm, task.tokenizer, tmp_path_factory.mktemp("tiny_gpt2"))
    hf, tok = export.load(path)
    return lm.eval(), hf, tok, task


def test_config_is_gpt2_with_the_details_that_matter(pair):
    _, hf, _, _ = pair
    c = hf.config
    assert type(hf).__name__ == "GPT2LMHeadModel"
    assert c.activation_function == "gelu" and c.layer_norm_epsilon == 1e-5 and c.tie_word_embeddings is False
    assert c.resid_pdrop == c.embd_pdrop == c.attn_pdrop == 0.0
    assert hf.lm_head.bias is None
    assert hf.lm_head.weight.data_ptr() != hf.transformer.wte.weight.data_ptr()


def test_tokenizer_has_the_same_ids(pair):
    _, _, tok, task = pair
    ct = task.tokenizer
    for text in ("47+85=", "07+00=", "132$"):
        assert tok(text)["input_ids"] == ct.encode(text)
    assert (tok.eos_token_id, tok.pad_token_id, tok.padding_side) == (ct.eos_id, ct.pad_id, "left")
    assert tok.decode([1, 3, 2, ct.eos_id]) == "132$"
    assert tok.decode([1, 3, 2, ct.eos_id, ct.pad_id], skip_special_tokens=True) == "132"


def test_logits_equal_on_a_batch(pair):
    lm, hf, _, _ = pair
    ids = torch.randint(0, lm.cfg.vocab_size, (16, lm.cfg.block_size), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(lm(ids), hf(input_ids=ids).logits, atol=1e-5, rtol=0)


def test_logits_equal_with_left_padding_and_positions_from_the_mask(pair):
    """Rows of different lengths, left-padded with an attention mask (as generate feeds them): each row's logits
    are TinyLM's on the unpadded row, once positions skip the padding; without ``position_ids`` they are not
    (GPT-2's positions are learned and absolute: the padding would shift them)."""
    lm, hf, tok, _ = pair
    texts = ["47+85=13", "7+8=15", "1+1="]
    enc = tok(texts, return_tensors="pt", padding=True)
    ids, mask = enc["input_ids"], enc["attention_mask"]  # (3, T), left-padded
    assert not bool(mask.all())
    with torch.no_grad():
        padded = hf(input_ids=ids, attention_mask=mask, position_ids=export.position_ids(mask)).logits
        shifted = hf(input_ids=ids, attention_mask=mask).logits
        for row, text in enumerate(texts):
            own = lm(torch.tensor([tok(text)["input_ids"]]))[0]  # (T_row, V)
            assert torch.allclose(padded[row, -own.shape[0] :], own, atol=1e-5, rtol=0)
        short = shifted[2, -4:] - lm(torch.tensor([tok(texts[2])["input_ids"]]))[0]
        assert short.abs().max() > 1e-3  # the pitfall: positions counted from the padding


def test_greedy_generations_and_log_probs_equal(pair):
    lm, hf, _, task = pair
    tok = task.tokenizer
    prompts = task.prompts([(a, b) for a in range(0, 100, 9) for b in (3, 58, 99)])  # (N, P)
    L = task.max_new_tokens
    ours = lm_sampling.sample_completions(lm, prompts, None, 1, L, tok.eos_id, tok.pad_id, greedy=True)
    theirs = lm_sampling.sample_completions(hf, prompts, None, 1, L, tok.eos_id, tok.pad_id, greedy=True)
    assert torch.equal(ours, theirs)
    with torch.no_grad():
        a = lm_sampling.token_logps(lm, prompts, None, ours, pad_id=tok.pad_id)
        b = lm_sampling.token_logps(hf, prompts, torch.ones_like(prompts), ours, pad_id=tok.pad_id)
    assert torch.allclose(a, b, atol=1e-5, rtol=0)


def test_sampled_generation_never_writes_pad(pair):
    _, hf, _, task = pair
    tok = task.tokenizer
    torch.manual_seed(0)
    out = lm_sampling.sample_completions(
        hf, task.prompts([(12, 34)] * 4), None, 8, task.max_new_tokens, tok.eos_id, tok.pad_id, temperature=3.0
    )  # (32, L)
    mask = lm_sampling.completion_mask(out, tok.eos_id).bool()
    assert not bool((out[mask] == tok.pad_id).any())


def test_export_rejects_a_mismatched_tokenizer():
    from course_lib.tiny_lm import CharTokenizer

    with pytest.raises(ValueError, match="tokenizer"):
        export.to_gpt2(TinyLM(TinyLMConfig(vocab_size=20)), CharTokenizer())


# ---------------------------------------------------------------------------
# The loop's config in TRL's terms, and the verifier as TRL calls it
# ---------------------------------------------------------------------------


def test_trl_config_counts_completions_and_optimiser_steps(tmp_path):
    pytest.importorskip("trl")
    rl = lm_rl.LMRLConfig(
        iterations=10, prompts_per_step=6, group_size=4, update_epochs=3, lr=2e-3, kl_coef=0.02, max_new_tokens=4
    )
    args = learning.trl_config(rl, str(tmp_path), pad_id=13)
    assert args.per_device_train_batch_size == 24 and args.num_generations == 4
    assert args.num_iterations == 3 and args.max_steps == 30 and args.steps_per_generation == 1
    assert args.beta == 0.02 and args.use_bias_correction_kl is False and args.loss_type == "grpo"
    assert args.epsilon == args.epsilon_high == 0.2 and args.scale_rewards == "group"
    assert args.max_completion_length == 4 and args.generation_kwargs == {"suppress_tokens": [13]}
    assert args.lr_scheduler_type == "linear" and args.weight_decay == 0.0
    with pytest.raises(ValueError, match="rl"):
        learning.trl_config(dataclasses.replace(rl, num_minibatches=2), str(tmp_path), pad_id=13)


def test_trl_reward_functions_are_the_verifier():
    task = AdditionTask(2)
    tok = task.tokenizer
    prompts = ["47+85=", "10+20=", "99+99="]
    completion_ids = [tok.encode("132$"), tok.encode("3$"), tok.encode("1989")]  # TRL cuts after EOS
    digits, exact = learning.trl_reward_functions(task)
    assert (digits.__name__, exact.__name__) == ("digits", "exact")
    total = [d + e for d, e in zip(digits(prompts, None, completion_ids), exact(prompts, None, completion_ids))]
    L = task.max_new_tokens
    c = torch.tensor([ids + [tok.pad_id] * (L - len(ids)) for ids in completion_ids])
    expected = score_completions(task.prompts([(47, 85), (10, 20), (99, 99)]), c, tok, "digits+exact")
    assert total == expected.tolist()
    assert exact(prompts, None, completion_ids) == [1.0, 0.0, 0.0]


def test_command_line_exports_the_shipped_capstone_model(tmp_path, capsys):
    from course_lib.lectures import capstone

    path = export.main([str(tmp_path / "sft"), "--sft"])
    hf, tok = export.load(path)
    assert "warm-up" in capsys.readouterr().out
    task = AdditionTask(2)
    pairs = task.split(500, 500, seed=0)["heldout"][:100]
    assert 0.1 < capstone.accuracy(hf, task, pairs) < 0.5  # the warm-up: chapter 08 stopped it near 0.25


def test_trl_run_measures_held_out_accuracy_every_round(pair, tmp_path):
    pytest.importorskip("trl")
    lm, _, _, task = pair
    path = export.export(lm, task.tokenizer, tmp_path / "model")
    pairs = task.split(8, 20, seed=0)
    rl = lm_rl.LMRLConfig(
        iterations=2,
        prompts_per_step=2,
        group_size=4,
        update_epochs=2,
        lr=1e-3,
        kl_coef=0.02,
        max_new_tokens=task.max_new_tokens,
    )
    out = learning.run_trl(str(path), task, pairs, rl, eval_every=1, output_dir=str(tmp_path / "trl"))
    assert out["eval"]["iteration"] == [0, 1, 2] and len(out["eval"]["score"]) == 3
    assert len(out["log"]) == 4  # optimiser steps: rounds x update_epochs
    assert "rewards/digits/mean" in out["log"][0] and "frac_reward_zero_std" in out["log"][0]
    assert out["seconds"] > 0
