# The README's two commands: `make demo` and `make test`. Both do all set-up first.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo demo-quick test test-fast bench lint clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) -m agentic_rl.demo

demo-quick: setup
	$(PY) -m agentic_rl.demo --quick

test:
	@WITH_CHROMIUM=1 bash scripts/setup.sh
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

bench:
	@EXTRAS=dev,ray,bench bash scripts/setup.sh
	$(PY) benchmarks/run_all.py $(BENCH_ARGS)

lint: setup
	$(PY) -m ruff check src tests benchmarks

clean:
	rm -rf $(VENV) runs .pytest_cache
