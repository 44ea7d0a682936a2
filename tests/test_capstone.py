"""Tests of course_lib.lectures.capstone: warm-up, the LM behind GRPOTrainer, one GRPO step, PPO's token episodes."""

import copy

import pytest
import torch

from course_lib.lectures.capstone import (
    AdditionEnv,
    CapstoneConfig,
    LMActor,
    LMPolicy,
    ValueHeadLM,
    grpo_trainer,
    run_grpo,
    run_ppo,
    sft,
    sft_loss,
    warm_up,
)
from course_lib.tasks import AdditionTask
from course_lib.tiny_lm import TinyLM, TinyLMConfig, completion_log_probs, completion_mask, grpo_step
from course_lib.trainers.grpo_trainer import GRPOTrainerConfig


def _small(seed=0):
    task = AdditionTask(1)  # prompts "3+4=", answers "7" or "12"
    lm = TinyLM(TinyLMConfig(vocab_size=14, block_size=7, n_layer=1, n_head=2, d_model=16), seed=seed)
    return task, lm


def test_sft_lowers_the_loss_on_the_demonstrations():
    task, lm = _small()
    prompts, completions = task.demonstrations(task.all_pairs())
    before = sft_loss(lm, prompts, completions, task.tokenizer.eos_id).item()
    losses = sft(lm, prompts, completions, task.tokenizer.eos_id, steps=60, lr=1e-2)
    assert len(losses) == 60 and losses[-1] < 0.5 * before


def test_lm_policy_samples_groups_with_masks():
    task, lm = _small()
    policy = LMPolicy(lm, task.max_new_tokens, task.tokenizer.eos_id, task.tokenizer.pad_id)
    prompts = task.prompts([(3, 4), (9, 9)])
    out = policy.sample_group(prompts, 5, 1.0, torch.Generator().manual_seed(0))
    assert out.shape == (2, 5, task.max_new_tokens)
    mask = policy.response_mask(out)
    assert torch.equal(mask, completion_mask(out, task.tokenizer.eos_id))
    logp = policy.response_log_probs(prompts, out)
    assert logp.shape == out.shape
    assert torch.allclose(logp[1, 2], completion_log_probs(lm, prompts[1:2], out[1, 2:3])[0], atol=1e-6)


def test_grpo_step_is_the_trainers_step():
    """The exercise's reference step and GRPOTrainer.training_step on the LM make the same update."""
    task, lm = _small()
    cfg = GRPOTrainerConfig(group_size=4, lr=1e-2, kl_coef=0.1, clip_eps=0.2)
    trainer = grpo_trainer(copy.deepcopy(lm), task, cfg, reward="digits", max_grad_norm=0.5)
    with torch.no_grad():  # move the policy off its reference so the KL term matters
        for p in trainer.model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    policy_lm = copy.deepcopy(trainer.model.lm)
    prompts = task.prompts([(3, 4), (9, 9), (0, 5)])
    responses = trainer.generate_group_outputs(prompts)
    rewards = trainer.compute_rewards(prompts, responses)
    with torch.no_grad():
        logp_old = trainer.log_probs(trainer.model, prompts, responses) + 0.05
    info = trainer.training_step(prompts, responses, rewards, logp_old)
    opt = torch.optim.Adam(policy_lm.parameters(), lr=1e-2)
    loss = grpo_step(policy_lm, trainer.ref_model.lm, opt, prompts, responses, rewards, logp_old,
                     task.tokenizer.eos_id, clip_eps=0.2, kl_coef=0.1, max_grad_norm=0.5)
    assert abs(loss - info["loss"]) < 1e-6
    for p, q in zip(policy_lm.parameters(), trainer.model.lm.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_addition_env_episodes_end_at_eos_with_the_reward():
    task, lm = _small()
    tok = task.tokenizer
    env = AdditionEnv(task, task.prompts([(3, 4)]), num_envs=2, reward="exact")
    obs = env.reset(seed=0)
    assert obs.shape == (2, task.prompt_length + task.max_new_tokens)
    obs, r, term, trunc, final = env.step(torch.tensor([7, 1]))
    assert r.tolist() == [0.0, 0.0] and not term.any()
    obs, r, term, trunc, final = env.step(torch.tensor([tok.eos_id, 2]))
    assert r.tolist() == [1.0, 0.0] and term.tolist() == [True, False]
    assert tok.decode(final[0, task.prompt_length:]) == "7$"
    assert (obs[0, task.prompt_length:] == tok.pad_id).all(), "a fresh episode starts where one ended"
    obs, r, term, trunc, final = env.step(torch.tensor([5, 5]))  # row 1 hits max_new_tokens = 3
    assert term.tolist() == [False, True] and env.completions == 2


def test_actor_and_critic_read_the_last_written_token():
    task, lm = _small()
    pad = task.tokenizer.pad_id
    actor, critic = LMActor(lm, pad), ValueHeadLM(lm, pad)
    prompts, completions = task.demonstrations([(3, 4)])
    obs = torch.cat([prompts, torch.full((1, 3), pad)], 1)
    obs[0, 4] = 7  # one token written
    expected = lm(obs[:, :5])[:, -1]
    logits = actor(obs)
    assert torch.allclose(logits[:, :pad], expected[:, :pad], atol=1e-6) and logits[0, pad] < -1e8
    assert critic(obs).shape == (1,)
    assert all(p is not q for p, q in zip(critic.body.parameters(), lm.parameters())), "the critic has its own body"


def test_short_runs_record_their_evaluations():
    cfg = CapstoneConfig(n_digits=1, n_demos=20, n_heldout=20, sft_steps=5, d_model=16, eval_every=1,
                         prompts_per_step=4)
    cfg.grpo = GRPOTrainerConfig(group_size=4, epochs=2, steps_per_epoch=1, kl_coef=0.02)
    lm, task, split, losses = warm_up(cfg, seed=0)
    grpo = run_grpo(copy.deepcopy(lm), task, split, cfg)
    assert grpo["eval"]["completions"] == [0, 16, 32] and len(grpo["history"]["mean_reward"]) == 2
    assert len(grpo["history"]["mean_length"]) == 2
    assert grpo["history"]["lr"] == pytest.approx([cfg.grpo.lr, cfg.grpo.lr / 2])  # lr_decay: linear towards 0
    ppo = run_ppo(copy.deepcopy(lm), task, split, cfg, num_envs=8)
    assert ppo["eval"]["completions"][-1] >= 32
    cfg.lr_decay = False
    assert run_grpo(copy.deepcopy(lm), task, split, cfg)["history"]["lr"] == [cfg.grpo.lr] * 2

