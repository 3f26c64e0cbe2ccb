# Two entry points do all setup on a fresh machine:
#   make synth   -> cdk synth of the default app into cdk.out (no AWS account needed)
#   make test    -> lint, type checks and the whole test suite
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# The CDK CLI and jsii run on the machine's Node.js; silence the end-of-life banner of Node 20
# (see README, "Requirements") and keep the CLI from probing for credentials it doesn't need.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export AWS_EC2_METADATA_DISABLED := true
export CDK_DISABLE_CLI_TELEMETRY := true
CDK := PATH="$(CURDIR)/$(BIN):$$PATH" npx --no-install cdk

.PHONY: synth test lint bench critical-path clean

synth: $(VENV)/.installed node_modules/.installed
	$(CDK) synth --quiet --no-notices $(CDK_ARGS)

test: lint
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/node_bootstrap_bench.py
	$(BIN)/python benchmarks/multus_pod_ips_bench.py

critical-path: $(VENV)/.installed
	$(BIN)/python benchmarks/cluster_critical_path.py

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache
