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
	@touch $(STAMP)

# Root is common on course machines and containers; Jupyter refuses it without --allow-root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	$(BIN)/jupyter lab $(ROOT_FLAG) --notebook-dir=. notebooks/00_welcome.ipynb

# Debian's Chromium for the browser tests (tests/browser/); a no-op when it is there.
browser-deps:
	@.ci/install-chromium

test: $(STAMP) browser-deps
	$(BIN)/python -m course_lib.build --check
	$(BIN)/python -m pytest tests notebooks solutions

exercises: $(STAMP)
	$(BIN)/python -m course_lib.build

clean-venv:
	rm -rf $(VENV)
