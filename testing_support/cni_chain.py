"""Runs a NAD's CNI plugin chain the way Multus does, with the real plugin binaries, in a real
network namespace; and a stand-in for the multus-pod-ips agent on a unix socket.

CNI spec ("Execution of Network Configurations", https://www.cni.dev/docs/spec/): for ADD,
each plugin of the list in order gets the network's name and cniVersion, its own plugin
object, and the previous plugin's result as prevResult; the last result is the chain's. DEL
runs the plugins in reverse order, each given the chain's cached ADD result as prevResult
(libcni keeps it for them).

Stand-ins for the tests of the pod's routes that run without a cluster box, on the build
machine or in a kernel VM of their own (tests/integration/multus_pod_ips/test_pod_routes.py,
Debian's plugins), and for the CNI plugin's own tests (tests/unit/multus_pod_ips/
test_cni_plugin.py); the data-plane tier runs the real chain (tests/dataplane/real_multus.py).

ChainRun does not model Multus' delegation: it reads no NAD from the API, writes no
network-status annotation, runs no cluster network first and keeps no delegate cache, and its
callers give static IPAM in place of Whereabouts. Multus thick and Whereabouts cannot serve
there: they need a Kubernetes API server, and those tests run chains Multus never would: from
sbr on, over a veth, where the kernel has no ipvlan; multus-pod-ip alone in a pod without net1,
so that the kernel refuses its route.

StandInAgent does not model the multus-pod-ips agent: it assigns nothing in EC2, answers what
the test sets (a refusal with its code, or bytes that are no answer at all) and records each
request as the plugin sent it. The real agent cannot serve there: it needs EC2 and IMDS (the
emulator), and it never sends the malformed answers the plugin must survive.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from multus_pod_ips import CNI_PLUGIN_SCRIPT, CNI_PLUGIN_TYPE

#: Debian's containernetworking-plugins 1.1.1 (make cni-plugins installs it), which the host's
#: namespace tests run with.
DEBIAN_CNI_PLUGIN_DIR = Path("/usr/lib/cni")
IP_COMMAND = shutil.which("ip") or "/usr/sbin/ip"


class StandInAgent:
    """Answers the CNI plugin on a unix socket like the agent, recording each request."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.requests: list[dict[str, Any]] = []
        self.reply: dict[str, Any] = {"ok": True}
        self.raw_reply: bytes | None = None  # sent instead of `reply` when set
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            with connection, connection.makefile("rwb") as stream:
                self.requests.append(json.loads(stream.readline()))
                reply = self.raw_reply
                stream.write(json.dumps(self.reply).encode() + b"\n" if reply is None else reply)

    def close(self) -> None:
        self._server.close()


class CniChainError(Exception):
    """A plugin of the chain answered with an error (its CNI error JSON on stdout)."""

    def __init__(self, plugin_type: str, command: str, stdout: str, stderr: str) -> None:
        super().__init__(f"{plugin_type} {command} failed: {stdout} {stderr}")
        self.stdout = stdout


@dataclass(frozen=True)
class ChainRun:
    """Where the chain runs: the pod's namespace path, the container interface, the agent's
    socket (given to multus-pod-ip as agentSocket), the named namespace the plugins run in
    (the node's, where ipvlan finds its master), the reference plugins' directory and the
    container's ID and pod name as the runtime passes them."""

    netns: str
    ifname: str
    agent_socket: Path
    node_netns: str
    plugin_dir: Path = DEBIAN_CNI_PLUGIN_DIR
    container_id: str = "pod-routes-test"
    pod_name: str = "routes"

    def add(
        self,
        network: dict[str, Any],
        plugins: Sequence[dict[str, Any]],
        prev_result: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """ADD through `plugins` (a slice of network["plugins"], possibly changed) in order,
        starting from `prev_result`; returns the last plugin's result."""
        result = prev_result
        for plugin in plugins:
            result = self._exec("ADD", network, plugin, result)
        if result is None:
            raise ValueError("an empty chain and no prevResult have no result")
        return result

    def delete(
        self, network: dict[str, Any], plugins: Sequence[dict[str, Any]], result: dict[str, Any]
    ) -> None:
        """DEL through `plugins` in reverse order, each given the chain's ADD result."""
        for plugin in reversed(plugins):
            self._exec("DEL", network, plugin, result)

    def _exec(
        self,
        command: str,
        network: dict[str, Any],
        plugin_config: dict[str, Any],
        prev_result: dict[str, Any] | None,
    ) -> dict[str, Any] | None:
        plugin_type = plugin_config["type"]
        stdin: dict[str, Any] = {
            "cniVersion": network["cniVersion"],
            "name": network["name"],
            **plugin_config,
        }
        if plugin_type == CNI_PLUGIN_TYPE:
            stdin["agentSocket"] = str(self.agent_socket)
        if prev_result is not None:
            stdin["prevResult"] = prev_result
        plugin = (
            [sys.executable, str(CNI_PLUGIN_SCRIPT)]
            if plugin_type == CNI_PLUGIN_TYPE
            else [str(self.plugin_dir / plugin_type)]
        )
        pod = self.pod_name
        done = subprocess.run(
            [IP_COMMAND, "netns", "exec", self.node_netns, *plugin],
            input=json.dumps(stdin),
            env={
                "CNI_COMMAND": command,
                "CNI_CONTAINERID": self.container_id,
                "CNI_NETNS": self.netns,
                "CNI_IFNAME": self.ifname,
                "CNI_PATH": str(self.plugin_dir),
                # As containerd passes them: IgnoreUnknown=1 lets plugins skip the K8S_ ones.
                "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME={pod}",
                # A delegate inherits its caller's PATH (Multus thick: its own container's),
                # which says nothing about the host: plugins must find their tools themselves.
                "PATH": "/nonexistent",
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise CniChainError(plugin_type, command, done.stdout, done.stderr)
        if command != "ADD":
            return None
        result: dict[str, Any] = json.loads(done.stdout)
        return result
