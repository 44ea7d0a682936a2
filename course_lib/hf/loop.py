"""The course's GRPO on any Hugging Face causal language model.

Shao et al. 2024, "DeepSeekMath", Algorithm 1, with the course's own pieces: what chapter 06
did with a toy policy, done here with ``transformers``. One step of :func:`train`:

1. take ``B`` prompts and sample ``G`` completions of each with ``model.generate``
   (``num_return_sequences=G``, a temperature, top-p, ``max_new_tokens``; prompts padded on
   the left so every completion starts at the same column) -- :func:`generate_group`;
2. mask every completion up to and including its first EOS (:func:`completion_mask`) and
   decode it; score it with the course's reward functions (``course_lib.hf.data``);
3. record ``logp_old`` (the sampling policy) and ``logp_ref`` (the frozen reference), the
   per-token log-probs of the completion, logits shifted by one (:func:`completion_log_probs`);
4. take ``epochs_per_batch`` AdamW steps on ``course_lib.grpo.grpo_loss`` (group advantages,
   PPO's clip, k3 KL), gradients clipped to ``max_grad_norm``;
5. log a history row; every ``save_every`` steps, ``save_pretrained`` a checkpoint.

Shapes: ``B`` prompts per step, ``G`` completions per prompt, ``N = B * G`` rows,
``P`` padded prompt tokens, ``T`` completion tokens (at most ``max_new_tokens``), ``V`` vocabulary.
"""

from __future__ import annotations

import copy
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from course_lib import _validate
from course_lib.grpo import LOSS_AGG_MODES, grpo_loss
from course_lib.hf import data
from course_lib.policy_gradient import gather_log_probs


@dataclass
class HFGRPOConfig:
    """Hyperparameters of :func:`train`; the notebook's table maps each to TRL and verl."""

    steps: int = 20
    """Generation rounds; each samples a fresh batch and takes ``epochs_per_batch`` optimiser steps on it."""
    prompts_per_step: int = 4
    """B, prompts per batch."""
    group_size: int = 8
    """G, completions sampled per prompt."""
    epochs_per_batch: int = 2
    """Optimiser steps on each batch (PPO's epochs; the ratio moves away from 1 after the first)."""
    lr: float = 1e-3
    """AdamW's learning rate (1e-3 for the tiny model; about 1e-6 for a 0.5B model)."""
    clip_eps: float = 0.2
    """PPO's clip range."""
    clip_eps_high: float | None = None
    """Upper clip range (DAPO's clip-higher); None means clip_eps."""
    kl_coef: float = 0.04
    """Weight of the k3 KL penalty toward the frozen reference (DeepSeekMath's beta); 0 drops the reference."""
    normalize_std: bool = True
    """Divide group-centred rewards by the group std (GRPO) or not (Dr. GRPO)."""
    loss_agg: str = "seq-mean-token-mean"
    """How token losses are averaged (course_lib.grpo.aggregate_loss)."""
    max_new_tokens: int = 16
    """Completion budget; also Dr. GRPO's constant max_len."""
    temperature: float = 1.0
    """Sampling temperature; log-probs are taken at the same temperature."""
    top_p: float = 1.0
    """Nucleus sampling threshold (1.0 samples the whole distribution)."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this global norm."""
    reward_weights: dict = field(default_factory=lambda: dict(data.DEFAULT_REWARD_WEIGHTS))
    """{reward name: weight} over course_lib.hf.data.REWARDS."""
    save_every: int = 10
    """Save a checkpoint every this many steps (and after the last)."""
    seed: int = 0
    """Seeds prompt order, sampling and dropout."""

    def validate(self) -> "HFGRPOConfig":
        for name in ("steps", "prompts_per_step", "epochs_per_batch", "max_new_tokens", "save_every"):
            _validate.require_int(name, getattr(self, name), minimum=1)
        _validate.require_int("group_size", self.group_size, minimum=1)
        if self.group_size < 2:
            raise ValueError(f"group_size: expected at least 2 (a group of one has no baseline: its advantage "
                             f"is always 0), got {self.group_size}")
        for name in ("lr", "clip_eps", "temperature", "max_grad_norm"):
            _validate.require_positive(name, getattr(self, name))
        _validate.require_non_negative("kl_coef", self.kl_coef)
        if self.clip_eps_high is not None:
            _validate.require_positive("clip_eps_high", self.clip_eps_high)
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p: expected a probability in (0, 1], got {self.top_p}")
        _validate.require_choice("loss_agg", self.loss_agg, LOSS_AGG_MODES)
        data.check_reward_weights(self.reward_weights)
        return self


