"""Chapter 08: a tiny transformer learns 2-digit addition by warm-up, then GRPO (or PPO).

1. :func:`sft`: supervised warm-up, the NLL of the completion tokens (EOS in, PAD out);
2. :class:`LMPolicy` and :class:`LMGRPOTrainer`: ``GRPOTrainer``'s hooks pointed at the LM
   (sampling with EOS stops, shifted log-probs, the completion mask, the verifier);
3. :class:`AdditionEnv`, :class:`LMActor`, :class:`ValueHeadLM`: the task as token-level episodes
   for ``PPOTrainer``, the critic a value head (one value per token, GAE over tokens);
4. :func:`accuracy`, :func:`run_grpo`, :func:`run_ppo`: held-out exact match and the benchmark's runs.

Shapes: ``B`` prompts, ``G`` completions per prompt, ``P`` prompt tokens, ``L`` completion
tokens, ``N`` environments, ``D`` model width.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from functools import partial

import torch
from einops import rearrange, repeat
from torch import nn

from course_lib import _validate
from course_lib.tasks import AdditionTask, score_completions
from course_lib.tiny_lm import TinyLM, TinyLMConfig, completion_log_probs, completion_mask
from course_lib.trainers.grpo_trainer import GRPOTrainer, GRPOTrainerConfig
from course_lib.trainers.ppo_trainer import PPOTrainer, PPOTrainerConfig

# ---------------------------------------------------------------------------
# 1. Supervised warm-up
# ---------------------------------------------------------------------------


def sft_loss(model: nn.Module, prompts: torch.Tensor, completions: torch.Tensor, eos_id: int) -> torch.Tensor:
    """Mean negative log-likelihood of the completion tokens, EOS included, PAD excluded.

    Args:
        prompts: ``(B, P)`` ids; completions: ``(B, L)`` demonstration ids (answer, EOS, PAD...).
    """
    logp = completion_log_probs(model, prompts, completions)  # (B, L)
    mask = completion_mask(completions, eos_id)  # (B, L)
    return -(logp * mask).sum() / mask.sum()


def sft(model: nn.Module, prompts: torch.Tensor, completions: torch.Tensor, eos_id: int, steps: int = 300,
        lr: float = 3e-3, batch_size: int = 64, seed: int = 0) -> list[float]:
    """Adam on :func:`sft_loss` over shuffled minibatches of the demonstrations.

    Returns:
        The loss of every step.
    """
    steps = _validate.require_int("steps", steps, minimum=0)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    for _ in range(steps):
        idx = torch.randperm(prompts.shape[0], generator=g)[:batch_size]
        loss = sft_loss(model, prompts[idx], completions[idx], eos_id)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


# ---------------------------------------------------------------------------
# 2. GRPO: the LM behind the interface GRPOTrainer understands
# ---------------------------------------------------------------------------


class LMPolicy(nn.Module):
    """A :class:`TinyLM` (trained in place) with what :class:`LMGRPOTrainer` calls: sampling ``L`` tokens at
    most, stopping at ``eos_id``, padding with ``pad_id``; log-probs; the mask; greedy answers."""

    def __init__(self, lm: TinyLM, max_new_tokens: int, eos_id: int, pad_id: int):
        super().__init__()
        self.lm, self.max_new_tokens, self.eos_id, self.pad_id = lm, max_new_tokens, eos_id, pad_id

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm(ids)  # (B, T, V)

    def sample_group(self, prompts: torch.Tensor, group_size: int, temperature: float,
                     generator: torch.Generator | None = None) -> torch.Tensor:
        """``(B, P)`` prompts to ``(B, G, L)`` sampled completions (PAD after EOS)."""
        flat = repeat(prompts, "B P -> (B G) P", G=group_size)  # G copies of each prompt, side by side
        out, _ = self.lm.generate(flat, self.max_new_tokens, temperature=temperature, eos_id=self.eos_id,
                                  pad_id=self.pad_id, generator=generator)  # (B*G, L)
        return rearrange(out, "(B G) L -> B G L", G=group_size)

    def response_log_probs(self, prompts: torch.Tensor, responses: torch.Tensor, temperature: float = 1.0
                           ) -> torch.Tensor:
        """``(B, G, L)`` log pi of every completion token (shifted logits, one forward pass)."""
        G = responses.shape[1]
        flat = repeat(prompts, "B P -> (B G) P", G=G)
        logp = completion_log_probs(self.lm, flat, rearrange(responses, "B G L -> (B G) L"), temperature)
        return rearrange(logp, "(B G) L -> B G L", G=G)  # (B, G, L)

    def response_mask(self, responses: torch.Tensor) -> torch.Tensor:
        """``(..., L)`` 1.0 up to and including the first EOS."""
        return completion_mask(responses, self.eos_id)

    def greedy(self, prompts: torch.Tensor) -> torch.Tensor:
        """``(B, L)`` greedy completions."""
        return self.lm.generate(prompts, self.max_new_tokens, greedy=True, eos_id=self.eos_id,
                                pad_id=self.pad_id)[0]


class LMGRPOTrainer(GRPOTrainer):
    """:class:`GRPOTrainer` with its sampling, log-prob, mask and scoring hooks pointed at an :class:`LMPolicy`.

    The loop, the advantages, ``grpo_loss`` and the batch constants are the trainer's own;
    only what differs for a language model is overridden (and the gradient norm is clipped).
    """

    def __init__(self, policy: LMPolicy, config: GRPOTrainerConfig, tokenizer, reward: str = "exact",
                 max_grad_norm: float = 1.0):
        super().__init__(policy, copy.deepcopy(policy), config=config)  # the reference: the policy before RL
        self.tokenizer, self.max_grad_norm = tokenizer, _validate.require_positive("max_grad_norm", max_grad_norm)
        self.reward_fn = partial(score_completions, tokenizer=tokenizer, reward=reward)
        self.mean_length = float("nan")  # of the last batch scored, for the plots

    def generate_group_outputs(self, prompts: torch.Tensor) -> torch.Tensor:
        return self.model.sample_group(prompts, self.config.group_size, self.config.temperature, self.generator)

    def compute_rewards(self, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        self.mean_length = float(self.response_mask(responses).sum(-1).mean())
        return self.reward_fn(prompts[:, None, :], responses)  # (B, G)

    def log_probs(self, model: nn.Module, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        return model.response_log_probs(prompts, responses, self.config.temperature)  # (B, G, L)

    def response_mask(self, responses: torch.Tensor) -> torch.Tensor:
        return self.model.response_mask(responses)  # (B, G, L): up to and including EOS

    def entropy(self, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        # An LM's distribution depends on the tokens before: estimate it by the mean -log pi of the samples.
        mask = self.response_mask(responses)
        return -(self.log_probs(self.model, prompts, responses) * mask).sum() / mask.sum()

    def greedy_rewards(self, prompts: torch.Tensor) -> list[float]:
        return [float(r) for r in self.reward_fn(prompts, self.model.greedy(prompts))]

    def exact_match(self, prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        return score_completions(prompts[:, None, :], responses, self.tokenizer, "exact")  # (B, G)

    def optimizer_step(self, loss, prompts, responses, info):
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)  # the LM's updates need the clip
        self.optimizer.step()
        return {**info, "loss": loss.item(), "entropy": 0.0}


def grpo_trainer(lm: TinyLM, task: AdditionTask, config: GRPOTrainerConfig, reward: str = "exact",
                 max_grad_norm: float = 1.0) -> LMGRPOTrainer:
    """A GRPO trainer for ``lm`` on ``task``: the policy, a frozen copy as reference, the verifier."""
    tok = task.tokenizer
    policy = LMPolicy(lm, task.max_new_tokens, tok.eos_id, tok.pad_id)
    return LMGRPOTrainer(policy, config, tok, reward, max_grad_norm)


def accuracy(lm: TinyLM, task: AdditionTask, pairs: list[tuple[int, int]]) -> float:
    """Greedy exact-match accuracy on ``pairs``: the answer, then EOS, nothing else."""
    with torch.no_grad():
        prompts = task.prompts(pairs)
        completions, _ = lm.generate(prompts, task.max_new_tokens, greedy=True,
                                     eos_id=task.tokenizer.eos_id, pad_id=task.tokenizer.pad_id)
        return float(score_completions(prompts, completions, task.tokenizer, "exact").mean())


def sample_table(lm: TinyLM, task: AdditionTask, pairs, temperature: float | None = None, seed: int = 0
                 ) -> list[tuple[str, str, str]]:
    """``(prompt, completion, answer)`` texts, greedy (``temperature=None``) or sampled."""
    prompts = task.prompts(pairs)
    g = torch.Generator().manual_seed(seed)
    out, _ = lm.generate(prompts, task.max_new_tokens, temperature=temperature or 1.0, greedy=temperature is None,
                         eos_id=task.tokenizer.eos_id, pad_id=task.tokenizer.pad_id, generator=g)
    tok = task.tokenizer
    return [(tok.decode(p), tok.decode(c), task.answer_text(a, b)) for p, c, (a, b) in zip(prompts, out, pairs)]


def history_dict(history) -> dict:
    """A GRPOHistory as a plain dict of lists, without the model (small enough to ship)."""
    return {f.name: getattr(history, f.name) for f in dataclasses.fields(history) if f.name not in ("model", "greedy_reward")}


# ---------------------------------------------------------------------------
# 3. PPO: the same task as token-level episodes, a value head as the critic
# ---------------------------------------------------------------------------


class AdditionEnv:
    """Addition as episodes of one step per completion token, for :class:`PPOTrainer`.

    An observation is ``(P + L,)`` ids: a prompt and the completion so far, PAD-padded. An action
    appends a token; the episode terminates at EOS or after ``L`` tokens with the verifier's reward
    (``reward``, see :func:`course_lib.tasks.score_completions`) and 0 before; a fresh prompt from
    ``prompts`` ``(M, P)`` starts at once (same-step autoreset, as ``trainers.envs.SortingEnv``).
    """

    def __init__(self, task: AdditionTask, prompts: torch.Tensor, num_envs: int = 256, reward: str = "exact"):
        self.task, self.pool, self.reward = task, prompts.long(), reward
        self.num_envs = _validate.require_int("num_envs", num_envs, minimum=1)
        self.P, self.L = task.prompt_length, task.max_new_tokens
        self.eos_id, self.pad_id = task.tokenizer.eos_id, task.tokenizer.pad_id
        self.completions = 0  # finished episodes so far: the sample budget, counted as GRPO counts it

    def _draw(self, n: int) -> torch.Tensor:
        pick = torch.randint(0, self.pool.shape[0], (n,), generator=self.generator)
        fresh = torch.full((n, self.P + self.L), self.pad_id, dtype=torch.long)
        fresh[:, :self.P] = self.pool[pick]
        return fresh  # (n, P + L)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        self.generator = torch.Generator().manual_seed(0 if seed is None else seed)
        self.obs = self._draw(self.num_envs)  # (N, P + L)
        self.t = torch.zeros(self.num_envs, dtype=torch.long)  # (N,) tokens written
        return self.obs.clone()

    def step(self, actions: torch.Tensor):
        rows = torch.arange(self.num_envs)
        obs = self.obs.clone()
        obs[rows, self.P + self.t] = actions
        self.t = self.t + 1
        done = (actions == self.eos_id) | (self.t == self.L)  # (N,)
        rewards = torch.zeros(self.num_envs)
        if done.any():
            rewards[done] = score_completions(obs[done, :self.P], obs[done, self.P:], self.task.tokenizer, self.reward)
            self.completions += int(done.sum())
        final_obs = obs.clone()
        obs[done] = self._draw(int(done.sum()))  # the next episodes start at once
        self.t = torch.where(done, torch.zeros_like(self.t), self.t)
        self.obs = obs
        no = torch.zeros(self.num_envs, dtype=torch.bool)
        return obs.clone(), rewards, done, no, final_obs


def _last_written(obs: torch.Tensor, pad_id: int) -> torch.Tensor:
    """``(N,)`` index of the last non-PAD token of each observation: where the next token is predicted."""
    return (obs != pad_id).sum(-1) - 1


class LMActor(nn.Module):
    """The LM as PPO's actor: ``(N, P + L)`` observations to ``(N, V)`` logits of the next token."""

    def __init__(self, lm: TinyLM, pad_id: int):
        super().__init__()
        self.lm, self.pad_id = lm, pad_id

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        logits = self.lm(obs)  # (N, T, V): causal, so the PAD after the last token changes nothing before it
        logits = logits[torch.arange(obs.shape[0]), _last_written(obs, self.pad_id)]  # (N, V)
        return logits.masked_fill(torch.arange(logits.shape[-1]) == self.pad_id, -1e9)  # PAD is never written


