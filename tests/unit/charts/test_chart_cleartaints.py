from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path
from types import SimpleNamespace

import cdk8s
import pytest

from charts.building_blocks import NodeTaint
from charts.cleartaints import (
    CLEAR_TAINT_SCRIPT,
    CLEARTAINTS_IMAGE,
    ClearTaintsChart,
    ClearTaintsProps,
)
from multus_pod_ips import AGENT_READY_MARKER

TAINT = "multus/not-ready:NoSchedule"


@pytest.fixture(scope="module")
def cleartaints(seed_manifests: dict[str, list[dict]]) -> list[dict]:
    return seed_manifests["cleartaints"]


@pytest.fixture(scope="module")
def pod(cleartaints: list[dict], helpers: SimpleNamespace) -> dict:
    spec: dict = helpers.find(cleartaints, "DaemonSet")["spec"]["template"]["spec"]
    return spec


def env_of(container: dict) -> dict[str, object]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_rbac_is_exactly_get_and_patch_on_nodes(
    cleartaints: list[dict], helpers: SimpleNamespace
) -> None:
    role = helpers.find(cleartaints, "ClusterRole")
    assert helpers.rule_triples(role["rules"]) == {("", "nodes", "get"), ("", "nodes", "patch")}
    assert all(not rule.get("resourceNames") for rule in role["rules"])
    assert not helpers.find_all(cleartaints, "Role")
    binding = helpers.find(cleartaints, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert [(s["kind"], s["name"], s["namespace"]) for s in binding["subjects"]] == [
        ("ServiceAccount", "cleartaints", "cleartaints")
    ]
    assert helpers.find(cleartaints, "Namespace")["metadata"]["name"] == "cleartaints"


def test_runs_only_on_multus_nodes_despite_their_startup_taint(
    pod: dict, helpers: SimpleNamespace
) -> None:
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [
        {"key": "karpenter-node", "operator": "In", "values": ["true"]}
    ]
    assert helpers.tolerates(pod["tolerations"], "multus/not-ready", "true", "NoSchedule")
    assert not helpers.tolerates(
        pod["tolerations"], "karpenter.sh/controller", "true", "NoSchedule"
    )


def test_node_selector_and_taint_are_configurable(helpers: SimpleNamespace) -> None:
    props = ClearTaintsProps(
        namespace="ops",
        node_selector={"pool": "multus", "tier": "data"},
        taint=NodeTaint(key="example.com/not-ready", value="yes", effect="NoExecute"),
    )
    manifests = cdk8s.Testing.synth(ClearTaintsChart(cdk8s.Testing.app(), "ct", props))
    daemon_set = helpers.find(manifests, "DaemonSet")
    pod = daemon_set["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {(e["key"], tuple(e["values"])) for e in term["matchExpressions"]} == {
        ("pool", ("multus",)),
        ("tier", ("data",)),
    }
    assert helpers.tolerates(pod["tolerations"], "example.com/not-ready", "yes", "NoExecute")
    assert env_of(pod["containers"][0])["TAINT"] == "example.com/not-ready:NoExecute"
    assert daemon_set["metadata"]["namespace"] == "ops"


def test_node_name_comes_from_the_downward_api(pod: dict) -> None:
    (container,) = pod["containers"]
    assert env_of(container)["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env_of(container)["TAINT"] == TAINT
    assert pod["automountServiceAccountToken"] is True
    assert pod["hostNetwork"] is False


def test_both_readiness_conditions_are_checked_on_read_only_host_paths(pod: dict) -> None:
    (container,) = pod["containers"]
    env = env_of(container)
    host_paths = {v["name"]: v.get("hostPath", {}).get("path") for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    marker_dir, _, marker_file = str(env["READY_MARKER"]).rpartition("/")
    assert marker_file == "ready"
    assert host_paths[mounts[marker_dir]["name"]] == "/var/lib/multus-eni"
    assert host_paths[mounts[str(env["CNI_CONF_DIR"])]["name"]] == "/etc/cni/net.d"
    assert mounts[marker_dir]["readOnly"] is True
    assert mounts[str(env["CNI_CONF_DIR"])]["readOnly"] is True
    script = container["command"][-1]
    assert '[ -f "$READY_MARKER" ]' in script
    assert '"$CNI_CONF_DIR"/*multus*.conf' in script


def test_marker_location_is_configurable(helpers: SimpleNamespace) -> None:
    props = ClearTaintsProps(ready_marker_dir="/run/eni-bootstrap", ready_marker_file="done")
    manifests = cdk8s.Testing.synth(ClearTaintsChart(cdk8s.Testing.app(), "ct", props))
    pod = helpers.find(manifests, "DaemonSet")["spec"]["template"]["spec"]
    marker_dir, _, marker_file = str(env_of(pod["containers"][0])["READY_MARKER"]).rpartition("/")
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == marker_dir]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert (volume["hostPath"]["path"], marker_file) == ("/run/eni-bootstrap", "done")


def test_container_is_locked_down_and_bounded(pod: dict) -> None:
    (container,) = pod["containers"]
    context = container["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] != 0
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["privileged"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}


def test_image_is_a_pinned_kubectl_1_34_with_a_shell(pod: dict) -> None:
    (container,) = pod["containers"]
    assert container["image"] == CLEARTAINTS_IMAGE
    assert re.fullmatch(r"alpine/k8s:1\.34\.\d+", CLEARTAINTS_IMAGE)
    assert container["command"][:2] == ["/bin/sh", "-c"]


# The script itself, run by /bin/sh with fake kubectl and sleep on the PATH.
FAKE_KUBECTL = """#!/bin/sh
echo "$*" >> "$LOG_DIR/kubectl"
calls=$(wc -l < "$LOG_DIR/kubectl")
case "$KUBECTL_BEHAVIOUR" in
  ok) echo "node/$3 untainted" ;;
  gone) echo "error: taint \\"$4\\" not found" >&2; exit 1 ;;
  flaky) [ "$calls" -gt 1 ] || { echo "connection refused" >&2; exit 1; } ;;
esac
"""
# Idling (sleep infinity) ends the run; waiting in a loop is cut short after a few rounds.
FAKE_SLEEP = """#!/bin/sh
echo "$1" >> "$LOG_DIR/sleep"
[ "$1" = infinity ] && exit 0
[ "$(wc -l < "$LOG_DIR/sleep")" -lt 4 ] || kill -TERM "$PPID"
"""


@pytest.fixture
def node(tmp_path: Path) -> SimpleNamespace:
    bin_dir, cni_dir, marker_dir, log_dir = (tmp_path / d for d in ("bin", "cni", "eni", "log"))
    for directory in (bin_dir, cni_dir, marker_dir, log_dir):
        directory.mkdir()
    # The multus-pod-ips agent is ready unless a test removes its marker.
    pod_ips_marker = tmp_path / "pod-ips-ready"
    pod_ips_marker.write_text("")
    for name, text in (("kubectl", FAKE_KUBECTL), ("sleep", FAKE_SLEEP)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)

    def run(kubectl_behaviour: str = "ok") -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "LOG_DIR": str(log_dir),
            "KUBECTL_BEHAVIOUR": kubectl_behaviour,
            "NODE_NAME": "ip-10-0-2-7.us-west-2.compute.internal",
            "TAINT": TAINT,
            "CNI_CONF_DIR": str(cni_dir),
            "READY_MARKER": str(marker_dir / "ready"),
            "POD_IPS_READY_MARKER": str(pod_ips_marker),
        }
        return subprocess.run(
            ["/bin/sh", "-c", CLEAR_TAINT_SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            timeout=10,
        )

    def log(name: str) -> list[str]:
        path = log_dir / name
        return path.read_text().splitlines() if path.exists() else []

    return SimpleNamespace(
        run=run, log=log, cni_dir=cni_dir, marker=marker_dir / "ready", pod_ips=pod_ips_marker
    )


@pytest.mark.parametrize(
    ("multus_conf", "marker"),
    [(None, False), ("00-multus.conf", False), (None, True), ("10-aws.conflist", True)],
)
def test_script_keeps_the_taint_until_both_conditions_hold(
    node: SimpleNamespace, multus_conf: str | None, marker: bool
) -> None:
    if multus_conf:
        (node.cni_dir / multus_conf).write_text("{}")
    if marker:
        node.marker.write_text("")
    result = node.run()
    assert result.returncode == -signal.SIGTERM
    assert node.log("kubectl") == []


def test_script_keeps_the_taint_until_the_pod_ip_agent_is_ready(node: SimpleNamespace) -> None:
    (node.cni_dir / "00-multus.conf").write_text("{}")
    node.marker.write_text("")
    node.pod_ips.unlink()
    result = node.run()
    assert result.returncode == -signal.SIGTERM
    assert node.log("kubectl") == []


def test_pod_ip_agent_marker_is_read_from_the_agents_host_directory(pod: dict) -> None:
    (container,) = pod["containers"]
    host_paths = {v["name"]: v.get("hostPath", {}).get("path") for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    marker_dir, _, marker_file = str(env_of(container)["POD_IPS_READY_MARKER"]).rpartition("/")
    assert f"{host_paths[mounts[marker_dir]['name']]}/{marker_file}" == AGENT_READY_MARKER
    assert mounts[marker_dir]["readOnly"] is True
    assert '[ -f "$POD_IPS_READY_MARKER" ]' in container["command"][-1]


@pytest.mark.parametrize("multus_conf", ["00-multus.conf", "00-multus.conflist"])
def test_script_removes_the_taint_then_idles(node: SimpleNamespace, multus_conf: str) -> None:
    (node.cni_dir / multus_conf).write_text("{}")
    node.marker.write_text("")
    result = node.run()
    assert result.returncode == 0, result.stderr
    assert node.log("kubectl") == [f"taint nodes ip-10-0-2-7.us-west-2.compute.internal {TAINT}-"]
    assert node.log("sleep")[-1] == "infinity"


def test_script_treats_an_already_removed_taint_as_done(node: SimpleNamespace) -> None:
    (node.cni_dir / "00-multus.conf").write_text("{}")
    node.marker.write_text("")
    result = node.run("gone")
    assert result.returncode == 0, result.stderr
    assert len(node.log("kubectl")) == 1
    assert node.log("sleep") == ["infinity"]


def test_script_retries_a_failed_removal(node: SimpleNamespace) -> None:
    (node.cni_dir / "00-multus.conf").write_text("{}")
    node.marker.write_text("")
    result = node.run("flaky")
    assert result.returncode == 0, result.stderr
    assert len(node.log("kubectl")) == 2
    assert "connection refused" in result.stderr
    assert node.log("sleep")[-1] == "infinity"
