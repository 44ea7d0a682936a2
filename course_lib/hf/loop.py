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
from course_lib.hf import data


def hf_rl_config(**changes) -> lm_rl.LMRLConfig:
    """The loop's GRPO for a Hugging Face model: small rounds (4 prompts x 8 completions, 2 passes, 20 rounds),
    16 new tokens, DeepSeekMath's KL weight 0.04, and a constant learning rate, as TRL's ``--lr`` (1e-3 suits the
    tiny model; about 1e-6 a 0.5B one). ``changes`` override any field."""
    hf = {"iterations": 20, "prompts_per_step": 4, "update_epochs": 2, "max_new_tokens": 16, "kl_coef": 0.04}
    return lm_rl.LMRLConfig.grpo(**{**hf, "lr": 1e-3, "lr_schedule": "constant", **changes})


@dataclass
class HFGRPOConfig:
    """Hyperparameters of :func:`train`: the loop's own (``rl``; the notebook's table maps each to TRL and verl), plus
    what text and checkpoints add."""

    rl: lm_rl.LMRLConfig = field(default_factory=hf_rl_config)
    """The one LM RL loop's hyperparameters (GRPO: the Hugging Face loop has no value model)."""
    reward_weights: dict = field(default_factory=lambda: dict(data.DEFAULT_REWARD_WEIGHTS))
    """{reward name: weight} over course_lib.hf.data.REWARDS."""
    save_every: int = 10
    """Save a checkpoint every this many rounds (and after the last)."""

    def validate(self) -> HFGRPOConfig:
        if not isinstance(self.rl, lm_rl.LMRLConfig):
            raise ValueError(f"rl: expected a course_lib.lm_rl_config.LMRLConfig, got {type(self.rl).__name__}")
        self.rl.validate()
        if self.rl.algo != "grpo":
            raise ValueError(f"rl.algo: the Hugging Face loop trains GRPO only (no value model), got {self.rl.algo!r}")
        _validate.require_int("save_every", self.save_every, minimum=1)
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
    check_prompt_lengths(prompts, tokenizer, model, config.rl.max_new_tokens)
    device = next(model.parameters()).device
    enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left").to(device)  # (M, P)
    G = config.rl.group_size

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
            config.rl,
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
