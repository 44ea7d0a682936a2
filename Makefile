# The course's two commands: `make lab` opens it, `make test` checks all of it.
# Both create .venv with pip on first use; re-running installs nothing unless pyproject.toml changed.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.course-installed
KERNEL := course-grpo

.PHONY: lab test setup browser-deps exercises site clean-venv

# pip compiles each module it installs to bytecode, one file at a time (about 45 s for 15,000 files here); the setup
# installs with --no-compile, then compiles site-packages on every core, but for what no kernel imports: test folders
# and the model families of transformers that the course does not use (a third of the source: 44 s -> 31 s). Kernels
# that grade run as other users, who cannot write bytecode, so what they import must be compiled here. The course's
# own modules are compiled on first import, so a PYTHONDONTWRITEBYTECODE from the caller's environment (CI images
# often set it) is dropped: the suite's 150 kernels would each compile course_lib again.
COMPILE_SKIP := /tests?/|/transformers/models/(?!auto/|encoder_decoder/|gpt2/|qwen2/|__init__)
unexport PYTHONDONTWRITEBYTECODE

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e ".[dev]"
	@# (-q -q: no list of files; a few files are for other Pythons, and fail, as they do under pip: not an error)
	$(BIN)/python -m compileall -q -q -j 0 -x '$(COMPILE_SKIP)' \
	    "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" || true
	@# jsonschema imports rfc3987-syntax when it is there (jupyter-events asks for it) and builds an IRI grammar at
	@# import: 2 s in every process that imports nbformat (each nbval run, the grader, JupyterLab). Nothing here checks
	@# an IRI's syntax, and without it jsonschema skips that one format.
	$(BIN)/python -m pip uninstall --quiet --yes rfc3987-syntax lark 2>/dev/null || true
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

# Two pytest passes at once, both always run (conftest.py explains the split). The tests marked serial time
# something, so they run in the foreground at normal priority; the rest runs beside them on both cores with
# pytest-xdist at the lowest priority (.ci/lowest-priority), taking only the cycles the serial tests leave idle.
# Its report follows theirs, with its 15 slowest items (the list found a two-minute stall: nbclient missing a zmq
# wake-up, see course_lib/authoring/notebook_client.py). Coverage is measured in both and reported once, combined.
# solutions/ runs under nbval once, in the serial pass, through the grader (tests/test_grade.py grades each solution
# notebook as a submission and requires every cell to pass): not a second time here.
# Extra pytest options for both passes, e.g. `make test PYTEST_ARGS=--durations=40`.
PYTEST   := $(BIN)/python -m pytest $(PYTEST_ARGS)
PARALLEL := -n 2
REST_LOG := .pytest-rest.log

test:
	@# The two installs side by side: pip works one core, apt (on a machine without Chromium) mostly waits on the network.
	@$(MAKE) --no-print-directory -j 2 setup browser-deps
	$(BIN)/python -m course_lib.build --check
	@# The layout is the formatter's and the lint rules are pyproject.toml's [tool.ruff]: CI fails on either.
	$(BIN)/ruff format --check --quiet .
	$(BIN)/ruff check --quiet .
	@rm -f .coverage .coverage-serial .coverage-rest
	COVERAGE_FILE=.coverage-rest .ci/lowest-priority $(PYTEST) -m "not serial" $(PARALLEL) --cov-report= --durations=15 \
	    tests notebooks >$(REST_LOG) 2>&1 & rest_pid=$$!; \
	COVERAGE_FILE=.coverage-serial $(PYTEST) -m serial --cov-report= tests; serial=$$?; \
	echo "== the rest of the suite (started beside the serial tests, at the lowest priority; log: $(REST_LOG)) =="; \
	tail -n +1 -f --pid=$$rest_pid $(REST_LOG) 2>/dev/null || shown=no; wait $$rest_pid; rest=$$?; \
	if [ "$${shown:-}" = no ]; then cat $(REST_LOG); fi; \
	echo "== coverage of course_lib, both passes combined =="; \
	$(BIN)/python -m coverage combine --quiet .coverage-serial .coverage-rest && \
	    $(BIN)/python -m coverage report --skip-covered; \
	test $$serial -eq 0 && test $$rest -eq 0

exercises: $(STAMP)
	$(BIN)/python -m course_lib.build

# The course as a static website in _build/site/ (then open _build/site/index.html): a page per lecture and per
# exercise notebook from their stored outputs (never executed), built offline by Sphinx with myst-nb
# (docs/site/conf.py); MathJax is copied in, so no page loads anything from another host. Rebuilds only what changed.
site: $(STAMP)
	$(BIN)/python -m course_lib.authoring.site

clean-venv:
	rm -rf $(VENV)
