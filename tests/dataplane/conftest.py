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

import compileall
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

IN_VM = os.environ.get("MULTUS_DATAPLANE_IN_VM") == "1"
REPO = Path(__file__).resolve().parents[2]
KERNEL_VM = REPO / "testing_support" / "kernel_vm" / "run"
# The tier in one VM under TCG: 29 minutes here with every test on the real Multus chain
# (12 tests, 2 cores shared with other work); the bound leaves room for a slower machine.
VM_TIMEOUT_SECONDS = 3600
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
    timings: list[tuple[str, float]] = field(default_factory=list)


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
    from testing_support.multus_emulator import running_moto_server
    from tests.dataplane.box_for_vm import box_for_vm
    from tests.dataplane.fixtures import MOTO_PORT_VARIABLE

    timings: list[tuple[str, float]] = []
    started = time.monotonic()
    compile_for_the_vm()
    timings.append(("host: the VM's modules compiled", time.monotonic() - started))
    with tempfile.TemporaryDirectory(prefix="dataplane-vm-") as out, ExitStack() as box:
        started = time.monotonic()
        try:
            handoff = box.enter_context(box_for_vm(Path(out)))
        except BuildError as error:
            return VmRun({}, "", f"the cluster box for the real Multus chain: {error}")
        timings.append(("host: the cluster box built and started", time.monotonic() - started))
        started = time.monotonic()
        # EC2 (moto_server) for the emulator in the VM: the VM reaches it over its host link.
        moto_port = box.enter_context(running_moto_server())
        timings.append(("host: moto_server started", time.monotonic() - started))
        results = Path(out) / "outcomes.jsonl"
        vm_timings = Path(out) / "timings.jsonl"
        command = [
            str(KERNEL_VM), "--out", out, "--timeout", str(VM_TIMEOUT_SECONDS), "--host-link",
            "--", "env", "MULTUS_DATAPLANE_IN_VM=1", f"MULTUS_DATAPLANE_OUTCOMES={results}",
            f"MULTUS_DATAPLANE_BOX={handoff}", f"MULTUS_DATAPLANE_TIMINGS={vm_timings}",
            f"{MOTO_PORT_VARIABLE}={moto_port}",
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "--confcutdir", str(Path(__file__).parent), *node_ids,
        ]  # fmt: skip
        with _cpu_seconds_of_children() as qemu_cpu:
            done = subprocess.run(
                command,
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=VM_TIMEOUT_SECONDS + 60,
                check=False,
            )
        timings.append(("host: the VM's wall time (boot to power-off)", qemu_cpu.wall))
        timings.append(("host: the VM's CPU time (qemu's user + sys)", qemu_cpu.cpu))
        if vm_timings.exists():
            timings += [tuple(json.loads(line)) for line in vm_timings.read_text().splitlines()]
        output = done.stdout + done.stderr
        if done.returncode == VM_COULD_NOT_RUN and not results.exists():
            return VmRun({}, output, f"the kernel VM could not run: {output.strip()[-400:]}")
        outcomes: dict[str, dict[str, Any]] = {}
        if results.exists():
            for line in results.read_text().splitlines():
                record = json.loads(line)
                if record["outcome"] != "passed" or record["nodeid"] not in outcomes:
                    outcomes[record["nodeid"]] = record
        return VmRun(outcomes, output, timings=timings)


def compile_for_the_vm() -> None:
    """Writes the bytecode of the project's modules the VM imports into their __pycache__
    (which git ignores), where the VM's Python finds it through its read-only view of this file
    system: it writes none itself (kernel_vm/run sets PYTHONDONTWRITEBYTECODE), so without it
    every Python process in the VM (pytest, each pod IP agent, each multus-pod-ip call) would
    compile them from source again, at the emulated CPU's speed. The virtualenv's packages and
    the standard library come compiled already; modules compiled before and unchanged since are
    left as they are."""
    packages = [path for path in REPO.iterdir() if (path / "__init__.py").is_file()]
    for package in packages:
        if package.name != "tests":
            compileall.compile_dir(package, quiet=1)
    compileall.compile_dir(Path(__file__).parent, quiet=1)
    compileall.compile_file(REPO / "tests" / "__init__.py", quiet=1)


@dataclass
class _Usage:
    wall: float = 0.0
    cpu: float = 0.0


