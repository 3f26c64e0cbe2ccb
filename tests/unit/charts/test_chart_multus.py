from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cdk8s
import pytest

from charts.multus import MULTUS_IMAGE_TAG, MultusChart, MultusProps, multus_image

CAPACITY_DOC = Path(__file__).resolve().parents[3] / "docs" / "node-capacity.md"
BURST_PODS = 50
HEADROOM = 1.25
ROUNDING_MIB = 256


@pytest.fixture(scope="module")
def multus(seed_manifests: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return seed_manifests["multus"]


@pytest.mark.parametrize(
    ("region", "image"),
    [
        (
            "us-west-2",
            "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/multus-cni:v4.1.4-eksbuild.3_thick",
        ),
        (
            "af-south-1",
            "877085696533.dkr.ecr.af-south-1.amazonaws.com/eks/multus-cni:v4.1.4-eksbuild.3_thick",
        ),
        (
            "me-south-1",
            "558608220178.dkr.ecr.me-south-1.amazonaws.com/eks/multus-cni:v4.1.4-eksbuild.3_thick",
        ),
        (
            "ap-south-2",
            "900889452093.dkr.ecr.ap-south-2.amazonaws.com/eks/multus-cni:v4.1.4-eksbuild.3_thick",
        ),
        (
            "cn-north-1",
            "918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn/eks/multus-cni:v4.1.4-eksbuild.3_thick",
        ),
    ],
)
def test_image_comes_from_the_regional_eks_registry(region: str, image: str) -> None:
    assert multus_image(region) == image


def test_unknown_region_fails_naming_the_region() -> None:
    with pytest.raises(ValueError, match="'xx-nowhere-1'"):
        MultusChart(cdk8s.Testing.app(), "multus", MultusProps(region="xx-nowhere-1"))


def test_daemonset_and_installer_use_the_pinned_image_of_the_chart_region(
    helpers: SimpleNamespace,
) -> None:
    manifests = cdk8s.Testing.synth(
        MultusChart(cdk8s.Testing.app(), "multus", MultusProps(region="eu-south-1"))
    )
    daemon_set = helpers.find(manifests, "DaemonSet", "kube-multus-ds")
    images = {c["image"] for c in helpers.containers(daemon_set)}
    assert images == {
        f"590381155156.dkr.ecr.eu-south-1.amazonaws.com/eks/multus-cni:{MULTUS_IMAGE_TAG}"
    }


def test_daemonset_runs_on_every_node_whatever_its_taints(
    multus: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    pod = helpers.find(multus, "DaemonSet")["spec"]["template"]["spec"]
    for key, value, effect in [
        ("multus/not-ready", "true", "NoSchedule"),
        ("karpenter.sh/controller", "true", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "", "NoExecute"),
    ]:
        assert helpers.tolerates(pod["tolerations"], key, value, effect), key


def test_daemon_runs_in_the_host_network_and_pid_namespaces(
    multus: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    pod = helpers.find(multus, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    assert pod["hostPID"] is True
    assert pod["serviceAccountName"] == "multus"
    assert pod["automountServiceAccountToken"] is True
    assert all(c["securityContext"]["privileged"] for c in pod["containers"])


def test_shim_installer_shares_the_cni_bin_directory_with_the_host(
    multus: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    pod = helpers.find(multus, "DaemonSet")["spec"]["template"]["spec"]
    (installer,) = pod["initContainers"]
    (mount,) = installer["volumeMounts"]
    host_paths = {v["name"]: v.get("hostPath", {}).get("path") for v in pod["volumes"]}
    assert host_paths[mount["name"]] == "/opt/cni/bin"
    assert mount["mountPropagation"] == "Bidirectional"
    assert installer["command"][-1] == mount["mountPath"] + "/multus-shim"


def test_daemon_config_delegates_to_the_vpc_cni_in_the_mounted_cni_dir(
    multus: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    config = json.loads(helpers.find(multus, "ConfigMap")["data"]["daemon-config.json"])
    pod = helpers.find(multus, "DaemonSet")["spec"]["template"]["spec"]
    (daemon,) = pod["containers"]
    host_paths = {v["name"]: v.get("hostPath", {}).get("path") for v in pod["volumes"]}
    mounts = {m["mountPath"]: host_paths[m["name"]] for m in daemon["volumeMounts"]}
    assert config["multusMasterCNI"] == "10-aws.conflist"
    assert mounts[config["confDir"]] == "/etc/cni/net.d"
    assert mounts[config["multusAutoconfigDir"]] == "/etc/cni/net.d"
    assert mounts[config["chrootDir"]] == "/"
    env = {e["name"]: e.get("valueFrom") for e in daemon["env"]}
    assert env["MULTUS_NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_rbac_is_the_eks_manifests_except_read_only_network_attachment_definitions(
    multus: list[dict[str, Any]], helpers: SimpleNamespace, reference_dir: Path
) -> None:
    upstream = helpers.load_yaml_documents(
        reference_dir / "multus-v4.1.4-eksbuild.3" / "multus-daemonset-thick.yml"
    )
    ours = helpers.rule_triples(helpers.find(multus, "ClusterRole", "multus")["rules"])
    upstream_triples = helpers.rule_triples(
        helpers.find(upstream, "ClusterRole", "multus")["rules"]
    )
    nads = {
        ("k8s.cni.cncf.io", "network-attachment-definitions", v) for v in ("get", "list", "watch")
    }
    # Upstream grants every verb on every k8s.cni.cncf.io resource; the daemon only reads NADs.
    assert ("k8s.cni.cncf.io", "*", "*") in upstream_triples
    assert ours == (upstream_triples - {("k8s.cni.cncf.io", "*", "*")}) | nads
    assert not any(
        group == "k8s.cni.cncf.io" and verb not in ("get", "list", "watch")
        for group, _, verb in ours
    )
    binding = helpers.find(multus, "ClusterRoleBinding", "multus")
    assert binding["roleRef"]["name"] == "multus"
    assert [(s["kind"], s["name"], s["namespace"]) for s in binding["subjects"]] == [
        ("ServiceAccount", "multus", "kube-system")
    ]


def test_network_attachment_definition_crd_matches_upstream_schema(
    multus: list[dict[str, Any]], helpers: SimpleNamespace, upstream_crds: dict[str, dict[str, Any]]
) -> None:
    ours = helpers.find(multus, "CustomResourceDefinition")
    upstream = upstream_crds["k8s.cni.cncf.io/NetworkAttachmentDefinition"]
    assert ours["metadata"]["name"] == upstream["metadata"]["name"]
    assert ours["spec"]["names"]["kind"] == "NetworkAttachmentDefinition"
    assert helpers.crd_schema(ours, "v1") == helpers.without_descriptions(
        helpers.crd_schema(upstream, "v1")
    )


def delegate_figures() -> list[tuple[str, str, float, float]]:
    """(process, stage, private MiB, shared MiB) from docs/node-capacity.md's sizing table."""
    section = CAPACITY_DOC.read_text().split("## Sizing the Multus daemon")[1]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] not in ("process", "---"):
            rows.append((cells[0], cells[1], float(cells[2]), float(cells[3])))
    return rows


def burst_memory_limit_mib(figures: list[tuple[str, str, float, float]], pods: int) -> int:
    """The documented rule: the daemon, the largest stage of one pod's chain for each pod of the
    burst (one pod's plugins run one after the other), every binary's shared pages once; times
    the headroom, rounded up."""
    stages: dict[str, float] = {}
    for _, stage, private, _ in figures:
        if stage != "daemon":
            stages[stage] = stages.get(stage, 0.0) + private
    daemon = sum(private for _, stage, private, _ in figures if stage == "daemon")
    shared = sum(shared for *_, shared in figures)
    peak = daemon + pods * max(stages.values()) + shared
    return math.ceil(HEADROOM * peak / ROUNDING_MIB) * ROUNDING_MIB


def test_sizing_rule_takes_the_largest_stage_per_pod() -> None:
    figures = [
        ("daemon", "daemon", 40.0, 0.0),
        ("ipvlan", "ipam", 1.0, 3.0),
        ("whereabouts", "ipam", 19.0, 33.0),
        ("plugin", "pod-ip", 5.0, 6.0),
    ]
    # 40 + 50 x 20 + 42 = 1082 -> 1352.5 -> 1536; ten pods: 40 + 200 + 42 = 282 -> 352.5 -> 512.
    assert burst_memory_limit_mib(figures, 50) == 1536
    assert burst_memory_limit_mib(figures, 10) == 512


def test_daemon_is_sized_for_the_delegates_of_a_50_pod_burst(
    multus: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    """Multus thick runs every delegate as a child of multus-daemon, in its container
    (k8snetworkplumbingwg/multus-cni v4.1.4, pkg/server/exec_chroot.go, ChrootExec.ExecPlugin:
    exec.CommandContext with a chroot), one request per pod with no concurrency limit
    (pkg/server/server.go, net/http; multus-cni#1346 asks for one). A CPU limit sized for the
    daemon alone throttles the delegates (multus-cni#1144); a memory limit sized for it
    OOM-kills them in a burst. The figures are docs/node-capacity.md's."""
    pod = helpers.find(multus, "DaemonSet")["spec"]["template"]["spec"]
    (daemon,) = [c for c in pod["containers"] if c["name"] == "kube-multus"]
    limit = burst_memory_limit_mib(delegate_figures(), BURST_PODS)
    assert {p for p, _, _, _ in delegate_figures()} >= {"ipvlan", "whereabouts", "multus-pod-ip"}
    assert daemon["resources"]["limits"] == {"memory": f"{limit}Mi"}
    assert daemon["resources"]["requests"] == {"cpu": "100m", "memory": "200Mi"}
    assert f"= {limit}Mi" in CAPACITY_DOC.read_text()


def test_daemon_is_node_critical(multus: list[dict[str, Any]], helpers: SimpleNamespace) -> None:
    """system-node-critical: the kubelet gives every container of such a pod (and so the
    delegates it starts) the OOM score adjustment of Guaranteed pods, whatever the QoS class
    (kubernetes pkg/kubelet/qos/policy.go, GetContainerOOMScoreAdjust)."""
    pod = helpers.find(multus, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-node-critical"
