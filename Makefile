# Two commands set everything up on a fresh machine:
#   make up    - install, then run the demo pipeline (`logflume up`)
#   make test  - install, then lint and run the whole test suite
# Each installs the Debian packages it needs when missing (deploy/system-deps.sh: the
# `up` set for the demo, `test` for the suite and `make soak`, `bench` for `make bench`).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NODE_CLIENTS := tests/interop/node/node_modules/.installed
# Wheels of the agent's dependencies, so that tests/deploy/test_deb.py builds the .deb
# offline; the downloads happen here, in set-up.
WHEELHOUSE := $(VENV)/wheelhouse
WHEELHOUSE_STAMP := $(WHEELHOUSE)/.filled

.PHONY: up test lint fmt bench soak system-deps system-deps-up system-deps-test \
	system-deps-bench clean dist deb

# native/recordscheck is named beside the project: the broker and etl extras require it
# and no package index has it. native/nginxparse, the agent's C parser of nginx lines,
# is optional for an agent (install-agent.sh adds it where it builds); tests need it.
$(STAMP): pyproject.toml native/recordscheck/pyproject.toml native/recordscheck/logflume_recordscheck/*.c \
		native/nginxparse/pyproject.toml native/nginxparse/logflume_nginxparse/*.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all,dev,bench]' ./native/recordscheck ./native/nginxparse
	touch $@

# Every set; each target below installs only its own.
system-deps:
	bash deploy/system-deps.sh up test bench

system-deps-up:
	bash deploy/system-deps.sh up

system-deps-test:
	bash deploy/system-deps.sh test

system-deps-bench:
	bash deploy/system-deps.sh bench

# The Node.js Kafka clients the interoperability tests run (kafkajs, @platformatic/kafka).
$(NODE_CLIENTS): tests/interop/node/package.json tests/interop/node/package-lock.json
	cd tests/interop/node && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(WHEELHOUSE_STAMP): $(STAMP)
	$(BIN)/pip wheel -q --wheel-dir $(WHEELHOUSE) '.[agent]'
	rm -f $(WHEELHOUSE)/logflume-*.whl
	touch $@

up: $(STAMP) system-deps-up
	$(BIN)/logflume up

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: $(STAMP) system-deps-test $(NODE_CLIENTS) $(WHEELHOUSE_STAMP) lint
	$(BIN)/pytest -m "not soak" -n 2 --durations=60

soak: $(STAMP) system-deps-test $(WHEELHOUSE_STAMP)
	$(BIN)/pytest -m soak

bench: $(STAMP) system-deps-bench
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

# Wheels for hosts that should not build from a checkout: dist/logflume-<version>-py3-none-any.whl
# (install one with deploy/install-agent.sh --wheel, or pip install 'FILE[agent]') and, for
# broker hosts, dist/logflume_recordscheck-<version>-<python>-<arch>.whl (the broker extra's
# C records check: pip install 'LOGFLUME_WHEEL[broker]' RECORDSCHECK_WHEEL), and for web
# hosts of that architecture dist/logflume_nginxparse-<version>-<python>-<arch>.whl (the
# agent's optional C parser of nginx lines; install-agent.sh --wheel takes it from beside).
dist: $(STAMP)
	$(BIN)/python -m build --wheel --outdir dist .
	$(BIN)/python -m build --wheel --outdir dist native/recordscheck
	$(BIN)/python -m build --wheel --outdir dist native/nginxparse

# A Debian package of the agent, self-contained (deploy/deb/build-agent-deb.sh):
# dist/logflume-agent_<version>-1_<arch>.deb
deb: dist
	bash deploy/deb/build-agent-deb.sh --wheel "$$(ls -t dist/logflume-*.whl | head -1)" --out dist