@contextmanager
def _cpu_seconds_of_children() -> Iterator[_Usage]:
    """The wall time of the block and the CPU time of the children it waited for (the VM's
    qemu, through run's bash and timeout): the figure other work on the machine disturbs least."""
    usage = _Usage()
    wall = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    yield usage
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    usage.wall = time.monotonic() - wall
    usage.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Where the tier's time went (docs/testing.md), when this process ran the VM (under xdist,
    only the worker that ran the tier does: run the tier with -n 0 to see it)."""
    session = getattr(terminalreporter, "_session", None)
    if session is None or _RUN not in session.stash or not session.stash[_RUN].timings:
        return
    terminalreporter.section("data-plane timings", sep="-")
    for label, seconds in session.stash[_RUN].timings:
        terminalreporter.line(f"{seconds:8.1f} s  {label}")


# Inside the VM ---------------------------------------------------------------------------


def _vm_timing(label: str, seconds: float) -> None:
    """Records a figure of the VM's run for the host's "data-plane timings"."""
    path = os.environ.get("MULTUS_DATAPLANE_TIMINGS")
    if IN_VM and path:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(json.dumps([f"VM: {label}", round(seconds, 1)]) + "\n")


def _vm_uptime() -> float:
    """Seconds since the VM's kernel started."""
    return float(Path("/proc/uptime").read_text().split()[0])


class _FixtureTimes:
    """Each session- and module-scoped fixture's set-up time. A plugin of its own: pytest asks
    the session's hooks, not this directory's, about session-scoped fixtures."""

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any]) -> Iterator[None]:
        started = time.monotonic()
        try:
            return (yield)
        finally:
            if fixturedef.scope != "function":
                _vm_timing(f"fixture {fixturedef.argname}", time.monotonic() - started)

    def pytest_fixture_post_finalizer(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        if fixturedef.scope != "function":
            _vm_timing(f"uptime when {fixturedef.argname} was torn down", _vm_uptime())


def pytest_configure(config: pytest.Config) -> None:
    if IN_VM:
        config.pluginmanager.register(_FixtureTimes())


def pytest_sessionfinish() -> None:
    _vm_timing("uptime at the end of the session", _vm_uptime() if IN_VM else 0.0)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(nextitem: pytest.Item | None) -> None:
    """Before the last test's teardown stops the session's daemons: the VM's CPU time so far,
    by program (a process's own time and that of the children it waited for)."""
    if not IN_VM or nextitem is not None:
        return
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]
    user, nice, system, idle, iowait, irq, softirq = (int(f) / _TICKS for f in fields)
    _vm_timing("CPU busy since boot (user, system, irq)", user + nice + system + irq + softirq)
    _vm_timing("CPU idle since boot", idle + iowait)
    for who, label in (
        (resource.RUSAGE_SELF, "its threads"),
        (resource.RUSAGE_CHILDREN, "its children"),
    ):
        usage = resource.getrusage(who)
        _vm_timing(f"CPU of pytest: {label}", usage.ru_utime + usage.ru_stime)
    by_program: dict[str, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            arguments = (stat.parent / "cmdline").read_bytes().split(b"\0")
            values = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        seconds = sum(int(v) for v in values[11:15]) / _TICKS  # utime stime cutime cstime
        program = _program(arguments)
        by_program[program] = by_program.get(program, 0.0) + seconds
    for program, seconds in sorted(by_program.items(), key=lambda item: -item[1])[:12]:
        _vm_timing(f"CPU of {program} (and its children)", seconds)


_TICKS = os.sysconf("SC_CLK_TCK")


def _program(arguments: list[bytes]) -> str:
    """A process's program: its executable's name, or a Python's module or script."""
    words = [a.decode(errors="replace") for a in arguments if a]
    if not words:
        return "kernel threads"
    name = Path(words[0]).name
    if name.startswith("python"):
        rest = [w for w in words[1:] if not w.startswith("-") or w in ("-m", "-c")]
        if rest[:1] == ["-m"] and len(rest) > 1:
            return f"python -m {rest[1]}"
        if rest[:1] == ["-c"]:
            return "python -c"
        return f"python {Path(rest[0]).name}" if rest else name
    return name


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Records each phase's outcome for the host (a failed setup or teardown counts)."""
    if report.duration >= 1:
        _vm_timing(f"{report.when} of {report.nodeid.rsplit('::', 1)[-1]}", report.duration)
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
    _vm_timing("uptime when pytest loaded this file", _vm_uptime())
    _FIXTURE_MODULES = time.monotonic()
    from tests.dataplane.fixtures import *  # noqa: F403  (the tier's fixtures)
    from tests.dataplane.real_multus import *  # noqa: F403  (the real Multus chain's)
    from tests.dataplane.router_segment import *  # noqa: F403  (the dual-stack node's)

    _vm_timing("imports of the fixture modules", time.monotonic() - _FIXTURE_MODULES)
