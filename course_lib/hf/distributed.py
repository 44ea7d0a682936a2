"""The TRL run under ``accelerate launch``, every process ending cleanly.

    accelerate launch --config_file course_lib/hf/configs/cpu_2proc.yaml -m course_lib.hf.distributed \\
        --model /tmp/tiny-qwen --steps 2 --group-size 4 --prompts-per-step 2 --device cpu

It runs ``course_lib.hf.trl_grpo`` (same flags) and then :func:`finish`. Why a teardown of its own: each
process of a data-parallel run holds a ``torch.distributed`` process group (gloo on a CPU, NCCL on GPUs) with
threads and sockets of its own. Left to the interpreter's exit, that group is destroyed in whatever order
Python frees things, possibly while another rank still sends its last message; one such exit aborted
rank 0 ("terminate called without an active exception", SIGABRT) after its steps and its checkpoint, and
the launcher reported the whole run as failed. The fix is the one PyTorch's DDP tutorial ends with: every
rank waits for the others at a barrier, then destroys its process group
(``accelerator.end_training()`` does that, after closing any tracker), before the interpreter exits.
The launcher (torchrun, under ``accelerate launch``) returns only once every rank has exited, and each
rank says so on its last line.
"""

from __future__ import annotations

import os


def finish(accelerator=None) -> None:
    """Wait for every rank, then destroy this process's process group; nothing when it has none.

    Args:
        accelerator: the run's ``accelerate.Accelerator`` (``trainer.accelerator``): its trackers are
            closed and its process group destroyed by ``end_training``. None: only the process group.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    rank, world = dist.get_rank(), dist.get_world_size()
    dist.barrier()  # no rank tears down while another is still in a collective (the last gradient all-reduce)
    if accelerator is not None:
        accelerator.end_training()
    if dist.is_initialized():
        dist.destroy_process_group()
    print(f"rank {rank} of {world}: process group destroyed (pid {os.getpid()})", flush=True)


def main(argv=None):
    from course_lib.hf import trl_grpo

    trainer = trl_grpo.main(argv)
    finish(trainer.accelerator)
    return trainer


if __name__ == "__main__":
    main()