@dataclass
class HFGRPOHistory:
    """One entry per step; ``course_lib.plotting.plot_sorting_curves`` draws ``mean_reward``, ``kl``, ``clip_fraction``."""

    mean_reward: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    kl: list = field(default_factory=list)
    clip_fraction: list = field(default_factory=list)
    completion_length: list = field(default_factory=list)
    grad_norm: list = field(default_factory=list)
    seconds: list = field(default_factory=list)
    checkpoint: str | None = None
    interrupted: bool = False


# ---------------------------------------------------------------------------
# Loading, with the checks that must fail before any training starts
# ---------------------------------------------------------------------------


def load_model_and_tokenizer(model: str, device: str = "cpu"):
    """Load a causal LM and its tokenizer from a folder or a hub id (``Qwen/Qwen2.5-0.5B-Instruct``).

    The weights stay in float32: on a GPU the loop runs the forward passes under bf16 autocast
    (as TRL's ``bf16=True`` does), so AdamW updates float32 weights that tiny learning rates can move.

    Args:
        model: a folder written by ``save_pretrained`` or a hub id (needs network, or the hub cache).
        device: ``"cpu"`` or ``"cuda"``.

    Returns:
        ``(model, tokenizer)``, the tokenizer set to pad on the left.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if device not in ("cpu", "cuda"):
        raise ValueError(f"device: expected 'cpu' or 'cuda', got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: 'cuda' requested but torch sees no GPU")
    if not isinstance(model, str) or not model:
        raise ValueError(f"model: expected a folder or a hub id as a string, got {model!r}")
    looks_like_path = model.startswith((".", "/", "~")) or model.count("/") > 1 or Path(model).exists()
    if looks_like_path and not Path(model).expanduser().is_dir():
        raise ValueError(f"model: no such folder {model!r} (expected a folder written by save_pretrained, "
                         f"or a hub id such as 'Qwen/Qwen2.5-0.5B-Instruct')")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(Path(model).expanduser()) if looks_like_path else model)
        lm = AutoModelForCausalLM.from_pretrained(str(Path(model).expanduser()) if looks_like_path else model)
    except OSError as error:
        raise ValueError(f"model: could not load {model!r} ({error.__class__.__name__}: {str(error)[:200]}); "
                         f"offline, a hub id must already be in the cache") from None
    check_tokenizer(tokenizer)
    tokenizer.padding_side = "left"
    return lm.to(device), tokenizer


def check_tokenizer(tokenizer) -> None:
    """Raise ``ValueError`` naming ``tokenizer`` when it has no EOS or no PAD token.

    Without EOS a completion never ends (and the mask cannot find its end); without PAD the
    prompts of a batch cannot be padded to one length.
    """
    if getattr(tokenizer, "eos_token_id", None) is None:
        raise ValueError("tokenizer: it has no EOS token (eos_token is None); completions could never end. "
                         "Set tokenizer.eos_token to the model's end-of-text token")
    if getattr(tokenizer, "pad_token_id", None) is None:
        raise ValueError("tokenizer: it has no PAD token (pad_token is None); prompts of different lengths cannot "
                         "be batched. Set tokenizer.pad_token (often to tokenizer.eos_token)")


def context_length(model) -> int:
    """The longest sequence the model was built for (``max_position_embeddings``)."""
    return int(getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions"))


def check_prompt_lengths(prompts: list[str], tokenizer, model, max_new_tokens: int, name: str = "problems") -> None:
    """Raise ``ValueError`` naming ``name`` when a prompt plus ``max_new_tokens`` exceeds the model's context."""
    limit = context_length(model)
    lengths = [len(ids) for ids in tokenizer(prompts)["input_ids"]]
    for i, length in enumerate(lengths):
        if length + max_new_tokens > limit:
            raise ValueError(f"{name}: prompt {i} has {length} tokens; with max_new_tokens={max_new_tokens} that "
                             f"exceeds the model's context of {limit} tokens. Shorten it or lower max_new_tokens")


# ---------------------------------------------------------------------------
# Groups of completions, their masks and their log-probs
# ---------------------------------------------------------------------------


