"""The course's GRPO on any Hugging Face causal language model: the one LM RL loop, with text.

Shao et al. 2024, "DeepSeekMath", Algorithm 1. :func:`train` hands the model to
:func:`course_lib.lm_rl.train`, the loop chapter 08 trains the tiny transformer with (sampling with
``model.generate``, the completion mask, per-token log-probs, ``grpo_loss``'s pieces, clipped
epochs); what this module adds is what text needs:

1. prompts formatted (with the tokenizer's chat template when it has one) and padded on the left,
   so every completion starts at the same column;
2. a reward function that decodes each completion and scores it with the course's text rewards
   (``course_lib.hf.data``) against the problem's answer;
3. the checks that must fail before any training (model path, EOS and PAD, context length);
4. ``save_pretrained`` checkpoints every ``save_every`` rounds, written atomically, and a history
   the course's plots draw.

Shapes: ``B`` prompts per round, ``G`` completions per prompt, ``N = B * G`` rows,
``P`` padded prompt tokens, ``T`` completion tokens (at most ``max_new_tokens``), ``V`` vocabulary.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from course_lib import _validate, lm_rl
from course_lib.grpo import LOSS_AGG_MODES
from course_lib.hf import data


@dataclass
class HFGRPOConfig:
    """Hyperparameters of :func:`train`; the notebook's table maps each to TRL and verl."""

    iterations: int = 20
    """Rounds; each samples a fresh batch and takes ``update_epochs`` optimiser steps on it (as LMRLConfig)."""
    prompts_per_step: int = 4
    """B, prompts per batch."""
    group_size: int = 8
    """G, completions sampled per prompt."""
    update_epochs: int = 2
    """Passes over each batch, one optimiser step each (PPO's epochs; the ratio moves away from 1 after the first)."""
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
    """Save a checkpoint every this many rounds (and after the last)."""
    seed: int = 0
    """Seeds prompt order, sampling and dropout."""

    def validate(self) -> "HFGRPOConfig":
        for name in ("iterations", "prompts_per_step", "update_epochs", "max_new_tokens", "save_every"):
            _validate.require_int(name, getattr(self, name), minimum=1)
        _validate.require_int("group_size", self.group_size, minimum=1)
        if self.group_size < 2:
            raise ValueError(
                f"group_size: expected at least 2 (a group of one has no baseline: its advantage "
                f"is always 0), got {self.group_size}"
            )
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
    """One entry per round; ``course_lib.plotting.plot_sorting_curves`` draws ``mean_reward``, ``kl`` and
    ``clip_fraction``."""

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
        raise ValueError(
            f"model: no such folder {model!r} (expected a folder written by save_pretrained, "
            f"or a hub id such as 'Qwen/Qwen2.5-0.5B-Instruct')"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(Path(model).expanduser()) if looks_like_path else model)
        lm = AutoModelForCausalLM.from_pretrained(str(Path(model).expanduser()) if looks_like_path else model)
    except OSError as error:
        raise ValueError(
            f"model: could not load {model!r} ({error.__class__.__name__}: {str(error)[:200]}); "
            f"offline, a hub id must already be in the cache"
        ) from None
    check_tokenizer(tokenizer)
    tokenizer.padding_side = "left"
    return lm.to(device), tokenizer


def check_tokenizer(tokenizer) -> None:
    """Raise ``ValueError`` naming ``tokenizer`` when it has no EOS or no PAD token.

    Without EOS a completion never ends (and the mask cannot find its end); without PAD the
    prompts of a batch cannot be padded to one length.
    """
    if getattr(tokenizer, "eos_token_id", None) is None:
        raise ValueError(
            "tokenizer: it has no EOS token (eos_token is None); completions could never end. "
            "Set tokenizer.eos_token to the model's end-of-text token"
        )
    if getattr(tokenizer, "pad_token_id", None) is None:
        raise ValueError(
            "tokenizer: it has no PAD token (pad_token is None); prompts of different lengths cannot "
            "be batched. Set tokenizer.pad_token (often to tokenizer.eos_token)"
        )


def context_length(model) -> int:
    """The longest sequence the model was built for (``max_position_embeddings``)."""
    return int(getattr(model.config, "max_position_embeddings", None) or model.config.n_positions)


