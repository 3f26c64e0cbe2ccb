"""The data-plane tier: packet exchanges between Multus pods in a real Linux kernel.

The kernels of these machines have no ipvlan, so the tier runs inside Debian's kernel under
QEMU (testing_support/kernel_vm/run), in one VM for the whole tier. On the host, each collected
test of this directory becomes a `VmOutcome`: the first one boots the VM, which runs pytest on
the same test IDs (MULTUS_DATAPLANE_IN_VM=1, so this file then provides the real fixtures) and
records each outcome; every `VmOutcome` then reports its test's outcome and failure text.
Where the VM cannot run (its Debian packages missing: `make dataplane-tools`), the tests skip
with that reason, except under CI=true, where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

IN_VM = os.environ.get("MULTUS_DATAPLANE_IN_VM") == "1"
REPO = Path(__file__).resolve().parents[2]
KERNEL_VM = REPO / "testing_support" / "kernel_vm" / "run"
# The tier in one VM under TCG, 12 tests on the real Multus chain: 14 minutes here with two
# emulated CPUs on a quiet machine, 22 with one beside `make test`'s other worker, 29 beside
# other VMs (docs/testing.md); the bound leaves room for a slower machine.
VM_TIMEOUT_SECONDS = 3600
#: Emulated CPUs (KERNEL_VM_CPUS overrides): multi-threaded TCG runs the node daemons, the
#: emulator and pytest side by side.
VM_CPUS = "2"
#: Exit status of kernel-vm/run when the VM could not run the command (missing packages...).
VM_COULD_NOT_RUN = 125


def _unavailable(reason: str) -> None:
    """tests.helpers.unavailable_here, which this file cannot import: that module imports
    aws_cdk, whose jsii runtime would start in the VM too."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI must provide it (make dataplane-tools, run as root)")
    pytest.skip(reason)


# Host side -------------------------------------------------------------------------------


@dataclass
class VmRun:
    """The tier's single VM run: each test's outcome, or why the VM did not run them."""

    outcomes: dict[str, dict[str, Any]]
    output: str
    unavailable: str = ""


class VmOutcome(pytest.Item):
    """A test of this tier as seen from the host: it reports what the VM recorded for it."""

    def runtest(self) -> None:
        run = _vm_run(self.session)
        if run.unavailable:
            _unavailable(run.unavailable)
        outcome = run.outcomes.get(self.nodeid)
        if outcome is None:
            pytest.fail(f"the VM recorded no outcome for this test; its output:\n{run.output}")
        if outcome["outcome"] == "skipped":
            _unavailable(f"skipped in the VM: {outcome['text']}")
        if outcome["outcome"] != "passed":
            pytest.fail(f"failed in the VM:\n{outcome['text']}", pytrace=False)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.name} (in the kernel VM)"


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if IN_VM:
        return
    here = Path(__file__).parent
    for index, item in enumerate(items):
        if here in item.path.parents and isinstance(item, pytest.Function):
            assert item.parent is not None
            items[index] = VmOutcome.from_parent(item.parent, name=item.name)


_RUN = pytest.StashKey[VmRun]()


def _vm_run(session: pytest.Session) -> VmRun:
    """The VM's run of the session's tests: those still selected when the first one runs
    (pytest_collection_modifyitems above runs before -k and -m deselect, being a conftest's
    hook: pluggy calls the plugins registered last first)."""
    if _RUN not in session.stash:
        selected = [item.nodeid for item in session.items if isinstance(item, VmOutcome)]
        session.stash[_RUN] = _run_in_vm(selected)
    return session.stash[_RUN]


def _run_in_vm(node_ids: list[str]) -> VmRun:
    if os.geteuid() != 0:
        return VmRun({}, "", "the kernel VM's tests need root (network namespaces)")
    if not KERNEL_VM.exists():
        return VmRun({}, "", f"the kernel VM tool is missing at {KERNEL_VM} (../shared/tools)")
    for tool, package in (("nft", "nftables"), ("ping", "iputils-ping")):
        if shutil.which(tool) is None:
            return VmRun({}, "", f"{tool} is not installed (Debian package {package})")
    # Imported here: the VM imports this file too, and these start jsii (cdk8s) on import.
    from testing_support.cluster_box.build import BuildError
    from tests.dataplane.box_for_vm import box_for_vm

    with tempfile.TemporaryDirectory(prefix="dataplane-vm-") as out, ExitStack() as box:
        try:
            handoff = box.enter_context(box_for_vm(Path(out)))
        except BuildError as error:
            return VmRun({}, "", f"the cluster box for the real Multus chain: {error}")
        results = Path(out) / "outcomes.jsonl"
        command = [
            str(KERNEL_VM), "--out", out, "--timeout", str(VM_TIMEOUT_SECONDS), "--host-link",
            "--", "env", "MULTUS_DATAPLANE_IN_VM=1", f"MULTUS_DATAPLANE_OUTCOMES={results}",
            f"MULTUS_DATAPLANE_BOX={handoff}",
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "--confcutdir", str(Path(__file__).parent), *node_ids,
        ]  # fmt: skip
        done = subprocess.run(
            command,
            cwd=REPO,
            env={**os.environ, "KERNEL_VM_CPUS": os.environ.get("KERNEL_VM_CPUS", VM_CPUS)},
            capture_output=True,
            text=True,
            timeout=VM_TIMEOUT_SECONDS + 60,
            check=False,
        )
        output = done.stdout + done.stderr
        if done.returncode == VM_COULD_NOT_RUN and not results.exists():
            return VmRun({}, output, f"the kernel VM could not run: {output.strip()[-400:]}")
        outcomes: dict[str, dict[str, Any]] = {}
        if results.exists():
            for line in results.read_text().splitlines():
                record = json.loads(line)
                if record["outcome"] != "passed" or record["nodeid"] not in outcomes:
                    outcomes[record["nodeid"]] = record
        return VmRun(outcomes, output)


# Inside the VM ---------------------------------------------------------------------------


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Records each phase's outcome for the host (a failed setup or teardown counts)."""
    path = os.environ.get("MULTUS_DATAPLANE_OUTCOMES")
    if not IN_VM or not path or (report.when != "call" and report.passed):
        return
    text = report.longreprtext if report.failed else ""
    if report.skipped and isinstance(report.longrepr, tuple):
        text = str(report.longrepr[2])
    record = {"nodeid": report.nodeid, "outcome": report.outcome, "text": text}
    with open(path, "a", encoding="utf-8") as stream:
        stream.write(json.dumps(record) + "\n")


if IN_VM:
    from tests.dataplane.fixtures import *  # noqa: F403  (the tier's fixtures)
    from tests.dataplane.real_multus import *  # noqa: F403  (the real Multus chain's)
    from tests.dataplane.router_segment import *  # noqa: F403  (the dual-stack node's)
