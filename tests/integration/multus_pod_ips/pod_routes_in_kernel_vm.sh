#!/usr/bin/env bash
# Runs test_pod_routes.py in a Debian kernel that has ipvlan (testing_support/kernel_vm/run, QEMU),
# so the NAD's chain runs from ipvlan on, as on a node, instead of sbr on a veth stand-in.
# Manual (the data-plane tier, tests/dataplane, runs the chain from ipvlan in CI): the VM needs
# the Debian packages `make dataplane-tools` installs. Run from the repository.
set -euo pipefail
cd "$(dirname "$0")/../../.."
vm=${KERNEL_VM_RUN:-testing_support/kernel_vm/run}
[[ -x $vm ]] || { echo "no kernel-vm tool at $vm (set KERNEL_VM_RUN)" >&2; exit 125; }
KERNEL_VM_REQUIRE_IPVLAN=1 exec "$vm" --timeout 600 -- env KERNEL_VM_REQUIRE_IPVLAN=1 \
  .venv/bin/pytest -q -p no:cacheprovider tests/integration/multus_pod_ips/test_pod_routes.py
