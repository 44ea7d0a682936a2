"""Chapter 09's exercise references (``course_lib.hf.trl_contract``) against TRL 1.16 itself.

- ``answer_reward`` is called with exactly the keyword arguments ``GRPOTrainer._calculate_rewards`` passes, and
  trains inside a real ``GRPOTrainer``;
- ``completion_logps`` equals TRL's own recipe (``selective_log_softmax`` of the shifted, temperature-scaled logits
  under TRL's attention mask) on the completion mask, and a left-padded prompt reads as the unpadded one;
- ``grpo_config_kwargs`` builds a real ``GRPOConfig`` whose derived batch sizes are the course's round, and a real
  ``GRPOTrainer`` run takes ``iterations * update_epochs * num_minibatches`` optimiser steps, generating once a round.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from course_lib.hf.trl_contract import answer_reward, completion_logps, grpo_config_kwargs
from course_lib.lm_rl import LMRLConfig
from course_lib.lm_sampling import completion_mask, token_logps

EOS, PAD = 0, 1


def test_answer_reward_takes_what_trl_passes():
    rows = [{"prompt": "What is 5 + 7?", "answer": "12", "level": 1}, {"prompt": "Hello", "answer": None, "level": 2}]
    inputs = [row for row in rows for _ in range(2)]  # TRL's RepeatSampler: G = 2 copies of each row
    kwargs = {key: [row[key] for row in inputs] for key in inputs[0] if key != "prompt"}  # _calculate_rewards
    got = answer_reward(
        prompts=[r["prompt"] for r in inputs],
        completions=["Answer: 12", "Answer: 1", "hi", "x"],
        completion_ids=[[3, EOS]] * 4,
        trainer_state=None,
        log_extra=print,
        log_metric=print,
        **kwargs,
    )
    assert got == [1.0, 0.0, None, None]
    chat = [[{"role": "assistant", "content": "Answer: 12"}], [{"role": "assistant", "content": "Answer: 2"}]]
    question = [[{"role": "user", "content": "?"}]] * 2
    assert answer_reward(prompts=question, completions=chat, answer=["12", "12"]) == [1.0, 0.0]


def test_answer_reward_refuses_misaligned_answers():
    with pytest.raises(ValueError, match="answer"):
        answer_reward(prompts=["a"] * 4, completions=["Answer: 1"] * 4, answer=["1", "2"])


@pytest.fixture(scope="module")
def model():
    from course_lib.hf.tiny import build_tiny_model

    return build_tiny_model(40, hidden_size=32, num_layers=1, eos_token_id=EOS, pad_token_id=PAD).eval()


def _batch():
    prompt_ids = torch.tensor([[PAD, PAD, 7, 8], [5, 6, 7, 8], [PAD, 9, 7, 8]])
    prompt_mask = (prompt_ids != PAD).long()
    completion = torch.tensor([[3, EOS, PAD, PAD], [4, 5, 6, EOS], [11, 12, 13, 14]])
    return torch.cat([prompt_ids, completion], dim=1), prompt_mask, completion


def test_completion_logps_is_trls_recipe(model):
    from trl.trainer.utils import selective_log_softmax

    sequences, prompt_mask, completion = _batch()
    logp, mask = completion_logps(model, sequences, prompt_mask, eos_id=EOS, temperature=0.7)
    assert torch.equal(mask, completion_mask(completion, EOS))
    assert torch.equal(mask, torch.tensor([[1.0, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]]))
    # TRL (_generate_and_score_completions, _get_per_token_logps_and_entropies): the completion mask in the
    # attention mask, logits[:, P - 1:-1] / temperature, selective_log_softmax.
    attention = torch.cat([prompt_mask, mask.long()], dim=1)
    logits = model(input_ids=sequences, attention_mask=attention).logits[:, prompt_mask.shape[1] - 1 : -1] / 0.7
    trl = selective_log_softmax(logits, completion)
    assert torch.allclose(logp * mask, trl * mask, atol=1e-6)
    assert torch.allclose(logp, token_logps(model, sequences[:, :4], prompt_mask, completion, temperature=0.7))
    assert logp.requires_grad


def test_completion_logps_reads_a_padded_prompt_as_the_unpadded_one(model):
    sequences, prompt_mask, _ = _batch()
    padded, _ = completion_logps(model, sequences, prompt_mask, eos_id=EOS)
    alone, _ = completion_logps(model, sequences[:1, 2:], prompt_mask[:1, 2:], eos_id=EOS)
    assert torch.allclose(padded[:1], alone, atol=1e-5)


def test_completion_logps_names_bad_arguments(model):
    sequences, prompt_mask, _ = _batch()
    with pytest.raises(ValueError, match="prompt_mask"):
        completion_logps(model, sequences, prompt_mask[:2], eos_id=EOS)
    with pytest.raises(ValueError, match="sequences"):
        completion_logps(model, sequences.float(), prompt_mask, eos_id=EOS)
    with pytest.raises(ValueError, match="temperature"):
        completion_logps(model, sequences, prompt_mask, eos_id=EOS, temperature=0.0)


def _grpo_config(tmp_path, **kwargs):
    from trl import GRPOConfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", **kwargs)


@pytest.mark.parametrize(
    "cfg",
    [
        LMRLConfig(),
        LMRLConfig(prompts_per_step=4, group_size=8, update_epochs=2, num_minibatches=2, iterations=50),
        LMRLConfig(
            prompts_per_step=8,
            group_size=4,
            num_minibatches=4,
            micro_batch_size=2,
            warmup_iterations=3,
            lr_schedule="constant",
            loss_agg="seq-mean-token-sum-norm",
            normalize_std=False,
            clip_eps_high=0.28,
        ),
    ],
    ids=["defaults", "two-minibatches", "micro-batches"],
)
def test_grpo_config_kwargs_build_a_grpo_config_of_one_round(cfg, tmp_path):
    config = _grpo_config(tmp_path, **grpo_config_kwargs(cfg))
    B, G, K, M = cfg.prompts_per_step, cfg.group_size, cfg.update_epochs, cfg.num_minibatches
    assert config.generation_batch_size == B * G  # one generation: the whole round
    assert config.steps_per_generation // config.gradient_accumulation_steps == M  # optimiser steps per epoch
    assert config.per_device_train_batch_size * config.gradient_accumulation_steps == B * G // M
    assert (config.num_iterations, config.max_steps, config.num_generations) == (K, cfg.iterations * K * M, G)
    assert config.warmup_steps == cfg.warmup_iterations * K * M
    assert config.epsilon_high == (cfg.clip_eps_high or cfg.clip_eps) and config.beta == cfg.kl_coef
    assert config.use_bias_correction_kl is False


def test_grpo_config_kwargs_per_process(tmp_path):
    kwargs = grpo_config_kwargs(LMRLConfig(prompts_per_step=16, group_size=4), num_processes=4)
    assert kwargs["per_device_train_batch_size"] == 16  # 64 completions over 4 processes
    with pytest.raises(ValueError, match="num_processes"):
        grpo_config_kwargs(LMRLConfig(prompts_per_step=3, group_size=2), num_processes=4)
    with pytest.raises(ValueError, match="cfg.algo"):
        grpo_config_kwargs(LMRLConfig.ppo())
    with pytest.raises(ValueError, match="cfg"):
        grpo_config_kwargs({"group_size": 4})


@pytest.mark.slow
def test_a_grpo_trainer_run_counts_steps_and_generations_as_the_course(tiny_qwen, tmp_path):
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    torch.manual_seed(0)
    cfg = LMRLConfig(
        prompts_per_step=2, group_size=2, update_epochs=2, num_minibatches=2, iterations=2, max_new_tokens=4, lr=1e-3
    )
    args = _grpo_config(tmp_path, logging_steps=1, save_strategy="no", disable_tqdm=True, **grpo_config_kwargs(cfg))
    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen)
    dataset = Dataset.from_dict(
        {"prompt": [f"What is {a} + {a}?" for a in range(1, 5)], "answer": [str(2 * a) for a in range(1, 5)]}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = GRPOTrainer(
            model=str(tiny_qwen),
            reward_funcs=answer_reward,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
        )
    generated = []
    generate = trainer._generate_and_score_completions
    trainer._generate_and_score_completions = lambda batch: (generated.append(len(batch)), generate(batch))[1]
    trainer.train()
    assert trainer.state.global_step == cfg.iterations * cfg.update_epochs * cfg.num_minibatches  # 8
    assert generated == [4, 4]  # once a round, B * G completions each time
    assert any("rewards/answer_reward/mean" in row for row in trainer.state.log_history)
