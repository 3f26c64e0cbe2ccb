# Two entry points do all setup on a fresh machine:
#   make synth   -> cdk synth of the default app into cdk.out (no AWS account needed)
#   make test    -> lint, type checks and the whole test suite
# With AWS credentials (docs/operations.md): make bootstrap ENV=aws://ACCOUNT/REGION, then
# make diff / deploy / destroy; CDK_ARGS selects the config, e.g. -c config_file=...
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# The CDK CLI and jsii run on the machine's Node.js; silence the end-of-life banner of Node 20
# (see docs/code-layout.md, "Requirements") and keep the CLI from probing for credentials it doesn't need.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export AWS_EC2_METADATA_DISABLED := true
export CDK_DISABLE_CLI_TELEMETRY := true
CDK := PATH="$(CURDIR)/$(BIN):$$PATH" npx --no-install cdk
# The stacks live in a Stage: '*/*' selects every stack of the (one) direct-deploy stage
# (`--all` selects only top-level stacks: none). For a pipeline config use STACKS=--all: the
# pipeline stack is the only top-level one, and it deploys the stages itself.
STACKS ?= '*/*'

.PHONY: synth test test-fast lint bench critical-path cni-plugins dataplane-tools clean bootstrap diff deploy destroy \
	diagram docs mutation lock hooks cluster-box node-box

# The stacks live in a Stage (or a pipeline's stages): without a selection the CLI finds no
# top-level stack and prints "Supply a stack id () ..."; '**' selects every stack at any depth,
# so synth validates them all and names them.
synth: $(VENV)/.installed node_modules/.installed
	$(CDK) synth --quiet --no-notices '**' $(CDK_ARGS)

# Installs what its tiers need first (as root: the pinned Debian packages of dataplane-tools; Go
# builds the cluster box on first use): on a fresh machine this one command runs everything.
# Two workers: while one waits on the data-plane tier's VM (one emulated CPU), the other runs the
# rest; each box runs whole on one worker, the two VM tiers one after the other on the same one
# (tests/conftest.py, TierScheduling).
test: lint dataplane-tools node_modules/.installed
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -n 2 $(PYTEST_ARGS)

# The inner loop (docs/testing.md, "The fast loop"): lint, types and the unit tests on two
# workers, without the tests that synthesize an app other than the default one (marker
# `examples`) or run real processes (`integration`); no VM, no box. `make test` runs everything.
test-fast: lint node_modules/.installed
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest tests/unit -m "not examples and not integration" \
	  -n 2 $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The network picture of a config (same -c values as synth): the default's to docs/, others to
# cdk.out/. `docs` redraws every committed picture (the default config's, docs/pictures/ one per
# example; tests compare them) and the generated pages.
DIAGRAM ?= $(if $(CDK_ARGS),cdk.out/architecture.svg,docs/architecture.svg)
diagram: $(VENV)/.installed
	$(BIN)/python -m docs_tools.diagram $(CDK_ARGS) --output $(DIAGRAM)

docs: $(VENV)/.installed
	$(BIN)/python -m docs_tools.diagram --all
	$(BIN)/python -m docs_tools.config_reference
	$(BIN)/python -m docs_tools.accepted_findings

bootstrap: $(VENV)/.installed node_modules/.installed
	$(CDK) bootstrap $(ENV) $(CDK_ARGS)

diff: $(VENV)/.installed node_modules/.installed
	$(CDK) diff $(STACKS) $(CDK_ARGS)

deploy: $(VENV)/.installed node_modules/.installed
	$(CDK) deploy $(STACKS) $(CDK_ARGS)

destroy: $(VENV)/.installed node_modules/.installed
	$(CDK) destroy $(STACKS) $(CDK_ARGS)

bench: $(VENV)/.installed cni-plugins
	$(BIN)/python benchmarks/node_bootstrap_bench.py
	$(BIN)/python benchmarks/multus_pod_ips_bench.py
	$(BIN)/python benchmarks/floating_handover_bench.py
	$(BIN)/python benchmarks/cni_delegates_bench.py
	$(BIN)/python benchmarks/fleet_scale_bench.py

# A real Kubernetes control plane on 127.0.0.1 (testing_support/cluster_box) with the app of
# CONFIG (a config file; the default app without one) applied and the real Karpenter beside it,
# reaching AWS through the EC2 emulator (testing_support/karpenter_box): builds them once per
# pinned version (Go, cached outside the clone), runs CMD with KUBECONFIG, the box's kubectl and
# the AWS_ENDPOINT_URL* settings of the emulator. CMD and CONFIG reach the box through the
# environment, unsplit and unquoted by make's shell. With THEN=<config b>: CONFIG's app deployed
# through aws-cdk's real kubectl handler, updated to THEN's the same way, then CMD (the deploy
# box, testing_support/deploy_box: no Karpenter, no emulator).
CMD ?= kubectl get --raw /readyz
CONFIG ?=
THEN ?=
cluster-box: export CLUSTER_BOX_CMD = $(value CMD)
cluster-box: export CLUSTER_BOX_CONFIG = $(value CONFIG)
cluster-box: export CLUSTER_BOX_THEN = $(value THEN)
cluster-box: $(VENV)/.installed
	$(BIN)/python -m testing_support.cluster_box

# A real node under QEMU (testing_support/node_box): builds its image once per set of inputs
# (as root, cached in ~/.cache/karpenter-multus/node-box), boots it, prints the boot time and
# runs NODE_CMD in it as root, e.g. make node-box NODE_CMD="networkctl list".
NODE_CMD ?=
node-box: export NODE_BOX_CMD = $(value NODE_CMD)
node-box: dataplane-tools $(VENV)/.installed
	$(BIN)/python -m testing_support.node_box