class ValueHeadLM(nn.Module):
    """The critic: a linear value head on a copy of the LM's body, V(prompt, y_<t) at the last written token.

    ``(N, P + L)`` -> ``(N,)``. Its own weights, from the warmed-up LM (as InstructGPT's value model).
    """

    def __init__(self, lm: TinyLM, pad_id: int):
        super().__init__()
        self.body, self.pad_id = copy.deepcopy(lm), pad_id
        self.value_head = nn.Linear(lm.cfg.d_model, 1)
        with torch.no_grad():
            self.value_head.weight.zero_()
            self.value_head.bias.zero_()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = self.body.hidden(obs)  # (N, T, D)
        h = h[torch.arange(obs.shape[0]), _last_written(obs, self.pad_id)]  # (N, D)
        return self.value_head(h)[:, 0]  # (N,)


# ---------------------------------------------------------------------------
# 4. The whole run: warm-up, then GRPO or PPO, with the same budget of completions
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class CapstoneConfig:
    """Every knob of chapter 08's runs (``benchmarks/capstone.py`` uses the defaults)."""

    n_digits: int = 2
    """Digits per operand: prompts like "47+85=", 10,000 of them."""
    n_demos: int = 500
    """Demonstrations for the warm-up: too few on purpose (5% of the prompts)."""
    n_heldout: int = 500
    """Prompts never trained on, for the greedy exact-match accuracy."""
    sft_steps: int = 200
    """Adam steps of supervised warm-up (batches of 64 demonstrations)."""
    sft_lr: float = 3e-3
    """Learning rate of the warm-up."""
    d_model: int = 64
    """Width of the tiny LM (2 layers, 4 heads: about 100k parameters)."""
    reward: str = "digits+exact"
    """The verifier's reward (course_lib.tasks.score_completions): digit-wise credit plus 1 when exact."""
    grpo: GRPOTrainerConfig = dataclasses.field(default_factory=lambda: GRPOTrainerConfig(
        group_size=8, epochs=250, steps_per_epoch=4, lr=2e-3, kl_coef=0.02, temperature=1.0,
        loss_agg="seq-mean-token-mean"))
    """G = 8 completions per prompt, four clipped steps on each batch, Adam at 2e-3 (see ``lr_decay``): tuned
    from 2 steps at 1e-3; ``benchmarks/capstone.py``'s docstring lists every tuning run."""
    prompts_per_step: int = 64
    """B, prompts drawn from the training prompts for each GRPO epoch."""
    max_grad_norm: float = 1.0
    """The gradient norm is clipped to this before every GRPO step."""
    eval_every: int = 25
    """Epochs (GRPO) or updates (PPO) between two held-out evaluations."""
    lr_decay: bool = True
    """GRPO's learning rate falls linearly towards 0 over its epochs (TRL's default): big steps first, small at the end."""


