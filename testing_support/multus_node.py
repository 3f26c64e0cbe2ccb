"""The real Multus data plane on a kernel-VM node: Multus thick (multus-daemon, and the
multus-shim that the kubelet's runtime calls), Whereabouts and the containernetworking plugins,
built from their Go modules (testing_support/cluster_box/build.py: build_cni), against the
cluster box's API server on the host.

Each node of the data-plane tier is a network namespace; here it also gets a mount namespace in
which its directories sit where a node has them (/etc/cni/net.d, /opt/cni/bin, /run/multus,
/var/lib/cni/multus, /run/multus-pod-ips, the service-account token of the daemon's pod), so
the daemon runs with the chart's own configuration (charts/multus.py: the daemon config less
the container's /host prefix and chroot) and every delegate finds what it would find on a node.
The API server is the VPC's endpoint: SERVICES_HOST:443 in the root namespace, forwarded to the
box over the VM's host link (testing_support/kernel_vm: --host-link).

The tier plays the kubelet and containerd: it creates the Pod in the API, bound to the node,
and calls the shim with the CNI_ARGS containerd passes (K8S_POD_NAMESPACE, K8S_POD_NAME,
K8S_POD_INFRA_CONTAINER_ID, K8S_POD_UID). The cluster network (the VPC CNI's 10-aws.conflist)
is a stand-in plugin, `aws-cni` (testing_support/vpc_cni_stand_in.py: eth0 as the VPC CNI sets
it up, without ipamd or its egress plugins; the VPC CNI needs EC2's and the node's real ENIs).
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from multus_pod_ips import CNI_PLUGIN_SCRIPT, CNI_PLUGIN_TYPE
from testing_support import vpc_cni_stand_in

API_PORT = 443
#: The daemon's configuration directory inside its container (charts/multus.py mounts the
#: ConfigMap there) and the container's view of host paths.
DAEMON_CONFIG_DIR = "/etc/cni/net.d/multus.d"
CONTAINER_HOST_PREFIX = "/host"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: What a node has where (node path -> the node root's subdirectory).
NODE_DIRECTORIES = (
    "/etc/cni/net.d",
    "/opt/cni/bin",
    "/var/lib/cni/multus",
)
#: What Whereabouts' install-cni.sh writes beside the kubeconfig (the plugin and the control
#: loop read it as the base of every NAD's IPAM config).
WHEREABOUTS_FLAT_FILE = {
    "datastore": "kubernetes",
    "kubernetes": {"kubeconfig": "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"},
}
#: Where Whereabouts' DaemonSet mounts the host's /etc/cni/net.d (its ip-control-loop reads
#: the kubeconfig and the flat file under it: pkg/controlloop/pod.go, defaultMountPath).
WHEREABOUTS_HOST_MOUNT = "/host/etc/cni/net.d"
#: How long the daemons get after SIGTERM. Whereabouts' ip-control-loop v0.9.4 often outlives
#: it: its handler sends one value on an unbuffered stop channel that the informers it started
#: also receive from, so main may never get it (cmd/controlloop/controlloop.go, handleSignals);
#: each of them cost a whole grace period when nodes were stopped one after the other.
STOP_GRACE_SECONDS = 10
PLUGINS = ("ipvlan", "host-device", "sbr", "static", "host-local", "loopback")
CLUSTER_NETWORK_FILE = "10-aws.conflist"
CLUSTER_NETWORK = {
    "cniVersion": "0.4.0",
    "name": "aws-cni",
    "plugins": [{"name": "aws-cni", "type": "aws-cni"}],
}
# The VPC CNI's place: testing_support/vpc_cni_stand_in.py, run as the host's Python runs a
# delegate (standard library only).
AWS_CNI_LAUNCHER = f"""#!/bin/sh
exec /usr/bin/python3 -I {vpc_cni_stand_in.__file__}
"""


@dataclass(frozen=True)
class BoxAccess:
    """What the host hands the VM about the box (tests/dataplane/conftest.py writes it):
    the API server's port on the host, its CA, an admin client certificate, the tokens of the
    multus and whereabouts service accounts (TokenRequest), the box's kubectl, the CNI
    binaries' paths and the Multus daemon's configuration (its ConfigMap's data, as the chart
    renders it)."""

    port: int
    ca: str
    admin_cert: str
    admin_key: str
    tokens: dict[str, str]
    kubectl: str
    cni: dict[str, str]
    multus_daemon_config: dict[str, Any]

    @classmethod
    def load(cls, path: Path) -> BoxAccess:
        return cls(**json.loads(path.read_text()))


class ApiForwarder:
    """TCP from (listen_host, API_PORT) to the box on the host (the VM's host link), one thread per
    connection direction."""

    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self.target = target
        self._server = socket.create_server((listen_host, API_PORT))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target, timeout=30)
            upstream.settimeout(None)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        self._server.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def kubeconfig(api_host: str, ca: str, *, token: str = "", cert: str = "", key: str = "",
               namespace: str = "") -> dict[str, Any]:  # fmt: skip
    user = {"token": token} if token else {"client-certificate": cert, "client-key": key}
    context: dict[str, Any] = {"cluster": "box", "user": "user"}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "box",
                "cluster": {
                    "server": f"https://{api_host}:{API_PORT}",
                    "certificate-authority-data": _base64(Path(ca).read_bytes()),
                },
            }
        ],
        "users": [{"name": "user", "user": user}],
        "contexts": [{"name": "box", "context": context}],
        "current-context": "box",
    }


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class MultusNode:
    """One node's Multus: its root (node paths below it), its namespace and the daemon."""

    name: str
    netns: str
    root: Path
    access: BoxAccess
    api_host: str
    pod_ips_dir: Path
    #: node_prefix networks' configs the bootstrap staged; copied into /etc/cni/net.d as its
    #: path unit does once the VPC CNI's config is there (node_bootstrap/node_prefix.sh).
    node_cni_configs: tuple[Path, ...] = ()
    daemon: subprocess.Popen[bytes] | None = None
    ip_control_loop: subprocess.Popen[bytes] | None = None

    def path(self, node_path: str) -> Path:
        return self.root / node_path.lstrip("/")

    def prepare(self) -> None:
        for node_path in NODE_DIRECTORIES:
            self.path(node_path).mkdir(parents=True, exist_ok=True)
        bin_dir = self.path("/opt/cni/bin")
        plugins_dir = Path(self.access.cni["plugins_dir"])
        for plugin in PLUGINS:
            shutil.copy(plugins_dir / plugin, bin_dir / plugin)
        for name in ("whereabouts", "multus_shim"):
            shutil.copy(self.access.cni[name], bin_dir / name.replace("_", "-"))
        shutil.copy(CNI_PLUGIN_SCRIPT, bin_dir / CNI_PLUGIN_TYPE)
        (bin_dir / "aws-cni").write_text(AWS_CNI_LAUNCHER)
        self.path(str(vpc_cni_stand_in.PLAN_DIR)).mkdir(parents=True, exist_ok=True)
        for name in (CNI_PLUGIN_TYPE, "aws-cni"):
            (bin_dir / name).chmod(0o755)
        net_d = self.path("/etc/cni/net.d")
        (net_d / CLUSTER_NETWORK_FILE).write_text(json.dumps(CLUSTER_NETWORK))
        for staged in self.node_cni_configs:
            shutil.copy(staged, net_d / staged.name)
        whereabouts = kubeconfig(
            self.api_host,
            self.access.ca,
            token=self.access.tokens["whereabouts"],
            namespace="kube-system",
        )
        (net_d / "whereabouts.d").mkdir(exist_ok=True)
        (net_d / "whereabouts.d" / "whereabouts.kubeconfig").write_text(json.dumps(whereabouts))
        (net_d / "whereabouts.d" / "whereabouts.conf").write_text(json.dumps(WHEREABOUTS_FLAT_FILE))
        for name, token in self.access.tokens.items():
            account = self.root / "accounts" / name
            account.mkdir(parents=True, exist_ok=True)
            (account / "token").write_text(token)
            shutil.copy(self.access.ca, account / "ca.crt")
            (account / "namespace").write_text("kube-system")
        config_dir = self.path(DAEMON_CONFIG_DIR)
        config_dir.mkdir(parents=True, exist_ok=True)
        config = daemon_config(self.access.multus_daemon_config)
        (config_dir / "daemon-config.json").write_text(json.dumps(config))

    def _in_node(self, command: list[str], account: str) -> list[str]:
        """`command` in the node's network namespace and a mount namespace of its own with
        the node's directories bound where a node has them, and the token of the service
        account `account` where a pod has its own."""
        # /run first: the node's own (the daemon replaces /run/multus/ whole), with the pods'
        # network namespaces (/run/netns, shared by the root namespace's `ip netns add`) and
        # the pod IP agent's socket directory inside it.
        run = self.path("/run")
        script = (
            f"mkdir -p {run}/netns {run}/multus-pod-ips && "
            f"mount --rbind /run/netns {run}/netns && "
            f"mount --bind {self.pod_ips_dir} {run}/multus-pod-ips && "
            f"mount --rbind {run} /run && "
        )
        binds = {node_path: self.path(node_path) for node_path in NODE_DIRECTORIES}
        binds[SERVICE_ACCOUNT_DIR] = self.root / "accounts" / account
        binds[WHEREABOUTS_HOST_MOUNT] = self.path("/etc/cni/net.d")
        script += "".join(
            f"mkdir -p {node_path} && mount --bind {source} {node_path} && "
            for node_path, source in binds.items()
        )
        return [
            "ip", "netns", "exec", self.netns,
            "unshare", "--mount", "--propagation", "unchanged",
            "sh", "-c", script + 'exec "$@"', "node-mounts", *command,
        ]  # fmt: skip

    def start(self) -> None:
        self.prepare()
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "KUBERNETES_SERVICE_HOST": self.api_host,
            "KUBERNETES_SERVICE_PORT": str(API_PORT),
            "MULTUS_NODE_NAME": self.name,
        }
        log = (self.root / "multus-daemon.log").open("ab")
        self.daemon = subprocess.Popen(
            self._in_node(
                [
                    self.access.cni["multus_daemon"],
                    f"-config={DAEMON_CONFIG_DIR}/daemon-config.json",
                ],
                "multus",
            ),
            env=env,
            stdout=log,
            stderr=log,
        )
        loop_log = (self.root / "ip-control-loop.log").open("ab")
        self.ip_control_loop = subprocess.Popen(
            self._in_node(
                [self.access.cni["ip_control_loop"], "-log-level", "debug"], "whereabouts"
            ),
            env={**env, "NODENAME": self.name, "WHEREABOUTS_NAMESPACE": "kube-system"},
            stdout=loop_log,
            stderr=loop_log,
        )

    def wait_ready(self, timeout: float = 180) -> None:
        """Until the daemon wrote its CNI config (00-multus.conf) and serves its socket."""
        conf = self.path("/etc/cni/net.d/00-multus.conf")
        sock = self.path("/run/multus/multus.sock")
        deadline = time.monotonic() + timeout
        while not (conf.exists() and sock.exists()):
            if self.daemon is not None and self.daemon.poll() is not None:
                raise RuntimeError(f"{self.name}: multus-daemon exited:\n{self.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: multus-daemon not ready:\n{self.log()}")
            time.sleep(0.5)

    def log(self) -> str:
        path = self.root / "multus-daemon.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def cni(
        self, command: str, netns: str, container_id: str, pod: dict[str, Any]
    ) -> dict[str, Any] | None:
        """What containerd does for a sandbox: the CNI command through the shim with the
        node's Multus config, the pod identified by CNI_ARGS."""
        metadata = pod["metadata"]
        args = ";".join(
            [
                "IgnoreUnknown=1",
                f"K8S_POD_NAMESPACE={metadata['namespace']}",
                f"K8S_POD_NAME={metadata['name']}",
                f"K8S_POD_INFRA_CONTAINER_ID={container_id}",
                f"K8S_POD_UID={metadata['uid']}",
            ]
        )
        conf = self.path("/etc/cni/net.d/00-multus.conf").read_text()
        done = subprocess.run(
            self._in_node(["/opt/cni/bin/multus-shim"], "multus"),
            input=conf,
            env={
                "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                "CNI_COMMAND": command,
                "CNI_CONTAINERID": container_id,
                "CNI_NETNS": netns,
                "CNI_IFNAME": "eth0",
                "CNI_PATH": "/opt/cni/bin",
                "CNI_ARGS": args,
            },
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"multus-shim {command} on {self.name}: {done.stdout} {done.stderr}\n{self.log()}"
            )
        return json.loads(done.stdout) if command == "ADD" and done.stdout.strip() else None

    def stop(self) -> None:
        stop_nodes([self])


def stop_nodes(nodes: Iterable[MultusNode]) -> None:
    """Stops the nodes' daemons and control loops: SIGTERM to all at once, then SIGKILL to those
    still running STOP_GRACE_SECONDS later (one grace period for all of them, not one each)."""
    running = [
        process
        for node in nodes
        for process in (node.daemon, node.ip_control_loop)
        if process is not None and process.poll() is None
    ]
    for process in running:
        process.terminate()
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for process in running:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def daemon_config(chart_config: dict[str, Any]) -> dict[str, Any]:
    """The chart's daemon config as the daemon sees the node outside its container: the
    /host prefix of the container's host mounts dropped and no chroot (the node's mount
    namespace is the host's root)."""
    config = {
        key: value.replace(CONTAINER_HOST_PREFIX, "", 1)
        if isinstance(value, str) and value.startswith(CONTAINER_HOST_PREFIX)
        else value
        for key, value in chart_config.items()
        if key != "chrootDir"
    }
    return config
