# One entry point for users, developers and CI. Every target bootstraps .venv itself,
# so `make demo` and `make test` work on a fresh machine.
PYTHON  ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
# Two installs into one venv: `make demo` needs ramplab and its runtime dependencies only
# (RUNTIME); tests, lint and types need the dev extras too (STAMP). The dev install covers the
# runtime one, so it marks both: `make test` then `make demo` installs once, `make demo` then
# `make test` adds only the extras.
RUNTIME := $(VENV)/.installed-runtime
STAMP   := $(VENV)/.installed
# Debian packages named after the command they provide, or COMMAND:PACKAGE (prometheus brings
# promtool too; chromium renders report.html in the browser check; ip (iproute2) builds the
# network namespaces of the multi-host test; dockerd, docker-compose and mmdebstrap build the
# image and bring the compose stack up in tests/ops/test_compose_up.py; tcpdump captures the
# loopback for the wire check, tests/bench/test_wire_check.py and bench/wire_accuracy.py).
SYSTEM_TOOLS ?= prometheus chromium ip:iproute2 dockerd:docker.io docker-compose mmdebstrap tcpdump

.PHONY: demo test e2e engines check lint typecheck bench system-deps clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# pip's own progress shows (no --quiet): the first `make demo` is the first thing a user runs.
$(RUNTIME): pyproject.toml | $(BIN)/python
	@if [ -f $(STAMP) ] && [ $(STAMP) -nt pyproject.toml ]; then touch $@; else \
	  echo "installing runtime dependencies (first run only, 1-2 min on a warm pip cache)..."; \
	  $(BIN)/python -m pip install -e . && touch $@; fi

$(STAMP): pyproject.toml | $(BIN)/python
	@echo "installing ramplab with its dev extras (first run only, a few minutes)..."
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP) $(RUNTIME)

# System tools the tests use; installed with apt-get only when root and missing.
system-deps:
	@RAMPLAB_SYSTEM_TOOLS="$(SYSTEM_TOOLS)" bash scripts/system-deps.sh

# The 1 -> 100 QPS ramp on the local stack (ramplab run campaigns/demo.yaml); DEMO_ARGS are
# passed on, e.g. make demo DEMO_ARGS="--workers 3".
demo: $(RUNTIME)
	$(BIN)/python -m ramplab.cli.demo $(DEMO_ARGS)

# The suite, in parallel (pytest-xdist, configured in pyproject.toml): every test but the
# end-to-end tiers, ~2 min here. PYTEST_ARGS are passed on, e.g. PYTEST_ARGS=tests/target.
test: $(STAMP) system-deps
	$(BIN)/python -m pytest -m "not slow and not timing and not engine" --durations=25 $(PYTEST_ARGS)

# The end-to-end tier, ~16 min here: whole runs of processes (marker slow: masters and workers
# killed and frozen, campaigns, experiments, the compose stack, the wheel, a fresh clone) on
# two xdist workers (each run is several processes: three at once starved them on two cores),
# then the tests that assert on measured time (marker timing) alone in one process, so that the
# parallel runs cannot starve them of CPU (exit 5, "no test selected", is fine when PYTEST_ARGS
# picked none).
e2e: $(STAMP) system-deps
	@# The truth test's GuideLLM venv (bench/peer_env.py; minutes on a cold pip cache) is built
	@# while the parallel phase runs; the test waits on its lock. Its log: .venv/peer-env.log.
	@$(BIN)/python -m bench.peer_env guidellm > $(VENV)/peer-env.log 2>&1 &
	@# Likewise the image of the compose test (tests/ops/test_compose_up.py; minutes when cold),
	@# as root only, where the test runs. Its log: .venv/image.log.
	@if [ "$$(id -u)" = 0 ]; then \
	  (bash scripts/docker-engine.sh && bash scripts/image.sh) > $(VENV)/image.log 2>&1 & fi
	$(BIN)/python -m pytest -m "slow and not timing and not engine" -n 2 --durations=25 $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(BIN)/python -m pytest -m "timing and not engine" -n 0 --durations=25 $(PYTEST_ARGS) || [ $$? -eq 5 ]

# The real-engine tier (tests/engine/, marker engine; docs/engines.md): vLLM's venv is built
# first (cached beside the peers' venvs: 1.5-7 min cold), one vLLM serves the tier (ready in
# 25-90 s here), stopped at the end. Serial: vLLM takes a core of its own.
engines: $(STAMP)
	$(BIN)/python -m bench.peer_env vllm
	$(BIN)/python -m pytest -m engine -n 0 --durations=10 tests/engine $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# What developers and CI run (.ci/run): format, lint, types, the suite, the end-to-end tier.
check: lint typecheck test e2e

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
