# Two commands do all the set-up on a fresh machine with Python 3.11+:
#   make demo   - the console on its embedded default: a simulated engine fleet
#   make test   - every test (provisions Docker and llama-server for the integration tests)
#   make check  - the fast tier: ruff, mypy and the tests that need no root, no service and under 1 s
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck check check-all bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -U pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/enginedeck demo

# PYTEST_ARGS: extra pytest arguments, e.g. make test PYTEST_ARGS='-k llama -x'
test: $(STAMP)
	./scripts/test.sh $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The tests that need a service carry its marker (pyproject.toml); CONTRIBUTING.md lists them.
# check leaves out the slow ones too (tests/slow_tests.txt); check-all runs them.
check: $(STAMP)
	./scripts/check.sh $(PYTEST_ARGS)

check-all: $(STAMP)
	./scripts/check.sh --all $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache dist build