critical-path: $(VENV)/.installed
	$(BIN)/python benchmarks/cluster_critical_path.py

# Mutation testing (not part of CI: minutes per module). MODULES="config/model/vpc.py" for one.
MODULES ?= --all
mutation: $(VENV)/.installed
	$(BIN)/python -m testing_support.mutation $(MODULES)

# The real CNI plugins (host-local) that tests run the node_prefix CNI config with: the
# distribution's containernetworking-plugins (Debian and Ubuntu both put them in /usr/lib/cni),
# installed with apt-get as root unless already there. Each distribution has its own version,
# pinned per ID-VERSION_CODENAME of os-release: this machine's Debian 12 and the pipeline's build
# image (CodeBuild standard:8.0, Ubuntu 24.04). When apt no longer finds a pinned version (a
# security update replaced it), take the new one from packages.debian.org / packages.ubuntu.com.
# Only releases from 1.0.0 on: before, host-local's ADD loops forever once a range set of
# several ranges is used up (the node_prefix test does that), so Ubuntu 22.04 (0.9.1) has none.
OS_RELEASE ?= /etc/os-release
DISTRIBUTION = $(shell . $(OS_RELEASE) && echo "$$ID-$$VERSION_CODENAME")
CNI_PLUGINS_VERSION.debian-bookworm := 1.1.1+ds1-3+b5
CNI_PLUGINS_VERSION.ubuntu-noble := 1.1.1+ds1-3ubuntu0.24.04.3
CNI_PLUGINS_VERSION = $(CNI_PLUGINS_VERSION.$(DISTRIBUTION))
CNI_PLUGINS_UNPINNED = no containernetworking-plugins version is pinned for $(DISTRIBUTION): \
	add CNI_PLUGINS_VERSION.$(DISTRIBUTION) to the Makefile
CNI_PLUGIN_DIR := /usr/lib/cni
NOT_ROOT = echo "$@: not root, so the pinned Debian packages were not installed; run \
	  'sudo make $@' (tests that need them skip and say so; under CI=true they fail)" >&2
cni-plugins:
	@test -x $(CNI_PLUGIN_DIR)/host-local || { \
	  test -n "$(CNI_PLUGINS_VERSION)" || { echo "cni-plugins: $(CNI_PLUGINS_UNPINNED)" >&2; exit 1; }; \
	  test "$$(id -u)" = 0 || { $(NOT_ROOT); exit 0; }; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	  --no-install-recommends containernetworking-plugins=$(CNI_PLUGINS_VERSION); }

# Host tools of the data-plane tests, from Debian bookworm as root unless already there at these
# versions: nft and ping for the VPC fabric tests (tests/*/testing_support/test_vpc_fabric*.py),
# and QEMU, Debian's kernel and a static busybox for testing_support/kernel_vm/run, in which
# tests/dataplane runs (with iproute2, nft, ping and the CNI plugins). `make test` installs them
# first; under CI=true those tests fail without them, elsewhere they skip and say which package
# is missing.
# Pinned for this machine's Debian 12 only: elsewhere (the pipeline's Ubuntu build image) the
# tiers that need them skip and say so.
DATAPLANE_TOOLS.debian-bookworm := nftables=1.0.6-2+deb12u2 iputils-ping=3:20221126-1+deb12u1 \
	iproute2=6.1.0-3 qemu-system-x86=1:7.2+dfsg-7+deb12u18+b3 linux-image-amd64=6.1.192-3 \
	busybox-static=1:1.35.0-4+deb12u1+b1
# The node box's (testing_support/node_box, tests/node_box): debootstrap builds its image (the
# version testing_support/node_box/packages.py pins too; a unit test holds the two together),
# mkfs.ext4 writes it into a disk image, qemu-img makes each boot's overlay and genisoimage
# cloud-init's seed disk; QEMU and the kernel are the ones above.
NODE_BOX_TOOLS.debian-bookworm := debootstrap=1.0.128+nmu2+deb12u2 e2fsprogs=1.47.0-2 \
	qemu-utils=1:7.2+dfsg-7+deb12u18+b3 genisoimage=9:1.1.11-3.4
DATAPLANE_TOOLS = $(DATAPLANE_TOOLS.$(DISTRIBUTION)) $(NODE_BOX_TOOLS.$(DISTRIBUTION))
dataplane-tools: cni-plugins
ifeq ($(strip $(DATAPLANE_TOOLS)),)
	@echo "dataplane-tools: no versions pinned for $(DISTRIBUTION); the tests that need them skip" >&2
else
	@missing=; for pinned in $(DATAPLANE_TOOLS); do \
	  dpkg-query -W -f '$${Package}=$${Version}\n' "$${pinned%%=*}" 2>/dev/null | \
	    grep -qxF "$$pinned" || missing="$$missing $$pinned"; done; \
	test -z "$$missing" || test "$$(id -u)" = 0 || { $(NOT_ROOT); exit 0; }; \
	test -z "$$missing" || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; }
endif

# The virtualenv holds exactly the lock: every direct and indirect dependency, pinned, each
# download checked against its hashes.
$(VENV)/.installed: requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes -r requirements.lock
	touch $@

# Regenerates the lock from requirements*.txt (the direct dependencies) after editing them;
# tests/unit/test_dependency_lock.py fails while the lock is stale.
lock: $(VENV)/.installed
	$(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	  --no-emit-index-url --no-emit-find-links --output-file requirements.lock requirements-dev.txt

# Runs ruff, ruff format and mypy from the virtualenv before each commit (.pre-commit-config.yaml).
hooks: $(VENV)/.installed
	$(BIN)/pre-commit install

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache
