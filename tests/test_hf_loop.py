"""Chapter 09: the tiny offline Qwen2, the course's GRPO loop on it, the command and its bad-input errors."""

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import torch

from course_lib import lm_rl, lm_sampling
from course_lib.hf import data, loop
from course_lib.hf.__main__ import main
from course_lib.hf.tiny import ANSWER_TOKEN, build_tiny_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def loaded(tiny_qwen):
    return loop.load_model_and_tokenizer(str(tiny_qwen))


# --- the tiny model and tokenizer -------------------------------------------------


def test_tiny_model_loads_by_path_like_a_hub_model(tiny_qwen, loaded):
    from transformers import AutoTokenizer

    model, tokenizer = loaded
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert 100_000 < sum(p.numel() for p in model.parameters()) < 1_000_000  # a few hundred thousand
    assert tokenizer.eos_token_id is not None and tokenizer.pad_token_id is not None
    assert tokenizer.eos_token_id != tokenizer.pad_token_id and tokenizer.padding_side == "left"
    # AutoTokenizer rebuilds a Qwen2Tokenizer from the folder: it must encode exactly as the built one.
    text = "Mia has 13 apples.\nAnswer: 18"
    built = build_tiny_tokenizer()
    reloaded = AutoTokenizer.from_pretrained(tiny_qwen)
    assert reloaded(text)["input_ids"] == built(text)["input_ids"]
    assert reloaded.decode(reloaded(text)["input_ids"]) == text
    assert ANSWER_TOKEN in reloaded.convert_ids_to_tokens(reloaded(text)["input_ids"])


# --- masks and log-probs --------------------------------------------------------------


def test_completion_mask_keeps_up_to_and_including_the_first_eos():
    eos = 7
    ids = torch.tensor(
        [
            [3, 4, 7, 1, 1],  # EOS at 2: tokens 0..2
            [7, 1, 1, 1, 1],  # EOS first: only it
            [3, 4, 5, 6, 2],  # no EOS: cut off, all valid
            [3, 7, 4, 7, 1],
        ]
    )  # only the first EOS counts
    expected = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    assert torch.equal(lm_sampling.completion_mask(ids, eos), expected.float())


def test_token_logps_are_shifted_and_ignore_left_padding(loaded):
    model, tokenizer = loaded
    prompts = ["Mia has 3 apples.", "Noah has 12 marbles and gets 4 more. How many?"]
    enc = tokenizer(prompts, return_tensors="pt", padding=True)
    completion = torch.tensor([[5, 9, 11, tokenizer.eos_token_id], [6, 6, 8, 10]])
    with torch.no_grad():
        logp = lm_sampling.token_logps(model, enc["input_ids"], enc["attention_mask"], completion)
        # By hand for the short (left-padded) prompt, alone and unpadded: the logits at position j score token j + 1.
        alone = torch.tensor([tokenizer(prompts[0])["input_ids"] + completion[0].tolist()])
        logits = model(input_ids=alone).logits[0]  # (P + T, V)
        P = alone.shape[1] - 4
        by_hand = torch.log_softmax(logits[P - 1 : -1], -1).gather(-1, completion[0][:, None]).squeeze(-1)
    assert logp.shape == (2, 4)
    torch.testing.assert_close(logp[0], by_hand, atol=1e-5, rtol=1e-5)


def test_sample_completions_shapes_and_adjacent_groups(loaded):
    model, tokenizer = loaded
    torch.manual_seed(0)
    enc = tokenizer(["a", "a longer prompt"], return_tensors="pt", padding=True, padding_side="left")
    out = lm_sampling.sample_completions(
        model, enc["input_ids"], enc["attention_mask"], 3, 5, tokenizer.eos_token_id, tokenizer.pad_token_id
    )
    assert out.shape == (6, 5)
    mask = lm_sampling.completion_mask(out, tokenizer.eos_token_id)
    assert bool((out[mask == 0] == tokenizer.pad_token_id).all())  # PAD after each EOS, and only there


# --- the loop -------------------------------------------------------------------------


def _config(**overrides):
    rl = dict(iterations=2, prompts_per_step=2, group_size=4, max_new_tokens=6, update_epochs=2)
    own = {"save_every": 1}
    for name in ("save_every", "reward_weights"):  # HFGRPOConfig's own fields; the rest are the loop's (rl)
        if name in overrides:
            own[name] = overrides.pop(name)
    return loop.HFGRPOConfig(rl=loop.hf_rl_config(**{**rl, **overrides}), **own)


def test_two_steps_train_save_and_reload(tiny_qwen, tmp_path):
    from transformers import AutoModelForCausalLM

    model, tokenizer = loop.load_model_and_tokenizer(str(tiny_qwen))
    before = [p.detach().clone() for p in model.parameters()]
    # The length reward varies within every group, so the very first step has a gradient.
    history = loop.train(
        model,
        tokenizer,
        data.load_problems(n=8),
        _config(reward_weights={"length": 1.0}),
        output_dir=tmp_path,
        progress=False,
    )
    assert len(history.mean_reward) == len(history.loss) == len(history.kl) == 2 and not history.interrupted
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert history.checkpoint == str(tmp_path / "checkpoint-2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2"]  # only the latest, no partial folder
    reloaded = AutoModelForCausalLM.from_pretrained(history.checkpoint)
    for a, b in zip(model.parameters(), reloaded.parameters()):
        torch.testing.assert_close(a, b)


def test_one_epoch_per_batch_never_clips(tiny_qwen):
    """With one optimiser step per batch, logp_old is the policy itself: ratio exactly 1, nothing clipped."""
    model, tokenizer = loop.load_model_and_tokenizer(str(tiny_qwen))
    history = loop.train(
        model,
        tokenizer,
        data.load_problems(n=4),
        _config(update_epochs=1, kl_coef=0.0, reward_weights={"length": 1.0}),
        progress=False,
    )
    assert history.clip_fraction == [0.0, 0.0]


def test_ctrl_c_keeps_the_last_checkpoint(tiny_qwen, tmp_path, monkeypatch):
    model, tokenizer = loop.load_model_and_tokenizer(str(tiny_qwen))
    real, calls = lm_sampling.sample_completions, []

    def interrupted_on_third_call(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(lm_rl, "sample_completions", interrupted_on_third_call)
    history = loop.train(
        model, tokenizer, data.load_problems(n=4), _config(iterations=5), output_dir=tmp_path, progress=False
    )
    assert history.interrupted and len(history.mean_reward) == 2
    assert history.checkpoint == str(tmp_path / "checkpoint-2")
    assert (tmp_path / "checkpoint-2" / "config.json").is_file()


def test_command_runs_on_a_jsonl_dataset(tiny_qwen, tmp_path):
    dataset = tmp_path / "problems.jsonl"
    dataset.write_text("\n".join(json.dumps({"question": q, "answer": a}) for q, a in data.load_problems(n=3)))
    history = main(
        [
            "--model",
            str(tiny_qwen),
            "--task",
            "arithmetic",
            "--iterations",
            "1",
            "--group-size",
            "2",
            "--prompts-per-step",
            "2",
            "--max-new-tokens",
            "4",
            "--device",
            "cpu",
            "--dataset",
            str(dataset),
            "--output-dir",
            str(tmp_path / "run"),
            "--history",
            str(tmp_path / "h.json"),
            "--no-progress",
        ]
    )
    assert len(history.mean_reward) == 1 and (tmp_path / "run" / "checkpoint-1").is_dir()
    assert json.loads((tmp_path / "h.json").read_text())["checkpoint"] == history.checkpoint


# --- bad input: a ValueError naming the argument, before any training -----------------------------


def test_nonexistent_model_path_names_model(tmp_path):
    with pytest.raises(ValueError, match="^model: no such folder"):
        loop.load_model_and_tokenizer(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="^model:"):
        main(["--model", "./no/such/model", "--iterations", "1"])


def test_tokenizer_without_eos_or_pad_names_tokenizer(loaded):
    model, tokenizer = loaded
    for missing in ("eos_token", "pad_token"):
        broken = build_tiny_tokenizer()
        setattr(broken, missing, None)
        with pytest.raises(ValueError, match=f"^tokenizer: it has no {missing[:3].upper()}"):
            loop.train(model, broken, data.load_problems(n=2), _config(), progress=False)


def test_group_of_one_names_group_size(loaded):
    model, tokenizer = loaded
    with pytest.raises(ValueError, match="^group_size: GRPO needs at least 2"):  # LMRLConfig.validate's
        loop.train(model, tokenizer, data.load_problems(n=2), _config(group_size=1), progress=False)
    with pytest.raises(ValueError, match="^group_size"):
        main(["--model", "/no/such/folder", "--group-size", "1"])  # checked before the model is even loaded


def test_prompt_longer_than_context_names_the_argument(loaded, tiny_qwen, tmp_path):
    model, tokenizer = loaded
    before = [p.detach().clone() for p in model.parameters()]
    too_long = [("Mia has 3 apples. " * 200, "3")]
    with pytest.raises(ValueError, match="^problems: prompt 0 has .* tokens"):
        loop.train(model, tokenizer, too_long, _config(), progress=False)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # nothing trained
    dataset = tmp_path / "long.jsonl"
    dataset.write_text(json.dumps({"question": too_long[0][0], "answer": "3"}))
    with pytest.raises(ValueError, match="^dataset: prompt 0"):
        main(["--model", str(tiny_qwen), "--dataset", str(dataset), "--iterations", "1"])


def test_bad_dataset_lines_name_dataset(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\n')
    with pytest.raises(ValueError, match="^dataset: line 1"):
        data.load_problems(dataset=bad)
    with pytest.raises(ValueError, match="^dataset: no such file"):
        data.load_problems(dataset=tmp_path / "missing.jsonl")


def test_scores_use_the_course_rewards():
    texts = ["blah Answer: 8", "Answer: 7", "no answer here"]
    assert data.score(texts, ["8", "8", "8"]) == [1.5, 0.5, 0.0]
    with pytest.raises(ValueError, match="^reward_weights: unknown"):
        data.score(texts, ["8"] * 3, {"nonsense": 1.0})


def test_reward_breakdown_means_each_reward():
    assert data.reward_breakdown(["Answer: 8", "Answer: 7", "nothing"], ["8", "8", "8"]) == {
        "answer": 1 / 3,
        "answer_format": 2 / 3,
    }
    with pytest.raises(ValueError, match="^names: unknown"):
        data.reward_breakdown(["x"], ["1"], names=("nonsense",))


def test_unknown_hub_id_offline_names_model():
    with pytest.raises(ValueError, match="^model: could not load 'no-such-org/no-such-model'"):
        loop.load_model_and_tokenizer("no-such-org/no-such-model")
