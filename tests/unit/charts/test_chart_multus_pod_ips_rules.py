"""Rules of the multus-pod-ips chart beyond the seed's shape: names and namespaces operators and
the pod spec rely on, mount paths, the agent's configuration and the props' contract."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from dataclasses import FrozenInstanceError
from pathlib import Path, PurePosixPath
from types import SimpleNamespace
from typing import Any

import cdk8s
import pytest

from charts.multus_pod_ips import (
    MultusPodIpsChart,
    MultusPodIpsProps,
    PodIpsNodes,
    agent_config,
)
from multus_pod_ips import AGENT_RUN_DIR, shipped_modules
from multus_pod_ips.agent.config import AgentConfig

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@pytest.fixture(scope="module")
def manifests(seed_manifests: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return seed_manifests["multus-pod-ips"]


@pytest.fixture(scope="module")
def daemon_set(manifests: list[dict[str, Any]], helpers: SimpleNamespace) -> dict[str, Any]:
    found: dict[str, Any] = helpers.find(manifests, "DaemonSet")
    return found


def test_the_daemon_set_is_the_one_the_docs_send_operators_to(
    daemon_set: dict[str, Any],
) -> None:
    # docs/multus-pod-ips.md: `kubectl -n kube-system logs ds/multus-pod-ips -c agent`.
    metadata = daemon_set["metadata"]
    assert (metadata["namespace"], metadata["name"]) == ("kube-system", "multus-pod-ips")
    assert [c["name"] for c in daemon_set["spec"]["template"]["spec"]["containers"]] == ["agent"]


def test_the_daemon_set_selects_its_pods_by_the_fixed_app_label(daemon_set: dict[str, Any]) -> None:
    # A DaemonSet's selector is immutable: a label derived from the construct path would force
    # delete + create whenever the path changes.
    assert daemon_set["spec"]["selector"] == {"matchLabels": {"app": "multus-pod-ips"}}
    assert daemon_set["spec"]["template"]["metadata"]["labels"]["app"] == "multus-pod-ips"


def test_the_code_volume_names_the_config_map_in_the_pods_namespace(
    manifests: list[dict[str, Any]], daemon_set: dict[str, Any], helpers: SimpleNamespace
) -> None:
    # A configMap volume refers to a ConfigMap by name in the pod's own namespace.
    config_map = helpers.find(manifests, "ConfigMap")["metadata"]
    (volume,) = [v for v in daemon_set["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    assert config_map["namespace"] == daemon_set["metadata"]["namespace"]
    assert volume["configMap"]["name"] == config_map["name"] == "multus-pod-ips"


def test_every_mount_path_is_absolute(daemon_set: dict[str, Any]) -> None:
    # OCI runtime spec (config.md, Mounts): a mount's destination MUST be an absolute path.
    pod = daemon_set["spec"]["template"]["spec"]
    paths = [
        m["mountPath"]
        for c in [*pod["initContainers"], *pod["containers"]]
        for m in c["volumeMounts"]
    ]
    assert paths and all(PurePosixPath(path).is_absolute() for path in paths), paths


def test_volume_and_container_names_are_dns_labels(daemon_set: dict[str, Any]) -> None:
    # Kubernetes validates both as RFC 1123 labels; the JSON schema does not.
    pod = daemon_set["spec"]["template"]["spec"]
    names = [v["name"] for v in pod["volumes"]]
    names += [c["name"] for c in [*pod["initContainers"], *pod["containers"]]]
    assert len(names) == len(set(names))
    assert all(DNS_LABEL.fullmatch(name) for name in names), names


def test_host_directories_are_mounted_even_before_they_exist(daemon_set: dict[str, Any]) -> None:
    # A new node may start the agent before anything created /run/multus-pod-ips or the
    # bootstrap's state directory; without DirectoryOrCreate the pod would not start.
    host_paths = [
        v["hostPath"] for v in daemon_set["spec"]["template"]["spec"]["volumes"] if "hostPath" in v
    ]
    assert host_paths and all(h["type"] == "DirectoryOrCreate" for h in host_paths), host_paths


def test_code_files_are_readable_and_neither_writable_nor_executable_by_others(
    daemon_set: dict[str, Any],
) -> None:
    (volume,) = [v for v in daemon_set["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    mode = volume["configMap"].get("defaultMode", 0o644)  # Kubernetes' default
    assert mode & 0o444 == 0o444
    assert mode & 0o133 == 0


def materialized_code(
    manifests: list[dict[str, Any]], daemon_set: dict[str, Any], helpers: SimpleNamespace, at: Path
) -> None:
    """Writes the code volume's files below `at` as the kubelet projects them: each listed
    ConfigMap key at its item's path (Kubernetes, "ConfigMaps": "Projection of keys to specific
    paths"; unlisted keys are not projected)."""
    data = helpers.find(manifests, "ConfigMap")["data"]
    (volume,) = [v for v in daemon_set["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    for item in volume["configMap"]["items"]:
        target = at / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(data[item["key"]])


#: Runs the agent's module as `python3 -m` does, then names the files it loaded (the first: the
#: module -m runs, which runpy keeps out of sys.modules).
LOADED_FILES = """
import importlib.util, runpy, sys
sys.argv = ["agent"]
print(importlib.util.find_spec("multus_pod_ips.agent.__main__").origin)
try:
    runpy.run_module("multus_pod_ips.agent", run_name="__main__")
except SystemExit as stop:
    print(stop.code)
for module in list(sys.modules.values()):
    print(getattr(module, "__file__", None))
"""


def test_the_shipped_tree_runs_the_agent_with_the_standard_library_alone(
    manifests: list[dict[str, Any]],
    daemon_set: dict[str, Any],
    helpers: SimpleNamespace,
    tmp_path: Path,
) -> None:
    # The node has AL2023's python3 and nothing else (docs/multus-pod-ips.md): every module the
    # agent imports must be shipped, and every shipped module is one it (or the host) runs.
    (agent,) = daemon_set["spec"]["template"]["spec"]["containers"]
    code = next(m["mountPath"] for m in agent["volumeMounts"] if m["name"] == "code")
    assert agent["command"] == ["python3", "-m", "multus_pod_ips.agent", f"{code}/config.json"]
    assert agent["workingDir"] == code  # -m finds the package in the working directory
    materialized_code(manifests, daemon_set, helpers, tmp_path)

    # Without site-packages (-S: the standard library only), PYTHON* variables or user site.
    isolated = [sys.executable, "-S", "-E", "-s"]
    command = subprocess.run(
        [*isolated, *agent["command"][1:-1]], cwd=tmp_path, capture_output=True, text=True
    )
    ran = subprocess.run(
        [*isolated, "-c", LOADED_FILES], cwd=tmp_path, capture_output=True, text=True
    )

    assert command.returncode == 2 and "usage:" in command.stderr, command.stderr
    assert ran.returncode == 0, ran.stderr
    main_module, exit_code, *loaded = ran.stdout.splitlines()
    assert (exit_code, ran.stderr.splitlines()[-1:]) == ("2", ["usage: agent CONFIG.json"])
    loaded.append(main_module)
    shipped = {f"{tmp_path}/{path}" for path in shipped_modules()}
    assert {path for path in loaded if path.startswith(f"{tmp_path}/")} == shipped
    assert not [path for path in loaded if "site-packages" in path]
    assert (tmp_path / "config.json").is_file()


@pytest.mark.parametrize("path", sorted(shipped_modules()))
def test_every_shipped_module_is_python_3_9(path: str) -> None:
    # The pinned AL2023 image's python3 is 3.9 (Amazon Linux 2023 release notes, Python).
    ast.parse(shipped_modules()[path].read_text(), feature_version=(3, 9))


def test_the_pinned_image_is_pulled_only_when_missing(daemon_set: dict[str, Any]) -> None:
    pod = daemon_set["spec"]["template"]["spec"]
    for container in [*pod["initContainers"], *pod["containers"]]:
        assert container["imagePullPolicy"] == "IfNotPresent", container["name"]


def test_the_pod_reserves_little_of_each_node(daemon_set: dict[str, Any]) -> None:
    # It runs on every Multus node. A pod's effective request is the larger of its largest init
    # container's and the sum of its containers' (Kubernetes, "Resource sharing within
    # containers"); keep it within 0.1 CPU and 128 MiB.
    pod = daemon_set["spec"]["template"]["spec"]

    def effective(resource: str, unit: str) -> int:
        def amount(container: dict[str, Any]) -> int:
            return int(container["resources"]["requests"][resource].removesuffix(unit))

        return max(
            max(amount(c) for c in pod["initContainers"]),
            sum(amount(c) for c in pod["containers"]),
        )

    assert effective("cpu", "m") <= 100
    assert effective("memory", "Mi") <= 128


def test_containers_run_as_root_for_root_owned_host_directories_and_nothing_more(
    daemon_set: dict[str, Any],
) -> None:
    # /opt/cni/bin and /run belong to root on the host; capabilities are dropped (other test).
    pod = daemon_set["spec"]["template"]["spec"]
    for container in [*pod["initContainers"], *pod["containers"]]:
        context = container["securityContext"]
        assert (context["runAsUser"], context["runAsGroup"]) == (0, 0), container["name"]
        # runAsNonRoot: true with user 0 makes the kubelet refuse to start the container.
        assert context.get("runAsNonRoot") is not True, container["name"]
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, container["name"]


def test_the_agent_writes_no_host_directory_but_its_run_directory(
    daemon_set: dict[str, Any],
) -> None:
    # Socket, pod records and readiness marker live in /run/multus-pod-ips on the host.
    pod = daemon_set["spec"]["template"]["spec"]
    host_volumes = {v["name"] for v in pod["volumes"] if "hostPath" in v}
    (agent,) = pod["containers"]
    writable = [
        m["mountPath"]
        for m in agent["volumeMounts"]
        if m["name"] in host_volumes and not m.get("readOnly", False)
    ]
    assert writable == [AGENT_RUN_DIR]


def test_the_agent_loads_the_shipped_configuration(
    manifests: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    data = helpers.find(manifests, "ConfigMap")["data"]

    loaded = AgentConfig(**json.loads(data["config.json"]))

    assert loaded.reconcile_seconds == 60  # docs/multus-pod-ips.md: "Every 60 s per ENI"
    # Shipped as UTF-8 text whatever the synthesizing machine's locale.
    assert all(text.isascii() for text in data.values())


def test_a_configured_reconcile_period_reaches_the_agent() -> None:
    nodes = PodIpsNodes(interfaces={"multus1": ["10.0.4.32/27"]})
    props = MultusPodIpsProps(image="img:1", pools=[nodes], reconcile_seconds=15)

    shipped = json.loads(json.dumps(agent_config(props, nodes)))
    assert AgentConfig(**shipped).reconcile_seconds == 15


def test_the_static_ranges_reach_the_agent_and_default_to_none() -> None:
    nodes = PodIpsNodes(interfaces={"n3": ["10.0.4.32/27"]}, static_ranges={"n3": ["10.0.4.48/28"]})
    props = MultusPodIpsProps(image="img:1", pools=[nodes])

    assert AgentConfig(**json.loads(json.dumps(agent_config(props, nodes)))).static_ranges == {
        "n3": ["10.0.4.48/28"]
    }
    seed = PodIpsNodes(interfaces={"n3": ["10.0.4.32/27"]})
    shipped = agent_config(MultusPodIpsProps(image="img:1", pools=[seed]), seed)
    assert AgentConfig(**json.loads(json.dumps(shipped))).static_ranges == {}


def test_props_are_immutable() -> None:
    props = MultusPodIpsProps(
        image="img:1", pools=[PodIpsNodes(interfaces={"multus1": ["10.0.4.32/27"]})]
    )
    with pytest.raises(FrozenInstanceError):
        props.namespace = "other"  # type: ignore[misc]


def test_the_agent_serves_metrics_on_the_port_the_daemon_set_declares(
    manifests: list[dict[str, Any]], daemon_set: dict[str, Any], helpers: SimpleNamespace
) -> None:
    # Host network: the container port is the node's port, so it must not collide with what
    # else listens on an EKS node (kubelet 10248/10250, kube-proxy 10249/10256, VPC CNI
    # 61678/61679, node-exporter 9100) and lies outside Linux's default ephemeral range
    # (net.ipv4.ip_local_port_range 32768-60999).
    data = helpers.find(manifests, "ConfigMap")["data"]
    (agent,) = daemon_set["spec"]["template"]["spec"]["containers"]
    port = AgentConfig(**json.loads(data["config.json"])).metrics_port

    assert agent["ports"] == [{"containerPort": port, "name": "metrics", "protocol": "TCP"}]
    assert daemon_set["spec"]["template"]["spec"]["hostNetwork"] is True
    assert port not in {9100, 10248, 10249, 10250, 10255, 10256, 61678, 61679}
    assert 60999 < port <= 65535


def test_floating_addresses_reach_the_agent_and_give_it_net_raw_alone() -> None:
    """The agent's packet socket needs CAP_NET_RAW (Linux net/packet/af_packet.c, packet_create:
    `if (!ns_capable(net->user_ns, CAP_NET_RAW)) return -EPERM`); only a pool with floating
    addresses gets it, and its file lists them."""
    floating = PodIpsNodes(
        interfaces={"n3": ["10.0.4.32/27"]},
        static_ranges={"n3": ["10.0.4.48/28"]},
        floating_addresses={"n3": ["10.0.4.60"]},
        pool="upf",
    )
    plain = PodIpsNodes(interfaces={"n2": ["10.0.6.32/27"]}, pool="control")
    props = MultusPodIpsProps(image="img:1", pools=[floating, plain])
    manifests = cdk8s.Testing.synth(MultusPodIpsChart(cdk8s.Testing.app(), "pod-ips", props))

    (config_map,) = [m for m in manifests if m["kind"] == "ConfigMap"]
    shipped = {
        nodes.pool: AgentConfig(**json.loads(config_map["data"][nodes.config_file]))
        for nodes in (floating, plain)
    }
    assert shipped["upf"].floating_addresses == {"n3": ["10.0.4.60"]}
    assert shipped["control"].floating_addresses == {}
    assert "floating_addresses" not in config_map["data"][plain.config_file]
    capabilities = {
        m["metadata"]["name"]: [
            c["securityContext"]["capabilities"]
            for c in m["spec"]["template"]["spec"]["containers"]
        ]
        for m in manifests
        if m["kind"] == "DaemonSet"
    }
    assert capabilities == {
        floating.daemon_set_name: [{"drop": ["ALL"], "add": ["NET_RAW"]}],
        plain.daemon_set_name: [{"drop": ["ALL"]}],
    }