def completion_mask(completion_ids: torch.Tensor, eos_token_id: int) -> torch.Tensor:
    """1 for every completion token up to and including the first EOS, 0 after it.

    The EOS itself is kept: it is an action the policy took (stopping), and the reward of
    a completion depends on where it stopped. A completion with no EOS (cut off at
    ``max_new_tokens``) is all ones.

    Args:
        completion_ids: ``[N, T]`` generated token ids.
        eos_token_id: the tokenizer's EOS id.

    Returns:
        ``[N, T]`` long tensor of 0 and 1.
    """
    _validate.require_tensor("completion_ids", completion_ids, floating=False, min_dim=2)
    is_eos = completion_ids == eos_token_id  # (N, T)
    T = completion_ids.shape[-1]
    # Index of the first EOS, or T when there is none (argmax of an all-False row is 0, hence the where).
    first_eos = torch.where(is_eos.any(-1), is_eos.int().argmax(-1), torch.full_like(is_eos[:, 0], T, dtype=torch.long))
    positions = torch.arange(T, device=completion_ids.device)  # (T,)
    return (positions[None, :] <= first_eos[:, None]).long()  # (N, T)


def completion_log_probs(model, prompt_ids, prompt_mask, completion_ids, completion_mask,
                         temperature: float = 1.0) -> torch.Tensor:
    """Per-token log-probs of the completion under ``model``, at the sampling temperature.

    The logits at position ``j`` score the token at ``j + 1``, so the completion's ``T``
    tokens are scored by the ``T`` positions just before them: the last prompt token to
    the last-but-one completion token. Only those ``T + 1`` logits are computed.

    Args:
        prompt_ids, prompt_mask: ``[N, P]`` left-padded prompts.
        completion_ids, completion_mask: ``[N, T]`` completions and their masks.
        temperature: the logits are divided by it, as they were when sampling.

    Returns:
        ``[N, T]`` log pi(completion token | everything before it), float32.
    """
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)  # (N, P + T)
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)  # (N, P + T)
    T = completion_ids.shape[1]
    logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=T + 1).logits  # (N, T + 1, V)
    logits = logits[:, :-1, :].float() / temperature  # (N, T, V): shift, the last position predicts nothing here
    return gather_log_probs(logits, completion_ids)  # (N, T)


