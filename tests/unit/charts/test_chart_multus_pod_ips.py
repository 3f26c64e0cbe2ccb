from __future__ import annotations

import json
import re
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from charts.multus_pod_ips import MultusPodIpsProps, PodIpsNodes, agent_config, config_map_key
from charts.nad_cni_configs import cni_config
from config.images import ImagesConfig
from config.node_bootstrap_plan import READY_MARKER_DIR
from config.node_labels import KARPENTER_NODE_LABEL_KEY
from multus_pod_ips import CNI_PLUGIN_SCRIPT, CNI_PLUGIN_TYPE, shipped_modules
from multus_pod_ips.cni_plugin import DEFAULT_AGENT_SOCKET
from tests.unit.charts.conftest import seed_attachments


@pytest.fixture(scope="module")
def manifests(seed_manifests: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return seed_manifests["multus-pod-ips"]


@pytest.fixture(scope="module")
def pod(manifests: list[dict[str, Any]], helpers: SimpleNamespace) -> dict[str, Any]:
    spec: dict[str, Any] = helpers.find(manifests, "DaemonSet")["spec"]["template"]["spec"]
    return spec


@pytest.fixture(scope="module")
def config(manifests: list[dict[str, Any]], helpers: SimpleNamespace) -> dict[str, Any]:
    data = helpers.find(manifests, "ConfigMap")["data"]
    parsed: dict[str, Any] = json.loads(data["config.json"])
    return parsed


def host_path_of(pod: dict[str, Any], container: dict[str, Any], mount_path: str) -> str:
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == mount_path]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    return str(volume["hostPath"]["path"])


def test_configmap_ships_every_module_of_the_package_unchanged(
    manifests: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    data = helpers.find(manifests, "ConfigMap")["data"]
    modules = shipped_modules()
    assert set(data) == {config_map_key(path) for path in modules} | {"config.json"}
    for path, source in modules.items():
        assert data[config_map_key(path)] == source.read_text(), path


def test_agent_manages_exactly_the_reservations_of_each_interface(config: dict[str, Any]) -> None:
    assert config["interfaces"] == {
        "multus1": ["10.0.4.32/27", "10.0.5.32/27"],
        "multus2": ["10.0.6.32/27", "10.0.7.32/27"],
    }


def test_plugin_reaches_the_agent_socket_on_the_host(
    pod: dict[str, Any], config: dict[str, Any]
) -> None:
    (agent,) = pod["containers"]
    socket_dir, _, _ = config["socket_path"].rpartition("/")
    assert config["socket_path"] == DEFAULT_AGENT_SOCKET
    # Mounted at the same path as on the host, where the plugin (run by Multus) connects.
    assert host_path_of(pod, agent, socket_dir) == socket_dir
    assert config["records_dir"].startswith(socket_dir + "/")  # /run: a reboot forgets them


def test_agent_reads_the_bootstrap_eni_state_and_host_netns_read_only(
    pod: dict[str, Any], config: dict[str, Any]
) -> None:
    (agent,) = pod["containers"]
    mounts = {m["mountPath"]: m for m in agent["volumeMounts"]}
    assert config["eni_state_dir"] == READY_MARKER_DIR
    assert host_path_of(pod, agent, READY_MARKER_DIR) == READY_MARKER_DIR
    assert mounts[READY_MARKER_DIR]["readOnly"] is True
    netns_mount = config["netns_root"] + "/run/netns"
    assert host_path_of(pod, agent, netns_mount) == "/run/netns"
    assert mounts[netns_mount]["readOnly"] is True
    assert mounts[netns_mount]["mountPropagation"] == "HostToContainer"


def test_runs_on_the_host_network_without_kubernetes_credentials_or_privileges(
    pod: dict[str, Any],
) -> None:
    assert pod["hostNetwork"] is True  # IMDS answers with hop limit 1: the node role
    assert pod["dnsPolicy"] == "Default"
    assert pod["automountServiceAccountToken"] is False
    for container in [*pod["containers"], *pod["initContainers"]]:
        context = container["securityContext"]
        assert context["privileged"] is False
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["readOnlyRootFilesystem"] is True
        assert set(container["resources"]["limits"]) == {"cpu", "memory"}


def test_runs_on_multus_nodes_before_their_startup_taint_is_lifted(
    pod: dict[str, Any], helpers: SimpleNamespace
) -> None:
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert [e["key"] for e in term["matchExpressions"]] == [KARPENTER_NODE_LABEL_KEY]
    assert helpers.tolerates(pod["tolerations"], "multus/not-ready", "true", "NoSchedule")
    assert pod["priorityClassName"] == "system-node-critical"


def test_image_is_the_pinned_amazon_linux_2023_release_cleartaints_uses(
    pod: dict[str, Any],
) -> None:
    image = ImagesConfig().multus_pod_ips.reference
    assert re.fullmatch(r"public\.ecr\.aws/amazonlinux/amazonlinux:2023\.\d+\.\d{8}\.\d+", image)
    assert image == ImagesConfig().cleartaints.reference  # one pull for both DaemonSets
    images = {c["image"] for c in [*pod["containers"], *pod["initContainers"]]}
    assert images == {image}


def test_readiness_is_the_marker_the_agent_writes(
    pod: dict[str, Any], config: dict[str, Any]
) -> None:
    (agent,) = pod["containers"]
    assert agent["readinessProbe"]["exec"]["command"] == ["test", "-f", config["ready_marker"]]


def test_init_container_installs_the_plugin_the_nads_chain_names(
    pod: dict[str, Any], tmp_path: Path
) -> None:
    (init,) = pod["initContainers"]
    code_dir = next(m["mountPath"] for m in init["volumeMounts"] if m["name"] == "code")
    bin_mount = next(m["mountPath"] for m in init["volumeMounts"] if m["name"] != "code")
    assert host_path_of(pod, init, bin_mount) == "/opt/cni/bin"
    plugin = tmp_path / "code" / "multus_pod_ips" / "cni_plugin.py"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(CNI_PLUGIN_SCRIPT.read_text())
    (tmp_path / "bin").mkdir()
    command = [
        part.replace(code_dir, str(tmp_path / "code")).replace(bin_mount, str(tmp_path / "bin"))
        for part in init["command"]
    ]
    subprocess.run(command, check=True)

    nad_types = {p["type"] for p in cni_config(seed_attachments()[0])["plugins"]}
    (installed,) = list((tmp_path / "bin").iterdir())
    assert installed.name == CNI_PLUGIN_TYPE and CNI_PLUGIN_TYPE in nad_types
    assert installed.read_text() == CNI_PLUGIN_SCRIPT.read_text()
    assert installed.stat().st_mode & stat.S_IXUSR
    # Multus runs it chrooted into the host, where AL2023 has /usr/bin/python3; isolated (-I):
    # test_cni_plugin.py shows what that keeps out.
    assert installed.read_text().startswith("#!/usr/bin/python3 -I\n")


def test_an_interface_without_ranges_is_rejected() -> None:
    with pytest.raises(ValueError, match="interfaces"):
        nodes = PodIpsNodes(interfaces={"multus1": []})
        agent_config(MultusPodIpsProps(image="img:1", pools=[nodes]), nodes)
