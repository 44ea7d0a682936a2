"""The TRL run under ``accelerate launch``, every process ending cleanly.

    accelerate launch --config_file course_lib/hf/configs/cpu_2proc.yaml -m course_lib.hf.distributed \\
        --model /tmp/tiny-qwen --iterations 2 --group-size 4 --prompts-per-step 2 --device cpu

It runs ``course_lib.hf.trl_grpo`` (same flags), then :func:`finish`, then leaves at once.

Why a teardown of its own. Each process of a data-parallel run holds a ``torch.distributed`` process group
(gloo on a CPU, NCCL on GPUs) with worker threads of its own, and the model's DDP wrapper (its ``Reducer``)
holds a reference to that group. ``destroy_process_group()`` only drops the registry's reference; the group
itself dies with the last owner, the DDP model, when the interpreter frees it at exit. Its destructor joins
gloo's worker thread *while holding the GIL*, and that thread may still be freeing the last collective's
tensors, which needs the GIL: a deadlock (seen under load with gdb: the main thread in
``~ProcessGroupGloo -> std::thread::join``, the ``pt_gloo_runloop`` thread in ``take_gil`` under
``~AsyncBarrierWork``), or, when the destructor runs during C++ static destruction, ``std::terminate``
on a joinable thread: rank 0 aborted ("terminate called without an active exception", SIGABRT) after its
steps and its checkpoint, and the launcher reported the run as failed.

So every rank, once training is over: waits for the others at a barrier (no rank leaves while another is
still in a collective), closes trackers and destroys its process group (``accelerator.end_training()``),
says so on its last line, flushes its output and exits with ``os._exit``: with the checkpoint on disk and
every peer past the barrier, nothing is left for Python's teardown to do but that fragile destruction.
The launcher (torchrun, under ``accelerate launch``) returns once every rank has exited.
"""

from __future__ import annotations

import os
import sys


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


def exit_now(code: int = 0) -> None:
    """Flush this process's output and exit without Python's teardown (no destructor, no atexit handler)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv=None):
    from course_lib.hf import trl_grpo

    trainer = trl_grpo.main(argv)  # an exception here exits non-zero as usual, and the launcher stops every rank
    distributed = trainer.accelerator.num_processes > 1
    finish(trainer.accelerator)
    if distributed:
        exit_now(0)
    return trainer


if __name__ == "__main__":
    main()
