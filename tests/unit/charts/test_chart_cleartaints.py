from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cdk8s
import pytest

from charts.cleartaints import (
    CLEAR_TAINT_SCRIPT,
    NODE_NAME_EXTRA,
    ClearTaintsChart,
    ClearTaintsNodes,
    ClearTaintsProps,
)
from config.images import ImagesConfig
from config.node_labels import NodeTaint
from multus_pod_ips import AGENT_READY_MARKER
from tests.unit.charts.conftest import seed_attachments

IMAGE = ImagesConfig().cleartaints.reference
NODE = "ip-10-0-2-7.us-west-2.compute.internal"


@pytest.fixture(scope="module")
def cleartaints(seed_manifests: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return seed_manifests["cleartaints"]


@pytest.fixture(scope="module")
def pod(cleartaints: list[dict[str, Any]], helpers: SimpleNamespace) -> dict[str, Any]:
    spec: dict[str, Any] = helpers.find(cleartaints, "DaemonSet")["spec"]["template"]["spec"]
    return spec


def env_of(container: dict[str, Any]) -> dict[str, object]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_rbac_is_exactly_get_and_patch_on_nodes_and_delete_on_nodeclaims(
    cleartaints: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    """Deleting its own node's NodeClaim replaces a node that never gets ready; the policy
    cleartaints-own-node-claim narrows it to that claim."""
    role = helpers.find(cleartaints, "ClusterRole")
    assert helpers.rule_triples(role["rules"]) == {
        ("", "nodes", "get"),
        ("", "nodes", "patch"),
        ("karpenter.sh", "nodeclaims", "delete"),
    }
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
    pod: dict[str, Any], helpers: SimpleNamespace
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
        image=IMAGE,
        namespace="ops",
        pools=[ClearTaintsNodes(node_selector={"pool": "multus", "tier": "data"})],
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
    env = env_of(pod["containers"][0])
    assert (env["TAINT_KEY"], env["TAINT_EFFECT"]) == ("example.com/not-ready", "NoExecute")
    assert daemon_set["metadata"]["namespace"] == "ops"
    policy = helpers.find(
        manifests, "ValidatingAdmissionPolicy", "cleartaints-own-node-startup-taint"
    )
    assert (
        "system:serviceaccount:ops:cleartaints"
        in policy["spec"]["matchConditions"][0]["expression"]
    )


def test_node_name_comes_from_the_downward_api(pod: dict[str, Any]) -> None:
    (container,) = pod["containers"]
    env = env_of(container)
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert (env["TAINT_KEY"], env["TAINT_EFFECT"]) == ("multus/not-ready", "NoSchedule")
    assert pod["automountServiceAccountToken"] is True
    assert pod["hostNetwork"] is False


def test_waits_for_the_cni_plugins_and_files_the_nads_name_on_read_only_host_paths(
    pod: dict[str, Any],
) -> None:
    (container,) = pod["containers"]
    env = env_of(container)
    host_paths = {v["name"]: v.get("hostPath", {}).get("path") for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    marker_dir, _, marker_file = str(env["READY_MARKER"]).rpartition("/")
    assert marker_file == "ready"
    assert host_paths[mounts[marker_dir]["name"]] == "/var/lib/multus-eni"
    assert host_paths[mounts[str(env["CNI_CONF_DIR"])]["name"]] == "/etc/cni/net.d"
    assert host_paths[mounts[str(env["CNI_BIN_DIR"])]["name"]] == "/opt/cni/bin"
    assert all(mount["readOnly"] is True for mount in mounts.values())
    # The seed NADs chain ipvlan (IPAM whereabouts), sbr and multus-pod-ip; whereabouts reads
    # its kubeconfig.
    assert str(env["CNI_BINARIES"]).split() == ["ipvlan", "multus-pod-ip", "sbr", "whereabouts"]
    assert env["CNI_FILES"] == f"{env['CNI_CONF_DIR']}/whereabouts.d/whereabouts.kubeconfig"
    assert "v1.20.4" in str(env["CNI_BIN_HINT"])


def test_pod_ip_agent_marker_is_read_from_the_agents_host_directory(pod: dict[str, Any]) -> None:
    (container,) = pod["containers"]
    host_paths = {v["name"]: v.get("hostPath", {}).get("path") for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    marker_dir, _, marker_file = str(env_of(container)["POD_IPS_READY_MARKER"]).rpartition("/")
    assert f"{host_paths[mounts[marker_dir]['name']]}/{marker_file}" == AGENT_READY_MARKER
    assert mounts[marker_dir]["readOnly"] is True


def test_cni_files_outside_the_mounted_config_dir_are_refused() -> None:
    props = ClearTaintsProps(
        image=IMAGE, pools=[ClearTaintsNodes(cni_files=["/etc/whereabouts/kubeconfig"])]
    )
    with pytest.raises(ValueError, match=r"cni_files: /etc/whereabouts/kubeconfig is outside"):
        ClearTaintsChart(cdk8s.Testing.app(), "ct", props)


def test_marker_location_is_configurable(helpers: SimpleNamespace) -> None:
    props = ClearTaintsProps(
        image=IMAGE, ready_marker_dir="/run/eni-bootstrap", ready_marker_file="done"
    )
    manifests = cdk8s.Testing.synth(ClearTaintsChart(cdk8s.Testing.app(), "ct", props))
    pod = helpers.find(manifests, "DaemonSet")["spec"]["template"]["spec"]
    marker_dir, _, marker_file = str(env_of(pod["containers"][0])["READY_MARKER"]).rpartition("/")
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == marker_dir]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert (volume["hostPath"]["path"], marker_file) == ("/run/eni-bootstrap", "done")


def test_container_is_locked_down_and_bounded(pod: dict[str, Any]) -> None:
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


def test_image_is_amazon_linux_2023_pinned_and_run_with_bash(pod: dict[str, Any]) -> None:
    (container,) = pod["containers"]
    assert container["image"] == IMAGE
    assert re.fullmatch(r"public\.ecr\.aws/amazonlinux/amazonlinux:2023\.\d+\.\d{8}\.\d+", IMAGE)
    assert container["command"][:2] == ["/bin/bash", "-c"]


def test_policy_limits_the_service_account_to_its_own_node_and_the_startup_taint(
    cleartaints: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    policy = helpers.find(
        cleartaints, "ValidatingAdmissionPolicy", "cleartaints-own-node-startup-taint"
    )
    binding = helpers.find(
        cleartaints, "ValidatingAdmissionPolicyBinding", "cleartaints-own-node-startup-taint"
    )
    spec = policy["spec"]
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    # A PATCH is admitted as an UPDATE; nodes/status is not matched (RBAC does not grant it).
    assert (rule["resources"], rule["operations"]) == (["nodes"], ["UPDATE"])
    (condition,) = spec["matchConditions"]
    assert condition["expression"] == (
        "request.userInfo.username == 'system:serviceaccount:cleartaints:cleartaints'"
    )
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    assert f"request.userInfo.extra['{NODE_NAME_EXTRA}']" in variables["tokenNodes"]
    expressions = [v["expression"] for v in spec["validations"]]
    assert "object.metadata.name in variables.tokenNodes" in expressions
    assert (
        "variables.newTaints == variables.oldTaints.filter(t, t.key != 'multus/not-ready')"
        in expressions
    )
    for path in ("metadata.labels", "metadata.annotations", "spec.unschedulable"):
        assert (
            f"has(object.{path}) == has(oldObject.{path}) && "
            f"(!has(object.{path}) || object.{path} == oldObject.{path})"
        ) in expressions


# The script's waiting, run by bash with fake curl and sleep on the PATH: which file it waits
# for and what it says. The fake curl serves $NODE_JSON for a GET and logs each call; it does
# not model the API server (authentication, RBAC, the admission policy, the JSON patch's test
# step): tests/cluster_box/test_cleartaints.py runs the script against the real one.
FAKE_CURL = """#!/bin/bash
method=GET data=
while (($#)); do
  case $1 in
    -X) method=$2; shift ;;
    --data) data=$2; shift ;;
  esac
  shift
done
echo "$method $data" >> "$LOG_DIR/curl"
[[ $method == GET ]] && cat "$NODE_JSON"
exit 0
"""
# Idling (sleep infinity) ends the run; waiting in a loop is cut short after a few rounds.
FAKE_SLEEP = """#!/bin/sh
echo "$1" >> "$LOG_DIR/sleep"
[ "$1" = infinity ] && exit 0
[ "$(wc -l < "$LOG_DIR/sleep")" -lt 4 ] || kill -TERM "$PPID"
"""
# A node as the API server pretty-prints it for curl, with managedFields that mention taints.
NODE_JSON = """{
  "kind": "Node",
  "metadata": {
    "name": "%(node)s",
    "managedFields": [{"fieldsV1": {"f:spec": {"f:taints": {}}}}]
  },
  "spec": {
    "providerID": "aws:///us-west-2a/i-0123456789abcdef0",
    "taints": [
      %(taints)s
    ]
  },
  "status": {}
}
"""
STARTUP = '{"key": "multus/not-ready", "value": "true", "effect": "NoSchedule"}'


@pytest.fixture
def node(tmp_path: Path) -> SimpleNamespace:
    dirs = {d: tmp_path / d for d in ("bin", "cni", "cnibin", "eni", "podips", "log", "sa")}
    for directory in dirs.values():
        directory.mkdir()
    for name, text in (("curl", FAKE_CURL), ("sleep", FAKE_SLEEP)):
        (dirs["bin"] / name).write_text(text)
        (dirs["bin"] / name).chmod(0o755)
    (dirs["sa"] / "token").write_text("token")
    kubeconfig = dirs["cni"] / "whereabouts.d" / "whereabouts.kubeconfig"
    node_json = tmp_path / "node.json"

    def ready(*, skip: str = "") -> None:
        """Makes every readiness condition hold except `skip`."""
        for name in ("ipvlan", "sbr", "whereabouts", "multus-pod-ip"):
            if name != skip:
                (dirs["cnibin"] / name).write_text("")
        if skip != "kubeconfig":
            kubeconfig.parent.mkdir(exist_ok=True)
            kubeconfig.write_text("")
        if skip != "multus":
            (dirs["cni"] / "00-multus.conf").write_text("{}")
        if skip != "marker":
            (dirs["eni"] / "ready").write_text("")
        if skip != "pod-ips-marker":
            (dirs["podips"] / "ready").write_text("")

    def run(
        taints: tuple[str, ...] = (STARTUP,), **overrides: str
    ) -> subprocess.CompletedProcess[str]:
        node_json.write_text(NODE_JSON % {"node": NODE, "taints": ",\n      ".join(taints)})
        env = {
            "PATH": f"{dirs['bin']}:{os.environ['PATH']}",
            "LOG_DIR": str(dirs["log"]),
            "NODE_JSON": str(node_json),
            "SERVICE_ACCOUNT_DIR": str(dirs["sa"]),
            "KUBERNETES_SERVICE_HOST": "172.20.0.1",
            "KUBERNETES_SERVICE_PORT": "443",
            "NODE_NAME": NODE,
            "TAINT_KEY": "multus/not-ready",
            "TAINT_EFFECT": "NoSchedule",
            "CNI_CONF_DIR": str(dirs["cni"]),
            "CNI_BIN_DIR": str(dirs["cnibin"]),
            "CNI_BINARIES": "ipvlan sbr whereabouts multus-pod-ip",
            "CNI_BIN_HINT": "vpc-cni >= v1.20.4",
            "CNI_FILES": str(kubeconfig),
            "READY_MARKER": str(dirs["eni"] / "ready"),
            "POD_IPS_READY_MARKER": str(dirs["podips"] / "ready"),
            **overrides,
        }
        return subprocess.run(
            ["bash", "-c", CLEAR_TAINT_SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            timeout=10,
        )

    def log(name: str) -> list[str]:
        path = dirs["log"] / name
        return path.read_text().splitlines() if path.exists() else []

    return SimpleNamespace(run=run, log=log, ready=ready)


@pytest.mark.parametrize(
    ("skip", "reported"),
    [
        ("ipvlan", "CNI plugin ipvlan in /opt/cni/bin (vpc-cni >= v1.20.4)"),
        ("sbr", "CNI plugin sbr in /opt/cni/bin"),
        ("whereabouts", "CNI plugin whereabouts in /opt/cni/bin"),
        ("kubeconfig", "/whereabouts.d/whereabouts.kubeconfig"),
        ("multus", "Multus CNI config in /etc/cni/net.d"),
        ("marker", "Multus ENI bootstrap marker"),
        ("multus-pod-ip", "CNI plugin multus-pod-ip in /opt/cni/bin"),
        ("pod-ips-marker", "multus-pod-ips agent marker"),
    ],
)
def test_script_keeps_the_taint_while_anything_is_missing_and_says_what(
    node: SimpleNamespace, skip: str, reported: str
) -> None:
    node.ready(skip=skip)
    result = node.run()
    assert result.returncode == -signal.SIGTERM
    assert node.log("curl") == []
    assert f"{NODE}: waiting for " in result.stdout
    assert reported in result.stdout


def test_without_per_pod_address_networks_the_pod_ip_agent_is_not_waited_for(
    node: SimpleNamespace, helpers: SimpleNamespace
) -> None:
    chart = ClearTaintsChart(
        cdk8s.Testing.app(),
        "ct",
        ClearTaintsProps(image=IMAGE, pools=[ClearTaintsNodes(wait_for_pod_ips=False)]),
    )
    pod = helpers.find(cdk8s.Testing.synth(chart), "DaemonSet")["spec"]["template"]["spec"]
    assert env_of(pod["containers"][0])["POD_IPS_READY_MARKER"] == ""
    node.ready(skip="pod-ips-marker")

    result = node.run(POD_IPS_READY_MARKER="")

    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in node.log("curl")] == ["GET", "PATCH"]


def test_seed_attachments_name_the_plugins_the_chart_waits_for() -> None:
    from charts.nad_cni_configs import cni_binaries, cni_host_files

    assert cni_binaries(seed_attachments()) == [
        "ipvlan",
        "multus-pod-ip",
        "sbr",
        "whereabouts",
    ]
    assert cni_host_files(seed_attachments()) == [
        "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"
    ]


def test_a_pool_taint_without_value_is_tolerated_with_exists_and_no_value(
    helpers: SimpleNamespace,
) -> None:
    """The DaemonSet controller places the pod only where it tolerates every NoSchedule and
    NoExecute taint; a pool taint without value (core/v1: value omitted) is tolerated with
    operator Exists and no value, one with a value with Equal and that value."""
    props = ClearTaintsProps(
        image=IMAGE,
        pools=[
            ClearTaintsNodes(
                tolerations=[
                    NodeTaint(key="example.net/dataplane", value="", effect="NoExecute"),
                    NodeTaint(key="example.com/upf", value="true", effect="NoSchedule"),
                ]
            )
        ],
    )
    manifests = cdk8s.Testing.synth(ClearTaintsChart(cdk8s.Testing.app(), "ct", props))
    tolerations = helpers.find(manifests, "DaemonSet")["spec"]["template"]["spec"]["tolerations"]
    assert tolerations[1:] == [
        {"key": "example.net/dataplane", "operator": "Exists", "effect": "NoExecute"},
        {"key": "example.com/upf", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    ]
    assert helpers.tolerates(tolerations, "example.net/dataplane", "", "NoExecute")
    assert not helpers.tolerates(tolerations, "example.net/dataplane", "", "NoSchedule")
