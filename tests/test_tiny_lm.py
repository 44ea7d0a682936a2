"""Tests of course_lib.tiny_lm: tokenizer, model shapes and causality, generate, checkpoints."""

import pytest
import torch

from course_lib.lm_sampling import completion_mask
from course_lib.tiny_lm import (
    EOS_TEXT,
    CharTokenizer,
    TinyLM,
    TinyLMConfig,
    load_checkpoint,
    save_checkpoint,
)


@pytest.fixture
def tok():
    return CharTokenizer("0123456789+=")


@pytest.fixture
def lm():
    return TinyLM(TinyLMConfig(vocab_size=14, block_size=10, n_layer=1, n_head=2, d_model=16), seed=0)


def test_tokenizer_ids_and_round_trip(tok):
    assert tok.encode("47+85=") == [4, 7, 10, 8, 5, 11]
    assert (tok.eos_id, tok.pad_id, tok.vocab_size) == (12, 13, 14)
    assert tok.encode("132" + EOS_TEXT) == [1, 3, 2, 12]
    assert tok.decode([1, 3, 2, 12, 13, 13]) == "132$"
    assert tok.decode([1, 3, 2, 12, 5, 12]) == "132$", "decoding stops at the first EOS"
    assert tok.decode(torch.tensor([7, 13])) == "7"
    assert tok.encode_batch(["1+2=", "3+4="]).shape == (2, 4)


def test_tokenizer_rejects_bad_input(tok):
    with pytest.raises(ValueError, match="text"):
        tok.encode("4a")
    with pytest.raises(ValueError, match="alphabet"):
        CharTokenizer("aa")
    with pytest.raises(ValueError, match="alphabet"):
        CharTokenizer("ab$")
    with pytest.raises(ValueError, match="texts"):
        tok.encode_batch(["1+2=", "10+2="])


def test_model_shapes_and_causality(lm):
    ids = torch.randint(0, 12, (3, 8), generator=torch.Generator().manual_seed(0))
    logits = lm(ids)
    assert logits.shape == (3, 8, 14)
    # Changing a later token never changes the logits of an earlier position.
    ids2 = ids.clone()
    ids2[:, 5] = (ids2[:, 5] + 1) % 12
    assert torch.allclose(lm(ids2)[:, :5], logits[:, :5], atol=1e-6)
    assert not torch.allclose(lm(ids2)[:, 5:], logits[:, 5:])


def test_model_is_seeded_and_validates():
    a, b = TinyLM(seed=3), TinyLM(seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    with pytest.raises(ValueError, match="n_head"):
        TinyLMConfig(d_model=10, n_head=4)
    with pytest.raises(ValueError, match="ids"):
        TinyLM(TinyLMConfig(block_size=4))(torch.zeros(1, 5, dtype=torch.long))


def test_generate_stops_at_eos_and_pads(lm):
    prompts = torch.tensor([[4, 7, 10, 8, 5, 11]] * 6)
    g = torch.Generator().manual_seed(0)
    out = lm.generate(prompts, 4, temperature=2.0, generator=g)
    mask = completion_mask(out, 12)
    assert out.shape == (6, 4)
    for row, m in zip(out.tolist(), mask.tolist()):
        assert 13 not in row[: int(sum(m))], "no PAD is ever sampled before EOS"
        if 12 in row:
            assert all(t == 13 for t in row[row.index(12) + 1 :]), "only PAD after EOS"


def test_generate_is_seeded_and_greedy_is_argmax(lm):
    prompts = torch.tensor([[4, 7, 10, 8, 5, 11], [0, 1, 10, 2, 3, 11]])
    a = lm.generate(prompts, 4, generator=torch.Generator().manual_seed(1))
    b = lm.generate(prompts, 4, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    greedy = lm.generate(prompts, 4, greedy=True)
    ids = prompts
    for t in range(greedy.shape[1]):
        logits = lm(ids)[:, -1]
        logits[:, 13] = -float("inf")
        assert torch.equal(greedy[:, t][greedy[:, t] != 13], logits.argmax(-1)[greedy[:, t] != 13])
        ids = torch.cat([ids, greedy[:, t : t + 1]], 1)


def test_kv_cache_gives_the_full_pass_hidden_states(lm):
    ids = torch.tensor([[4, 7, 10, 8, 5, 11, 1, 3], [0, 1, 10, 2, 3, 11, 9, 12]])
    cache = [{} for _ in lm.blocks]
    pieces = [lm.hidden(ids[:, :5], cache), lm.hidden(ids[:, 5:6], cache), lm.hidden(ids[:, 6:], cache)]
    torch.testing.assert_close(torch.cat(pieces, 1), lm.hidden(ids), atol=1e-6, rtol=1e-5)  # 5, then 1, then 2 tokens
    assert cache[0]["k"].shape[2] == 8
    with pytest.raises(ValueError, match="block_size"):
        lm.hidden(ids[:, :3], cache)  # 8 cached + 3 > block_size 10


def test_generate_top_k_one_is_greedy(lm):
    prompts = torch.tensor([[4, 7, 10, 8, 5, 11]] * 3)
    greedy = lm.generate(prompts, 4, greedy=True)
    top1 = lm.generate(prompts, 4, temperature=1.0, top_k=1, generator=torch.Generator().manual_seed(0))
    assert torch.equal(greedy, top1)


def test_generate_validates(lm):
    prompts = torch.tensor([[4, 7, 10, 8, 5, 11]])
    with pytest.raises(ValueError, match="max_new_tokens"):
        lm.generate(prompts, 6)
    with pytest.raises(ValueError, match="temperature"):
        lm.generate(prompts, 3, temperature=0.0)
    with pytest.raises(ValueError, match="prompts"):
        lm.generate(prompts.float(), 3)


def test_checkpoint_round_trip(tmp_path, lm):
    history = {"accuracy": [0.1, 0.5], "steps": [0, 10]}
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, lm, history, note="hello")
    loaded, ckpt = load_checkpoint(path)
    assert loaded.cfg == lm.cfg
    assert ckpt["history"] == history and ckpt["note"] == "hello"
    ids = torch.randint(0, 12, (2, 7), generator=torch.Generator().manual_seed(0))
    assert torch.equal(loaded(ids), lm(ids))