def warm_up(cfg: CapstoneConfig, seed: int = 0) -> tuple[TinyLM, AdditionTask, dict, list[float]]:
    """The task, its split, and a TinyLM after supervised warm-up on the demonstrations.

    Returns:
        ``(lm, task, split, sft_losses)``.
    """
    task = AdditionTask(cfg.n_digits)
    split = task.split(cfg.n_demos, cfg.n_heldout, seed=0)  # the same held-out prompts for every seed
    lm = TinyLM(TinyLMConfig(vocab_size=task.tokenizer.vocab_size, block_size=task.prompt_length + task.max_new_tokens,
                             d_model=cfg.d_model), seed=seed)
    prompts, completions = task.demonstrations(split["demos"])
    losses = sft(lm, prompts, completions, task.tokenizer.eos_id, steps=cfg.sft_steps, lr=cfg.sft_lr, seed=seed)
    return lm, task, split, losses


def run_grpo(lm: TinyLM, task: AdditionTask, split: dict, cfg: CapstoneConfig, seed: int = 0,
             progress: bool = False) -> dict:
    """GRPO from the warmed-up ``lm`` (trained in place), evaluated every ``cfg.eval_every`` epochs.

    Returns:
        ``{"history": per-epoch GRPOHistory as a dict, "eval": {"epoch", "completions", "seconds",
        "accuracy"}}``.
    """
    trainer = grpo_trainer(lm, task, dataclasses.replace(cfg.grpo, seed=seed), cfg.reward, cfg.max_grad_norm)
    prompts = task.prompts(split["train"])
    per_epoch = cfg.prompts_per_step * cfg.grpo.group_size
    ev = {"epoch": [0], "completions": [0], "seconds": [0.0], "accuracy": [accuracy(lm, task, split["heldout"])]}
    history, seconds = {}, 0.0
    for epoch in range(1, cfg.grpo.epochs + 1):
        start = time.perf_counter()
        # One epoch of the trainer's loop on a fresh batch of prompts (drawn with its sampling generator).
        pick = torch.randperm(prompts.shape[0], generator=trainer.generator)[:cfg.prompts_per_step]
        for group in trainer.optimizer.param_groups:  # cfg.lr_decay: linearly from lr towards 0
            group["lr"] = cfg.grpo.lr * (1 - (epoch - 1) / cfg.grpo.epochs if cfg.lr_decay else 1)
        record = history_dict(trainer.train(prompts[pick], epochs=1, progress=False))
        seconds += time.perf_counter() - start  # training only: the evaluations are not counted
        record["mean_length"] = [trainer.mean_length]
        record["lr"] = [trainer.optimizer.param_groups[0]["lr"]]
        for key, values in record.items():
            if isinstance(values, list):
                history.setdefault(key, []).extend(values)
        if epoch % cfg.eval_every == 0 or epoch == cfg.grpo.epochs:
            ev["epoch"].append(epoch)
            ev["completions"].append(epoch * per_epoch)
            ev["seconds"].append(seconds)
            ev["accuracy"].append(accuracy(lm, task, split["heldout"]))
    return {"history": history, "eval": ev}


