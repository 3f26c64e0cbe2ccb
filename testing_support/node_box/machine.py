"""The runner: boots a node box image under QEMU and gives a test the node's hands.

One `NodeBox` is one machine: q35, TCG (nested KVM is not reliable on these machines), the
host kernel and the image's initramfs with the image as /dev/vda through a qcow2 overlay of
its own (each boot starts from the pristine image; a reboot keeps what the last boot wrote),
the NoCloud seed as /dev/vdb, a primary virtio NIC on a restricted user-mode network (DHCP from
QEMU, nothing beyond), the guest agent's virtio-serial port, the serial console written to
console.log, a QMP socket, and spare PCIe root ports for NICs hot-plugged later.

    with NodeBox(image, workdir, user_data=..., instance_id="i-...") as box:
        box.wait_until_booted()
        box.sh("ip -j link")
        nic = box.plug_nic("02:00:00:00:01:01")
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from testing_support.node_box.errors import Unavailable
from testing_support.node_box.guest_agent import GuestAgent, GuestAgentError, GuestResult
from testing_support.node_box.image import NodeImage
from testing_support.node_box.qmp import Qmp
from testing_support.node_box.seed import write_seed

#: The primary NIC's network: TEST-NET-3, as testing_support/kernel_vm/run's host link,
#: because QEMU's default 10.0.2.0/24 lies in the data-plane tier's VPC (10.0.0.0/16).
PRIMARY_NET = "203.0.113.0/24"
PRIMARY_MAC = "02:00:00:00:00:01"
#: QEMU's CPU time to boot, measured here with one vCPU (README.md): "max" 65-73 s, "max"
#: without 5-level paging 50-59 s, qemu64 47-56 s, Nehalem 63-71 s. With la57 Debian's kernel
#: uses five page-table levels; our reading: TCG's software TLB walks each level at every miss.
#: One vCPU: the machine's two cores are shared with the other VMs that run here, and boots
#: with two were slower (testing_support/kernel_vm/run found the same).
CPU_MODEL = "max,la57=off"
#: Under TCG with the other core busy a boot took about a minute here (README.md).
BOOT_TIMEOUT = 300.0


class GuestCommandFailed(AssertionError):
    """A command the test expected to succeed in the guest did not."""


@dataclass
class Nic:
    """A hot-plugged NIC: its QEMU device and backend ids, the root port it sits on, its MAC."""

    device_id: str
    netdev_id: str
    port: str
    mac: str


@dataclass
class BootRecord:
    """How long each boot of this box took, from power-on (or reboot) until systemd's start
    job queue was empty, and what `systemctl is-system-running` said then."""

    seconds: list[float] = field(default_factory=list)
    states: list[str] = field(default_factory=list)


class NodeBox:
    """A running (or about to run) node box; a context manager that always ends QEMU."""

    def __init__(
        self,
        image: NodeImage,
        workdir: Path,
        *,
        user_data: str,
        instance_id: str,
        hostname: str = "node-box",
        cpus: int = 1,
        cpu_model: str = CPU_MODEL,
        memory_mib: int = 1024,
        hotplug_ports: int = 4,
        kernel_arguments: str = "",
        primary_net: str = PRIMARY_NET,
        guest_forwards: Sequence[str] = (),
    ) -> None:
        """primary_net: the primary NIC's user-mode network; guest_forwards: its `guestfwd`
        rules (QEMU's syntax, e.g. `tcp:ADDRESS:PORT-cmd:COMMAND`: each connection the guest
        opens to ADDRESS:PORT runs COMMAND on the host with the connection as its stdin and
        stdout). libslirp takes a rule only for an address inside primary_net."""
        self.image = image
        self.workdir = workdir
        self.console_log = workdir / "console.log"
        self.boots = BootRecord()
        self._ports = [f"hotplug{index}" for index in range(hotplug_ports)]
        self._plugged: dict[str, Nic] = {}
        self._serial = 0
        self._plug_lock = threading.Lock()  # plug_nic and unplug_nic may run in a thread
        self._primary_net = primary_net
        self._guest_forwards = tuple(guest_forwards)
        self._process: subprocess.Popen[bytes] | None = None
        self._qmp: Qmp | None = None
        self._agent: GuestAgent | None = None
        self._started = 0.0
        self._cpus, self._cpu_model, self._memory = cpus, cpu_model, memory_mib
        self._kernel_arguments = kernel_arguments
        self._seed = dict(instance_id=instance_id, hostname=hostname, user_data=user_data)

    # Life cycle ----------------------------------------------------------------------------

    def __enter__(self) -> NodeBox:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        for tool, package in (
            ("qemu-system-x86_64", "qemu-system-x86"),
            ("qemu-img", "qemu-utils"),
        ):
            if shutil.which(tool) is None:
                raise Unavailable(f"{tool} is not installed (Debian package {package})")
        self.workdir.mkdir(parents=True, exist_ok=True)
        overlay = self.workdir / "root.qcow2"
        base = str(self.image.disk)
        subprocess.run(
            ["qemu-img", "create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", str(overlay)],
            check=True,
            capture_output=True,
        )
        seed = write_seed(self.workdir / "seed", **self._seed)
        command = self._command(overlay, seed)
        (self.workdir / "qemu-command").write_text(" ".join(command) + "\n")
        self._started = time.monotonic()
        with (self.workdir / "qemu.log").open("wb") as qemu_log:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=qemu_log, stderr=subprocess.STDOUT
            )
        self._qmp = Qmp(self.workdir / "qmp.sock")
        self._agent = GuestAgent(self.workdir / "agent.sock")

    def _command(self, overlay: Path, seed: Path) -> list[str]:
        ports: list[str] = []
        for chassis, port in enumerate(self._ports, start=1):
            ports += ["-device", f"pcie-root-port,id={port},chassis={chassis},bus=pcie.0"]
        return [
            "qemu-system-x86_64", "-accel", "tcg", "-machine", "q35", "-cpu", self._cpu_model,
            "-smp", str(self._cpus), "-m", str(self._memory),
            "-nodefaults", "-no-user-config", "-display", "none",
            "-kernel", str(self.image.kernel), "-initrd", str(self.image.initrd),
            "-append", f"root=/dev/vda rw console=ttyS0 {self._kernel_arguments}".strip(),
            "-chardev", f"file,id=console,path={self.console_log}", "-serial", "chardev:console",
            "-qmp", f"unix:{self.workdir / 'qmp.sock'},server=on,wait=off",
            "-drive", f"file={overlay},format=qcow2,if=none,id=root",
            "-device", "virtio-blk-pci,drive=root",
            "-drive", f"file={seed},format=raw,if=none,id=seed,readonly=on",
            "-device", "virtio-blk-pci,drive=seed",
            "-netdev", ",".join(
                [f"user,id=primary,restrict=on,net={self._primary_net}"]
                + [f"guestfwd={rule}" for rule in self._guest_forwards]
            ),
            "-device", f"virtio-net-pci,netdev=primary,mac={PRIMARY_MAC}",
            "-device", "virtio-serial-pci",
            "-chardev", f"socket,id=agent,path={self.workdir / 'agent.sock'},server=on,wait=off",
            "-device", "virtserialport,chardev=agent,name=org.qemu.guest_agent.0",
            # entropy at once: Python's start in cloud-init must not wait for the CRNG
            "-device", "virtio-rng-pci",
            *ports,
        ]  # fmt: skip

    def stop(self, timeout: float = 60.0) -> None:
        """Powers the guest off cleanly if it answers, else quits QEMU, else kills it."""
        process = self._process
        if process is None or process.poll() is not None:
            self._close()
            return
        try:
            assert self._agent is not None
            self._agent.send_only("guest-shutdown", {"mode": "powerdown"})
            process.wait(timeout=timeout)
        except (GuestAgentError, OSError, subprocess.TimeoutExpired, AssertionError):
            try:
                if self._qmp is not None:
                    self._qmp.execute("quit", timeout=5)
                process.wait(timeout=10)
            except Exception:  # whatever QEMU's state, the kill below ends it
                process.kill()
                process.wait(timeout=10)
        self._close()

    def kill(self) -> None:
        """Pulls the plug: QEMU is killed, nothing in the guest runs on or flushes anything (an
        instance stopped by EC2 mid-boot). Safe from another thread."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)

    def _close(self) -> None:
        for channel in (self._agent, self._qmp):
            if channel is not None:
                channel.close()
        self._agent = self._qmp = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def console(self) -> str:
        return self.console_log.read_text(errors="replace") if self.console_log.exists() else ""

    # Boot and reboot -----------------------------------------------------------------------

    def wait_until_booted(self, timeout: float = BOOT_TIMEOUT) -> float:
        """Waits for the guest agent, then for systemd to finish starting up (its job queue
        empty: multi-user.target and cloud-init's final stage included). Returns the seconds
        since power-on (or since the reboot was asked for) and records them in `boots`."""
        deadline = time.monotonic() + timeout
        try:
            self.agent.sync(timeout=timeout)
            state = self.run(
                ["systemctl", "is-system-running", "--wait"],
                timeout=max(1.0, deadline - time.monotonic()),
            ).stdout.strip()
        except GuestAgentError as error:
            raise GuestAgentError(f"{error}; console tail:\n{self.console()[-4000:]}") from None
        seconds = time.monotonic() - self._started
        self.boots.seconds.append(seconds)
        self.boots.states.append(state)
        return seconds

    def boot_id(self) -> str:
        return self.sh("cat /proc/sys/kernel/random/boot_id").strip()

    def reboot(self, timeout: float = BOOT_TIMEOUT) -> float:
        """A clean reboot asked of the guest (systemd stops its units, as `reboot` on a node).
        The machine stays the same QEMU process: disks and plugged NICs stay."""
        before = self.boot_id()
        self._started = time.monotonic()
        self.agent.send_only("guest-shutdown", {"mode": "reboot"})
        deadline = self._started + timeout
        while True:  # the old agent may still answer for a moment
            self.agent.sync(timeout=max(1.0, deadline - time.monotonic()))
            try:
                if self.boot_id() != before:
                    break
            except (GuestAgentError, GuestCommandFailed):
                pass  # the old boot went away while the command ran
            if time.monotonic() > deadline:
                raise GuestAgentError(f"no new boot within {timeout:.0f} s")
            time.sleep(1)
        return self.wait_until_booted(timeout=max(1.0, deadline - time.monotonic()))

    def reset(self) -> None:
        """A hard reset (QMP system_reset): no unit is stopped, nothing is flushed."""
        self._started = time.monotonic()
        self.qmp.execute("system_reset")

    # Commands ------------------------------------------------------------------------------

    @property
    def agent(self) -> GuestAgent:
        if self._agent is None:
            raise GuestAgentError("the box is not running")
        return self._agent

    @property
    def qmp(self) -> Qmp:
        if self._qmp is None:
            raise RuntimeError("the box is not running")
        return self._qmp

    def run(
        self, argv: list[str], *, stdin: bytes | None = None, timeout: float = 120.0
    ) -> GuestResult:
        return self.agent.run(argv, stdin=stdin, timeout=timeout)

    def sh(self, script: str, *, stdin: bytes | None = None, timeout: float = 120.0) -> str:
        """Runs a shell script as root in the guest; its stdout, or GuestCommandFailed."""
        result = self.run(["/bin/sh", "-c", script], stdin=stdin, timeout=timeout)
        if result.returncode != 0:
            raise GuestCommandFailed(result.describe())
        return result.stdout

    def write_file(self, path: str, text: str, mode: str = "0644") -> None:
        self.sh(
            f'mkdir -p "$(dirname {path})" && cat >{path} && chmod {mode} {path}',
            stdin=text.encode(),
        )

    # Hot-plug ------------------------------------------------------------------------------

    def plug_nic(self, mac: str, netdev: dict[str, Any] | None = None) -> Nic:
        """Hot-plugs a virtio-net-pci NIC with `mac` onto a free root port. `netdev` is the
        backend's netdev_add arguments (without id); by default a user-mode network with
        nothing beyond it (restrict), which needs no privilege on the host."""
        with self._plug_lock:
            free = [port for port in self._ports if port not in self._plugged]
            if not free:
                raise RuntimeError(f"every root port is taken ({len(self._ports)}): more ports")
            self._serial += 1
            nic = Nic(f"nic{self._serial}", f"net{self._serial}", free[0], mac)
            backend = netdev or {"type": "user", "restrict": True, "net": "198.51.100.0/24"}
            self.qmp.execute("netdev_add", {**backend, "id": nic.netdev_id})
            device = {"driver": "virtio-net-pci", "id": nic.device_id, "mac": mac}
            self.qmp.execute("device_add", {**device, "bus": nic.port, "netdev": nic.netdev_id})
            self._plugged[nic.port] = nic
            return nic

    def unplug_nic(self, nic: Nic, timeout: float = 60.0) -> None:
        """Asks for the NIC's removal and waits until the guest released it (DEVICE_DELETED),
        then removes its backend."""
        self.qmp.execute("device_del", {"id": nic.device_id})
        self.qmp.wait_event(
            "DEVICE_DELETED",
            timeout=timeout,
            match=lambda data: data.get("device") == nic.device_id,
        )
        self.qmp.execute("netdev_del", {"id": nic.netdev_id})
        with self._plug_lock:
            del self._plugged[nic.port]

    @property
    def plugged(self) -> list[Nic]:
        """The NICs hot-plugged now (those unplugged are gone from it)."""
        with self._plug_lock:
            return list(self._plugged.values())
