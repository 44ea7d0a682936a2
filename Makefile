# The course's two commands: `make lab` opens it, `make test` checks all of it.
# Both create .venv with pip on first use; re-running installs nothing unless pyproject.toml changed.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.course-installed
KERNEL := course-grpo

.PHONY: lab test setup browser-deps exercises clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python 3 (GRPO course)" >/dev/null
	@# JupyterLab gives each kernel CurveZMQ keys: no "Kernel is running over TCP without encryption" at every start.
	@mkdir -p $(VENV)/etc/jupyter/jupyter_server_config.d
	@echo '{"KernelManager": {"transport_encryption": "auto"}}' > $(VENV)/etc/jupyter/jupyter_server_config.d/course-grpo.json
	@touch $(STAMP)

# Root is common on course machines and containers; Jupyter refuses it without --allow-root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	$(BIN)/jupyter lab $(ROOT_FLAG) --notebook-dir=. notebooks/00_welcome.ipynb

# Debian's Chromium for the browser tests (tests/browser/); a no-op when it is there.
browser-deps:
	@.ci/install-chromium

# Two pytest passes, both always run (conftest.py explains the split): the tests marked serial alone,
# then the rest on the two cores with pytest-xdist; coverage is measured across both.
# Extra pytest options for both passes, e.g. `make test PYTEST_ARGS=--durations=40`.
PYTEST   := $(BIN)/python -m pytest $(PYTEST_ARGS)
PARALLEL := -n 2

test: $(STAMP) browser-deps
	$(BIN)/python -m course_lib.build --check
	$(PYTEST) -m serial --cov-report= tests; serial=$$?; \
	$(PYTEST) -m "not serial" $(PARALLEL) --cov-append tests notebooks solutions; rest=$$?; \
	test $$serial -eq 0 && test $$rest -eq 0

exercises: $(STAMP)
	$(BIN)/python -m course_lib.build

clean-venv:
	rm -rf $(VENV)
