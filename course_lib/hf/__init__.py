"""Chapter 09, scaling up: the course's GRPO on Hugging Face models, then the same run in TRL.

Read in this order:

- ``export``: chapter 08's TinyLM as a ``GPT2LMHeadModel`` and a character ``PreTrainedTokenizerFast`` (same logits);
- ``learning``: the capstone's GRPO three ways from one warm-up (the course's loop on TinyLM and on the export,
  TRL's ``GRPOTrainer`` on the export), the loop's config as a ``GRPOConfig``;
- ``tiny``: an offline tiny Qwen2 and its tokenizer, saved to a folder and loaded by path like a hub model;
- ``data``: the task's prompts and answers (generated arithmetic problems or a JSONL file) and the rewards;
- ``loop``: the course's GRPO loop on any ``transformers`` causal LM (``model.generate`` groups, EOS masks,
  shifted log-probs, ``course_lib.grpo.grpo_loss``, a frozen reference, checkpoints);
- ``__main__``: ``python -m course_lib.hf --model PATH_OR_HUB_ID --task arithmetic --iterations N ...``;
- ``trl_grpo``: the same task and rewards in TRL's ``GRPOTrainer``;
- ``distributed``: ``trl_grpo`` under ``accelerate launch``, every rank torn down cleanly;
- ``trl_contract``: the exercises' references (a TRL reward function, log-probs of ``generate``'s output, a
  course config as ``GRPOConfig`` keyword arguments);
- ``mapping``: course names -> TRL ``GRPOConfig`` fields -> verl keys, with TRL's installed defaults.

Nothing here imports ``transformers`` or ``trl`` until it is used, so ``import course_lib`` stays light.
"""
