"""Chapter 09: the TRL script runs under ``accelerate launch``, two CPU processes, data parallel, for two steps.

It is launched through ``course_lib.hf.distributed``, which ends every rank cleanly (a barrier, the process group
destroyed, then an exit that skips the interpreter's destruction of the DDP model's gloo group): without it, rank 0
once aborted at exit ("terminate called without an active exception") after its steps and its checkpoint, and once
hung there. The test holds every rank to its teardown line, the launcher to a clean exit, and on a timeout stops
the launcher with every rank (no orphan left behind).
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

CONFIGS = Path(__file__).resolve().parent.parent / "course_lib" / "hf" / "configs"


def test_configs_are_valid_yaml_with_the_documented_backends():
    kinds = {path.stem: yaml.safe_load(path.read_text())["distributed_type"] for path in CONFIGS.glob("*.yaml")}
    assert kinds == {
        "cpu_2proc": "MULTI_GPU",  # torchrun launcher; gloo on a CPU-only machine (see the file)
        "ddp": "MULTI_GPU",
        "zero2": "DEEPSPEED",
        "zero3": "DEEPSPEED",
        "fsdp": "FSDP",
    }


def _run_every_rank(command, env, timeout):
    """Run the launcher in a session of its own; on a timeout, stop it with every rank it started (no orphan)."""
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as launcher:
        try:
            stdout, stderr = launcher.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)  # the launcher and the ranks: one process group
            stdout, stderr = launcher.communicate()
            pytest.fail(f"no exit within {timeout} s (a rank hung?):\n{stdout[-3000:]}\n{stderr[-3000:]}")
    return subprocess.CompletedProcess(command, launcher.returncode, stdout, stderr)


@pytest.mark.slow
def test_trl_script_under_accelerate_launch_two_cpu_processes(tiny_qwen, tmp_path):
    from safetensors.torch import load_file

    accelerate = Path(sys.executable).parent / "accelerate"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [
        str(accelerate),
        "launch",
        "--config_file",
        str(CONFIGS / "cpu_2proc.yaml"),
        "-m",
        "course_lib.hf.distributed",
        "--model",
        str(tiny_qwen),
        "--iterations",
        "2",
        "--group-size",
        "4",
        "--prompts-per-step",
        "2",
        "--max-new-tokens",
        "6",
        "--update-epochs",
        "1",
        "--save-every",
        "2",
        "--output-dir",
        str(tmp_path),
        "--no-progress",
        "--rewards",
        '{"length": 1.0}',
    ]
    run = _run_every_rank(command, env, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "TRL: 2 optimiser steps on 2 process(es) (DistributedType.MULTI_CPU)" in run.stdout
    for rank in (0, 1):  # the launcher returned after every rank tore its process group down
        assert f"rank {rank} of 2: process group destroyed" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    assert "terminate called" not in run.stderr and "SIGABRT" not in run.stderr, run.stderr[-3000:]
    before, after = (
        load_file(tiny_qwen / "model.safetensors"),
        load_file(tmp_path / "checkpoint-2" / "model.safetensors"),
    )
    assert any(not (before[name] == after[name]).all() for name in before)
