"""The course's plots: plain functions that take numbers or tensors and return a Figure.

The convention every chapter follows when it adds a plot here:

- one function per picture, named ``plot_<what>``, with defaults that draw
  something meaningful when called with no arguments;
- it validates its arguments like the rest of ``course_lib`` (``ValueError``
  naming the argument);
- it creates its own figure with ``plt.subplots`` (never draws on the current
  one) and **returns** it; it never calls ``plt.show()``. A notebook cell that
  ends with ``fig = plot_...()`` shows it once; a widget in
  :mod:`course_lib.plotting.widgets` displays it and closes it;
- keyword arguments only for the knobs a slider may turn, so
  ``slider_plot(plot_fn, gamma=FloatSlider(...))`` can bind to them by name;
- small and quick: a widget redraws it on every slider step;
- for a plot behind a slider, an ``update_<what>(fig, **knobs)`` beside it moves a figure
  ``plot_<what>`` drew to new knob values in place and returns the artists it changed (or
  None when only a new figure will do); the widget then redraws only those
  (:mod:`course_lib.plotting.widgets`). A test checks that the moved figure has exactly the
  pixels of a new one.

One module per chapter (``policy_gradient``, ``baselines``, ``gae``, ``ppo``, ``grpo``,
``compare``, ``scaling``; ``base`` holds the shared size and chapter 00's plot); every plot is
importable from ``course_lib.plotting`` directly.
"""

from __future__ import annotations

from course_lib.plotting.base import (  # noqa: F401
    FIGSIZE,
    plot_discount_weights,
    update_discount_weights,
)
from course_lib.plotting.baselines import (  # noqa: F401
    plot_baseline_variance,
    plot_baseline_variances,
    plot_reward_curves_by_mode,
)
from course_lib.plotting.compare import (  # noqa: F401
    plot_budget_curves,
    plot_memory_breakdown,
    plot_sweep,
    update_sweep,
)
from course_lib.plotting.gae import (  # noqa: F401
    plot_bias_variance,
    plot_gae_on_chain,
    plot_nstep_weights,
    plot_token_gae,
    plot_truncation_errors,
    update_gae_on_chain,
)
from course_lib.plotting.grpo import (  # noqa: F401
    group_signal_curves,
    plot_ablation,
    plot_group_signal,
    plot_kl_estimators,
    plot_sorting_curves,
    plot_token_weights,
    token_gradient_weights,
)
from course_lib.plotting.policy_gradient import (  # noqa: F401
    plot_mc_gradient_error,
    plot_mc_gradient_estimate,
    plot_pg_reward_curves,
)
from course_lib.plotting.ppo import (  # noqa: F401
    plot_ppo_clip,
    plot_ppo_diagnostics,
    plot_ppo_runs,
    ppo_clip_curves,
    update_ppo_clip,
)
from course_lib.plotting.scaling import (  # noqa: F401
    plot_step_rewards,
    plot_three_runs,
    plot_trl_metrics,
)