def ppo_config(seed: int = 0):
    """PPO's hyperparameters for the capstone: 512 environments x 4 tokens per rollout, one epoch, gamma = 1."""
    # gamma = 1: the only reward is at the last token, and a completion is at most 4 tokens long.
    return PPOTrainerConfig(lr=1e-3, num_steps=4, update_epochs=1, num_minibatches=2, gamma=1.0, lam=0.95,
                            kl_coef=0.02, kl_kind="k1", ent_coef=0.0, clip_eps=0.2, max_grad_norm=1.0,
                            value_coef=0.5, seed=seed)


def run_ppo(lm: TinyLM, task: AdditionTask, split: dict, cfg: CapstoneConfig, seed: int = 0,
            num_envs: int = 512, progress: bool = False) -> dict:
    """PPO from the warmed-up ``lm`` (trained in place) until it has sampled as many completions as GRPO.

    Returns:
        ``{"history": PPOHistory as a dict, "eval": {"update", "completions", "seconds", "accuracy"}}``.
    """
    pad = task.tokenizer.pad_id
    actor = LMActor(lm, pad)
    trainer = PPOTrainer(actor, ValueHeadLM(lm, pad), copy.deepcopy(actor), config=ppo_config(seed))
    env = AdditionEnv(task, task.prompts(split["train"]), num_envs=num_envs, reward=cfg.reward)
    budget = cfg.grpo.epochs * cfg.prompts_per_step * cfg.grpo.group_size  # GRPO's completions
    ev = {"update": [0], "completions": [0], "seconds": [0.0], "accuracy": [accuracy(lm, task, split["heldout"])]}
    updates, seconds = 0, 0.0
    while env.completions < budget:
        start = time.perf_counter()
        for _ in range(cfg.eval_every):
            trainer.train(env, 1, progress=False)
            updates += 1
            if env.completions >= budget:
                break
        seconds += time.perf_counter() - start
        ev["update"].append(updates)
        ev["completions"].append(env.completions)
        ev["seconds"].append(seconds)
        ev["accuracy"].append(accuracy(lm, task, split["heldout"]))
    return {"history": trainer.history.as_dict(), "eval": ev}