@torch.no_grad()
def generate_group(model, tokenizer, prompts: list[str], group_size: int, max_new_tokens: int,
                   temperature: float = 1.0, top_p: float = 1.0) -> dict:
    """Sample ``G`` completions for each of ``B`` prompts with ``model.generate``.

    Returns:
        A dict of ``[N, P]`` ``prompt_ids``, ``prompt_mask`` and ``[N, T]`` ``completion_ids``,
        ``completion_mask`` (``N = B * G``; the ``G`` completions of a prompt are adjacent rows,
        as ``generate`` repeats each prompt ``G`` times in place).
    """
    device = next(model.parameters()).device
    enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left").to(device)
    out = model.generate(
        **enc, do_sample=True, num_return_sequences=group_size, max_new_tokens=max_new_tokens,
        temperature=temperature, top_p=top_p, top_k=0,  # top_k=0: no top-k cut (generate's default is 50)
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # (N, P + T); rows finished early are padded with PAD after their EOS
    P = enc["input_ids"].shape[1]
    completion_ids = out[:, P:]  # (N, T)
    return {
        "prompt_ids": enc["input_ids"].repeat_interleave(group_size, dim=0),  # (N, P)
        "prompt_mask": enc["attention_mask"].repeat_interleave(group_size, dim=0),  # (N, P)
        "completion_ids": completion_ids,
        "completion_mask": completion_mask(completion_ids, tokenizer.eos_token_id),  # (N, T)
    }


# ---------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------


def train(model, tokenizer, problems, config: HFGRPOConfig | None = None, output_dir=None,
          progress: bool = True) -> HFGRPOHistory:
    """Train ``model`` with the course's GRPO on ``problems``; see the module docstring for one step.

    Args:
        model: a ``transformers`` causal LM (trained in place).
        tokenizer: its tokenizer, with EOS and PAD.
        problems: a list of ``(question, answer)`` pairs (``course_lib.hf.data.load_problems``).
        config: the hyperparameters (defaults: :class:`HFGRPOConfig`).
        output_dir: where checkpoints go (``checkpoint-<step>``, only the latest kept); None saves nothing.
        progress: show a tqdm bar.

    Returns:
        The history. Ctrl-C stops the run between steps and returns the history so far, with
        ``interrupted=True`` and ``checkpoint`` the last complete checkpoint (which is kept).
    """
    config = (config or HFGRPOConfig()).validate()
    check_tokenizer(tokenizer)
    if not isinstance(problems, (list, tuple)) or not problems:
        raise ValueError(f"problems: expected a non-empty list of (question, answer) pairs, got {type(problems).__name__}")
    prompts = [data.format_prompt(question, tokenizer) for question, _ in problems]
    answers = [str(answer) for _, answer in problems]
    check_prompt_lengths(prompts, tokenizer, model, config.max_new_tokens)

    device = next(model.parameters()).device
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")  # bf16 on GPU
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    # The frozen reference: a copy of the starting policy (DeepSeekMath's pi_ref).
    ref_model = copy.deepcopy(model).eval().requires_grad_(False) if config.kl_coef > 0 else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.0)
    B, G = config.prompts_per_step, config.group_size
    order: list[int] = []
    history = HFGRPOHistory()
    step = 0
    bar = tqdm(range(1, config.steps + 1), desc="GRPO (course loop)", disable=not progress)
    try:
        for step in bar:
            start = time.perf_counter()
            if len(order) < B:  # walk through the problems in a fresh shuffled order
                order += rng.sample(range(len(problems)), len(problems)) * max(1, -(-B // len(problems)))
            batch, order = order[:B], order[B:]

            # 1-3: sample, score, record the sampling and reference log-probs (no gradient).
            model.eval()
            with torch.no_grad(), autocast:
                groups = generate_group(model, tokenizer, [prompts[i] for i in batch], G, config.max_new_tokens,
                                        config.temperature, config.top_p)
                texts = tokenizer.batch_decode(groups["completion_ids"], skip_special_tokens=True)
                rewards = torch.tensor(data.score(texts, [answers[i] for i in batch for _ in range(G)],
                                                  config.reward_weights)).view(B, G)  # (B, G)
                inputs = (groups["prompt_ids"], groups["prompt_mask"], groups["completion_ids"],
                          groups["completion_mask"])
                logp_old = completion_log_probs(model, *inputs, config.temperature)  # (N, T)
                logp_ref = completion_log_probs(ref_model, *inputs, config.temperature) if ref_model else None
            mask = groups["completion_mask"]  # (N, T)
            T = mask.shape[1]

            # 4: several optimiser steps on this batch; the first has ratio exactly 1.
            model.train()
            for _ in range(config.epochs_per_batch):
                with autocast:
                    logp = completion_log_probs(model, *inputs, config.temperature)  # (N, T)
                loss, info = grpo_loss(
                    logp.view(B, G, T), logp_old.view(B, G, T),
                    logp_ref.view(B, G, T) if logp_ref is not None else None,
                    rewards.to(device), mask.view(B, G, T), clip_eps=config.clip_eps,
                    clip_eps_high=config.clip_eps_high, kl_coef=config.kl_coef,
                    kl_kind="k3", normalize_std=config.normalize_std, loss_agg=config.loss_agg,
                    max_len=config.max_new_tokens,
                )
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
                optimizer.step()

            # 5: log, and save.
            history.mean_reward.append(rewards.mean().item())
            history.loss.append(loss.item())
            history.kl.append(info["kl"])
            history.clip_fraction.append(info["clip_fraction"])
            history.completion_length.append(mask.sum(-1).float().mean().item())
            history.grad_norm.append(float(grad_norm))
            history.seconds.append(time.perf_counter() - start)
            bar.set_postfix(reward=f"{history.mean_reward[-1]:.2f}", kl=f"{info['kl']:.3f}")
            if output_dir is not None and (step % config.save_every == 0 or step == config.steps):
                history.checkpoint = str(save_checkpoint(model, tokenizer, output_dir, step, config))
    except KeyboardInterrupt:
        history.interrupted = True
        print(f"interrupted during step {step}; last complete checkpoint: {history.checkpoint}")
    finally:
        bar.close()
    return history


def save_checkpoint(model, tokenizer, output_dir, step: int, config: HFGRPOConfig | None = None) -> Path:
    """``save_pretrained`` the model and tokenizer into ``output_dir/checkpoint-<step>``, keeping only the latest.

    The folder is written under a temporary name and renamed when complete, so an
    interruption while saving never leaves a half-written checkpoint behind: the previous
    one stays until the new one is whole.
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    final = output_dir / f"checkpoint-{step}"
    partial = output_dir / f".checkpoint-{step}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    if config is not None:
        import json

        (partial / "course_grpo_config.json").write_text(json.dumps(asdict(config), indent=2))
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    for old in output_dir.glob("checkpoint-*"):  # keep only the newest complete one
        if old != final and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return final
