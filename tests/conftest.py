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
