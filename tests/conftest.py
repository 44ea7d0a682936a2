import sys
from pathlib import Path

import matplotlib
import pytest

# Lets tests import the mutant catalogue as `mutants.<module>`.
sys.path.insert(0, str(Path(__file__).resolve().parent))

matplotlib.use("Agg")  # no display in tests; plotting functions only build figures


@pytest.fixture
def no_figures_left_behind():
    """Fail a test whose code leaves matplotlib figures open (widgets must close what they draw)."""
    import matplotlib.pyplot as plt

    before = set(plt.get_fignums())
    yield
    leaked = set(plt.get_fignums()) - before
    plt.close("all")
    assert not leaked, f"figures left open: {sorted(leaked)}"


@pytest.fixture
def trusting():
    """A reference passed to its own check (or a wrong function built on course_lib's helpers): the check runs
    without the borrowed-code watch, which would rightly refuse it (course_lib.checks.watch.trusting)."""
    from course_lib.checks.watch import trusting as trust

    with trust():
        yield


@pytest.fixture(scope="module")
def one_thread():
    """Run a module's tests on one torch thread: the course's networks and tensors are tiny, and
    on a busy 2-core machine a second thread mostly waits (steps measured ~10x slower)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory):
    """Chapter 09's offline tiny Qwen2 and tokenizer, built once per session into a temporary folder."""
    import os

    os.environ["HF_HUB_OFFLINE"] = "1"  # never touch the network, even by accident
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from course_lib.hf.tiny import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny_qwen"))
