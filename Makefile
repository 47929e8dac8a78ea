# `make test` and `make demo` do all set-up on a fresh machine: venv, packages, Postgres logical
# decoding. Override the interpreter with PYTHON=..., the venv location with VENV=...
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Much of the integration suite waits (outages, downtimes, timeouts); two processes overlap
# those waits. Each process has its own broker; a test file stays in one process.
TEST_PROCESSES ?= 2

# The modules setup.py compiles (pyproject.toml, [tool.toast-hydrator]): an editable install
# imports the compiled ones in their place, so a change to one installs again (compiles it).
# Until then the package imports the sources of all of them, and says so (hydrator/__init__.py).
COMPILED := $(shell $(PYTHON) -c 'import tomllib; \
	print(*tomllib.load(open("pyproject.toml", "rb"))["tool"]["toast-hydrator"]["compiled"])' \
	2>/dev/null)

.PHONY: setup test test-unit test-pure demo bench lint

setup: $(VENV)/.installed
	@bash tests/harness/enable-logical-decoding.sh

# Dated when the install began: a source edited while it ran is newer, and installs again.
$(VENV)/.installed: pyproject.toml setup.py $(COMPILED)
	$(PYTHON) -m venv $(VENV)
	touch $(VENV)/.installing
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test]"
	@# --quiet hides the build's one line when mypyc failed (a type error anywhere in the
	@# package does that): say which core the install left, and where the reason is shown.
	@$(BIN)/python -c 'import hydrator; build = hydrator.core_build(); \
		why = "" if build == "compiled" else " (pip install -v -e . shows why; make lint names a type error)"; \
		print(f"toast-hydrator: core {build}{why}")'
	mv $(VENV)/.installing $@

test: setup
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadfile

# The unit suite: pure logic, no broker, Postgres or Java (a few tests start the CLI or a local
# socket); in two processes, as test-pure runs it.
test-unit: $(VENV)/.installed
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) tests/unit

# The unit suite on the interpreted modules (what an install without a C compiler runs).
test-pure: $(VENV)/.installed
	HYDRATOR_COMPILED=0 $(BIN)/python -m pytest -n $(TEST_PROCESSES) tests/unit

demo: setup
	$(BIN)/hydrator demo

lint: $(VENV)/.installed
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
	$(BIN)/mypy