def check_prompt_lengths(prompts: list[str], tokenizer, model, max_new_tokens: int, name: str = "problems") -> None:
    """Raise ``ValueError`` naming ``name`` when a prompt plus ``max_new_tokens`` exceeds the model's context."""
    limit = context_length(model)
    lengths = [len(ids) for ids in tokenizer(prompts)["input_ids"]]
    for i, length in enumerate(lengths):
        if length + max_new_tokens > limit:
            raise ValueError(
                f"{name}: prompt {i} has {length} tokens; with max_new_tokens={max_new_tokens} that "
                f"exceeds the model's context of {limit} tokens. Shorten it or lower max_new_tokens"
            )


# ---------------------------------------------------------------------------
# The loop: course_lib.lm_rl's, with text prompts, text rewards and checkpoints
# ---------------------------------------------------------------------------


def lm_rl_config(config: HFGRPOConfig) -> lm_rl.LMRLConfig:
    """The one LM RL loop's config for these hyperparameters (a constant learning rate, as TRL's ``--lr``)."""
    return lm_rl.LMRLConfig(
        algo="grpo",
        iterations=config.iterations,
        prompts_per_step=config.prompts_per_step,
        group_size=config.group_size,
        max_new_tokens=config.max_new_tokens,
        temperature=config.temperature,
        top_p=config.top_p,
        update_epochs=config.update_epochs,
        lr=config.lr,
        lr_schedule="constant",
        clip_eps=config.clip_eps,
        clip_eps_high=config.clip_eps_high,
        kl_coef=config.kl_coef,
        normalize_std=config.normalize_std,
        loss_agg=config.loss_agg,
        max_grad_norm=config.max_grad_norm,
        seed=config.seed,
    )


def train(
    model, tokenizer, problems, config: HFGRPOConfig | None = None, output_dir=None, progress: bool = True
) -> HFGRPOHistory:
    """Train ``model`` with the course's GRPO on ``problems``, through :func:`course_lib.lm_rl.train`.

    Args:
        model: a ``transformers`` causal LM (trained in place).
        tokenizer: its tokenizer, with EOS and PAD.
        problems: a list of ``(question, answer)`` pairs (``course_lib.hf.data.load_problems``).
        config: the hyperparameters (defaults: :class:`HFGRPOConfig`).
        output_dir: where checkpoints go (``checkpoint-<step>``, only the latest kept); None saves nothing.
        progress: show a tqdm bar.

    Returns:
        The history. Ctrl-C stops the run between rounds and returns the history so far, with
        ``interrupted=True`` and ``checkpoint`` the last complete checkpoint (which is kept).
    """
    config = (config or HFGRPOConfig()).validate()
    check_tokenizer(tokenizer)
    if not isinstance(problems, (list, tuple)) or not problems:
        raise ValueError(
            f"problems: expected a non-empty list of (question, answer) pairs, got {type(problems).__name__}"
        )
    prompts = [data.format_prompt(question, tokenizer) for question, _ in problems]
    answers = [str(answer) for _, answer in problems]
    check_prompt_lengths(prompts, tokenizer, model, config.max_new_tokens)
    device = next(model.parameters()).device
    enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left").to(device)  # (M, P)
    G = config.group_size

    def reward_fn(pick, completion_ids):  # (B,), (B, G, L) -> (B, G): decode, then the course's text rewards
        texts = tokenizer.batch_decode(completion_ids.flatten(0, 1), skip_special_tokens=True)
        scores = data.score(texts, [answers[i] for i in pick.tolist() for _ in range(G)], config.reward_weights)
        return torch.tensor(scores).view(len(pick), G)

    history = HFGRPOHistory()

    def save(policy, step):
        history.checkpoint = str(save_checkpoint(policy, tokenizer, output_dir, step, config))

    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")  # bf16 on a GPU
    with autocast:
        out = lm_rl.train(
            model,
            reward_fn,
            enc["input_ids"],
            lm_rl_config(config),
            tokenizer.eos_token_id,
            tokenizer.pad_token_id,
            prompt_mask=enc["attention_mask"],
            progress=progress,
            suppress_pad=False,
            save_fn=save if output_dir is not None else None,
            save_every=config.save_every,
        )
    seconds = out.get("seconds", [])
    history.mean_reward, history.loss, history.kl = out.get("mean_reward", []), out.get("loss", []), out.get("kl", [])
    history.clip_fraction, history.grad_norm = out.get("clip_fraction", []), out.get("grad_norm", [])
    history.completion_length = out.get("mean_length", [])
    history.seconds = [b - a for a, b in zip([0.0] + seconds, seconds)]  # per round
    if out.get("interrupted"):
        history.interrupted = True
        print(f"interrupted after step {len(seconds)}; last complete checkpoint: {history.checkpoint}")
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
