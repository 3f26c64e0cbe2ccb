"""The kubelet's and the container runtime's part for a pod whose container is a shell script
that runs as well on this machine: the script from the real Pod object, its environment as the
kubelet builds it (values, the fieldRefs resolved from the Pod, KUBERNETES_SERVICE_HOST/PORT of
the box), its hostPath mounts under a directory of the test's (a host path P is root/P, and
each mount path in the environment points there), and the service-account token the kubelet
would project: a TokenRequest bound to the Pod (which names the Pod's node, so the API server
adds authentication.kubernetes.io/node-name to the token's user info).

What it does not model: the container image (the script runs with this machine's bash, curl
and coreutils), users and capabilities, and kubelet-side token rotation."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from testing_support.cluster_box.control_plane import ControlPlane

TOKEN_SECONDS = 3600


def pod_token(plane: ControlPlane, pod: dict[str, Any]) -> str:
    """A token of the pod's service account bound to the pod, as the kubelet projects it."""
    metadata = pod["metadata"]
    return plane.kubectl(
        "create",
        "token",
        pod["spec"].get("serviceAccountName", "default"),
        "-n",
        metadata["namespace"],
        "--bound-object-kind=Pod",
        f"--bound-object-name={metadata['name']}",
        f"--bound-object-uid={metadata['uid']}",
        f"--duration={TOKEN_SECONDS}s",
    ).strip()


def token_kubeconfig(plane: ControlPlane, token: str, path: Path) -> Path:
    """A kubeconfig that authenticates with `token` alone."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "box",
                "cluster": {
                    "server": plane.server,
                    "certificate-authority": str(plane.pki.ca_cert),
                },
            }
        ],
        "users": [{"name": "token", "user": {"token": token}}],
        "contexts": [{"name": "box", "context": {"cluster": "box", "user": "token"}}],
        "current-context": "box",
    }
    path.write_text(json.dumps(config))
    return path


@dataclass
class Container:
    """A started container: its process, the file its output goes to, its environment."""

    process: subprocess.Popen[bytes]
    log: Path
    env: dict[str, str]

    def output(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


def host_path(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def start_container(
    plane: ControlPlane,
    pod: dict[str, Any],
    root: Path,
    *,
    path_prefix: str = "",
    env_overrides: dict[str, str] | None = None,
) -> Container:
    """Runs the pod's only container's command. `path_prefix`: a directory put before PATH
    (a test's wrapper of a command). The service-account directory is root/serviceaccount,
    named to the script by SERVICE_ACCOUNT_DIR."""
    spec = pod["spec"]
    (container,) = spec["containers"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    mounts = {}
    for mount in container.get("volumeMounts", []):
        source = volumes[mount["name"]].get("hostPath")
        if source:
            directory = host_path(root, source["path"])
            directory.mkdir(parents=True, exist_ok=True)
            mounts[mount["mountPath"]] = str(directory)
    account = root / "serviceaccount"
    account.mkdir(parents=True, exist_ok=True)
    (account / "token").write_text(pod_token(plane, pod))
    (account / "ca.crt").write_bytes(plane.pki.ca_cert.read_bytes())
    address = urlsplit(plane.server)
    env = {
        "PATH": f"{path_prefix}{os.pathsep if path_prefix else ''}{os.environ['PATH']}",
        "HOME": str(root),
        "KUBERNETES_SERVICE_HOST": str(address.hostname),
        "KUBERNETES_SERVICE_PORT": str(address.port),
        "SERVICE_ACCOUNT_DIR": str(account),
    }
    for variable in container.get("env", []):
        env[variable["name"]] = _resolve(pod, variable)
    for name, value in env.items():
        for mount_path, target in mounts.items():
            # every path below the mount, also in a space-separated list
            value = re.sub(rf"(?<!\S){re.escape(mount_path)}(?=/|\s|$)", target, value)
        env[name] = value
    env.update(env_overrides or {})
    log = root / "container.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*container["command"], *container.get("args", [])],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=root,
        )
    return Container(process, log, env)


def _resolve(pod: dict[str, Any], variable: dict[str, Any]) -> str:
    if "value" in variable:
        return str(variable["value"])
    field_path = variable["valueFrom"]["fieldRef"]["fieldPath"]
    value: Any = pod
    for part in field_path.split("."):
        value = value[part]
    return str(value)
