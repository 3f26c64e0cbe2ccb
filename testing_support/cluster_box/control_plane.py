"""Start and stop the box: etcd, kube-apiserver, kube-controller-manager, kube-scheduler on
127.0.0.1, with the flags a kubeadm-style control plane (and EKS) runs: TLS everywhere the API
server serves, client certificates, service-account token signing, Node and RBAC
authorization, the default admission plugins (ServiceAccount among them) plus NodeRestriction,
each controller with its own service account (--use-service-account-credentials).
controller-runtime's envtest (pkg/internal/testing/controlplane) was the reading for the flags.

Deviations, each because nothing here runs a kubelet: the node lifecycle controller's grace
periods are an hour (NODE_GRACE), so a Node registered Ready stays Ready without heartbeats; and
etcd skips fsync (a box's data lives as long as the box).
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from testing_support.cluster_box import pki
from testing_support.cluster_box.build import Binaries
from testing_support.startup import wait_until_answering

SERVICE_CIDR = "10.96.0.0/16"
ISSUER = "https://kubernetes.default.svc.cluster.local"
NODE_GRACE = "1h"
READY_TIMEOUT_SECONDS = 90.0


@dataclass
class ControlPlane:
    """A started box: its API server's URL, the admin kubeconfig and the running processes."""

    directory: Path
    binaries: Binaries
    server: str = ""
    processes: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "admin.kubeconfig"

    @property
    def pki(self) -> pki.Pki:
        return pki.Pki(self.directory / "pki")

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        completed = subprocess.run(
            [str(self.binaries.kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if check and completed.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {completed.stderr.strip()}")
        return completed.stdout

    def environment(self) -> dict[str, str]:
        """KUBECONFIG and PATH (the box's kubectl first) for a command run against the box."""
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "PATH": f"{self.binaries.kubectl.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }


@contextmanager
def running(
    directory: Path, binaries: Binaries, extra_addresses: tuple[str, ...] = ()
) -> Iterator[ControlPlane]:
    """extra_addresses: IP addresses the serving certificate names besides loopback's."""
    plane = ControlPlane(directory, binaries)
    try:
        _start(plane, extra_addresses)
        yield plane
    finally:
        _stop(plane)


def _start(plane: ControlPlane, extra_addresses: tuple[str, ...]) -> None:
    directory = plane.directory
    directory.mkdir(parents=True, exist_ok=True)
    identities = (pki.ADMIN, pki.CONTROLLER_MANAGER, pki.SCHEDULER)
    keys = pki.create(directory / "pki", identities, extra_addresses)
    etcd_port, peer_port, api_port = _free_ports(3)
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    plane.server = f"https://127.0.0.1:{api_port}"
    _spawn(
        plane,
        "etcd",
        [
            str(plane.binaries.etcd),
            "--name=box",
            f"--data-dir={directory / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=box=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync",
        ],
    )
    _spawn(
        plane,
        "kube-apiserver",
        [
            str(plane.binaries.kube_apiserver),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--cert-dir={directory / 'apiserver-certs'}",
            f"--tls-cert-file={keys.serving_cert}",
            f"--tls-private-key-file={keys.serving_key}",
            f"--client-ca-file={keys.ca_cert}",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={keys.service_account_public_key}",
            f"--service-account-signing-key-file={keys.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
        ],
    )
    for identity in identities:
        _write_kubeconfig(plane, identity)
    _wait_ready(plane)
    common = [
        f"--authentication-kubeconfig={_kubeconfig_path(plane, pki.CONTROLLER_MANAGER)}",
        f"--authorization-kubeconfig={_kubeconfig_path(plane, pki.CONTROLLER_MANAGER)}",
    ]
    _spawn(
        plane,
        "kube-controller-manager",
        [
            str(plane.binaries.kube_controller_manager),
            f"--kubeconfig={_kubeconfig_path(plane, pki.CONTROLLER_MANAGER)}",
            *common,
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={keys.service_account_key}",
            f"--root-ca-file={keys.ca_cert}",
            f"--node-monitor-grace-period={NODE_GRACE}",
            f"--node-startup-grace-period={NODE_GRACE}",
        ],
    )
    scheduler_kubeconfig = _kubeconfig_path(plane, pki.SCHEDULER)
    _spawn(
        plane,
        "kube-scheduler",
        [
            str(plane.binaries.kube_scheduler),
            f"--kubeconfig={scheduler_kubeconfig}",
            f"--authentication-kubeconfig={scheduler_kubeconfig}",
            f"--authorization-kubeconfig={scheduler_kubeconfig}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--leader-elect=false",
        ],
    )


def _spawn(plane: ControlPlane, name: str, command: list[str]) -> None:
    log = (plane.directory / f"{name}.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    plane.processes.append((name, process))


def _stop(plane: ControlPlane) -> None:
    """Stops the processes one at a time, the last started first, so etcd outlives the API
    server: signalled together, a kube-apiserver that had served a deploy never exited within
    the 10 s and was killed (measured: 10.3 s per deploy box; one at a time, 1.3 s)."""
    for _, process in reversed(plane.processes):
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    plane.processes.clear()


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _kubeconfig_path(plane: ControlPlane, identity: pki.ClientIdentity) -> Path:
    if identity == pki.ADMIN:
        return plane.kubeconfig
    return plane.directory / f"{identity.user.replace(':', '-')}.kubeconfig"


def _write_kubeconfig(plane: ControlPlane, identity: pki.ClientIdentity) -> None:
    keys = plane.pki
    _kubeconfig_path(plane, identity).write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: box
  cluster:
    server: {plane.server}
    certificate-authority: {keys.ca_cert}
users:
- name: {identity.user}
  user:
    client-certificate: {keys.client_cert(identity)}
    client-key: {keys.client_key(identity)}
contexts:
- name: box
  context:
    cluster: box
    user: {identity.user}
current-context: box
"""
    )


def _wait_ready(plane: ControlPlane) -> None:
    """Until /readyz answers, or a process exits (its log's tail is the reason)."""
    keys = plane.pki
    context = ssl.create_default_context(cafile=str(keys.ca_cert))
    context.load_cert_chain(keys.client_cert(pki.ADMIN), keys.client_key(pki.ADMIN))

    def exit_reason() -> str | None:
        for name, process in plane.processes:
            if process.poll() is not None:
                log = (plane.directory / f"{name}.log").read_text(errors="replace")
                return f"{name} exited ({process.returncode}):\n{log[-3000:]}"
        return None

    wait_until_answering(
        f"{plane.server}/readyz",
        timeout_seconds=READY_TIMEOUT_SECONDS,
        exit_reason=exit_reason,
        context=context,
    )
