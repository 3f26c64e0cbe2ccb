"""cleartaints rules stated exactly: the immutable DaemonSet selector, the pod's identity and
volumes, the admission policy's match rule, and the script's refusal to run without its
inputs. What the policy admits is asked of the real API server: tests/cluster_box/
test_cleartaints.py."""

from __future__ import annotations

import re
import subprocess
from dataclasses import FrozenInstanceError
from pathlib import PurePosixPath
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

# Kubernetes object names (DNS-1123 subdomain) and volume names (DNS-1123 label).
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# The "nobody" user and group of Amazon Linux 2023 (/etc/passwd, /etc/group).
NOBODY = 65534


@pytest.fixture(scope="module")
def manifests(seed_manifests: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return seed_manifests["cleartaints"]


@pytest.fixture(scope="module")
def daemon_set(manifests: list[dict[str, Any]], helpers: SimpleNamespace) -> dict[str, Any]:
    found: dict[str, Any] = helpers.find(manifests, "DaemonSet")
    return found


def test_every_object_has_a_valid_name_in_the_cleartaints_namespace(
    manifests: list[dict[str, Any]],
) -> None:
    cluster_scoped = {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for manifest in manifests:
        metadata = manifest["metadata"]
        assert DNS_SUBDOMAIN.fullmatch(metadata["name"]), metadata
        if manifest["kind"] in cluster_scoped:
            assert "namespace" not in metadata, metadata
        else:
            assert metadata["namespace"] == "cleartaints", metadata
    assert {m["kind"] for m in manifests} == cluster_scoped | {"ServiceAccount", "DaemonSet"}


def test_the_daemon_set_selects_its_pods_by_the_fixed_app_label(daemon_set: dict[str, Any]) -> None:
    # A DaemonSet's selector is immutable: any other label set would force delete + create.
    assert daemon_set["spec"]["selector"] == {"matchLabels": {"app": "cleartaints"}}
    assert daemon_set["spec"]["template"]["metadata"]["labels"]["app"] == "cleartaints"


def test_the_pod_runs_as_nobody_and_never_as_root(daemon_set: dict[str, Any]) -> None:
    pod = daemon_set["spec"]["template"]["spec"]
    assert {k: pod["securityContext"][k] for k in ("runAsNonRoot", "runAsUser", "runAsGroup")} == {
        "runAsNonRoot": True,
        "runAsUser": NOBODY,
        "runAsGroup": NOBODY,
    }
    (container,) = pod["containers"]
    assert (
        container["securityContext"]["runAsUser"],
        container["securityContext"]["runAsGroup"],
    ) == (
        NOBODY,
        NOBODY,
    )


def test_the_pinned_image_is_pulled_only_when_missing(daemon_set: dict[str, Any]) -> None:
    (container,) = daemon_set["spec"]["template"]["spec"]["containers"]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["name"] == "cleartaints"


def test_host_directories_are_mounted_even_before_they_exist(daemon_set: dict[str, Any]) -> None:
    # The pod may start before Multus or the node bootstrap created its directory; hostPath
    # type Directory would keep it from starting, DirectoryOrCreate does not.
    volumes = daemon_set["spec"]["template"]["spec"]["volumes"]
    types = {v["hostPath"]["path"]: v["hostPath"]["type"] for v in volumes}
    assert {"/etc/cni/net.d", "/opt/cni/bin", "/var/lib/multus-eni"} <= set(types)
    assert set(types.values()) == {"DirectoryOrCreate"}
    assert all(DNS_LABEL.fullmatch(v["name"]) for v in volumes), volumes
    assert len({v["name"] for v in volumes}) == len(volumes)


def test_the_policy_matches_updates_of_core_v1_nodes_only(
    manifests: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    spec = helpers.find(
        manifests, "ValidatingAdmissionPolicy", "cleartaints-own-node-startup-taint"
    )["spec"]
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
    ]


def test_the_script_stops_when_its_inputs_are_missing() -> None:
    # Without the API server's address (or the node name) the script must not guess a URL:
    # bash's nounset stops it at once instead of looping or patching the node list.
    result = subprocess.run(
        ["bash", "-c", CLEAR_TAINT_SCRIPT],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert "KUBERNETES_SERVICE_HOST: unbound variable" in result.stderr


def test_the_node_claim_is_the_one_kubernetes_puts_in_bound_tokens() -> None:
    # Kubernetes >= 1.32 (KEP-4193): the API server adds the node of a pod's bound service
    # account token to the request's user info under this extra key.
    assert NODE_NAME_EXTRA == "authentication.kubernetes.io/node-name"


def test_mount_paths_are_absolute_and_under_host(daemon_set: dict[str, Any]) -> None:
    (container,) = daemon_set["spec"]["template"]["spec"]["containers"]
    paths = [mount["mountPath"] for mount in container["volumeMounts"]]
    assert len(paths) == len(daemon_set["spec"]["template"]["spec"]["volumes"])
    assert all(PurePosixPath(path).is_relative_to("/host") for path in paths), paths


def test_props_are_immutable() -> None:
    props = ClearTaintsProps(image="public.ecr.aws/amazonlinux/amazonlinux:2023")
    with pytest.raises(FrozenInstanceError):
        props.namespace = "other"  # type: ignore[misc]


def test_the_pod_runs_as_the_identity_that_rbac_binds_and_the_policy_restricts(
    manifests: list[dict[str, Any]], daemon_set: dict[str, Any], helpers: SimpleNamespace
) -> None:
    # The policy matches requests by username, the service account's
    # system:serviceaccount:<namespace>:<name>. A pod running as another account would either
    # lack the RBAC grant or, worse, patch nodes with the grant but outside the policy.
    pod = daemon_set["spec"]["template"]["spec"]
    namespace = daemon_set["metadata"]["namespace"]
    account = helpers.find(manifests, "ServiceAccount")["metadata"]
    assert (account["namespace"], account["name"]) == (namespace, pod["serviceAccountName"])
    binding = helpers.find(manifests, "ClusterRoleBinding")
    assert [(s["kind"], s["namespace"], s["name"]) for s in binding["subjects"]] == [
        ("ServiceAccount", namespace, pod["serviceAccountName"])
    ]
    policy = helpers.find(
        manifests, "ValidatingAdmissionPolicy", "cleartaints-own-node-startup-taint"
    )
    username = f"system:serviceaccount:{namespace}:{pod['serviceAccountName']}"
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"] == f"request.userInfo.username == '{username}'"


def test_every_object_has_a_fixed_name_not_one_derived_from_the_construct_path(
    manifests: list[dict[str, Any]],
) -> None:
    # cdk8s derives a missing name from the construct path (plus a hash): a refactor of the
    # code would then apply each object as a new one and prune the old, e.g. briefly two
    # DaemonSets or a ClusterRoleBinding that points at a deleted role.
    names = {(m["kind"], m["metadata"]["name"]) for m in manifests}
    assert names == {
        ("Namespace", "cleartaints"),
        ("ServiceAccount", "cleartaints"),
        ("ClusterRole", "cleartaints"),
        ("ClusterRoleBinding", "cleartaints"),
        ("DaemonSet", "cleartaints"),
        ("ValidatingAdmissionPolicy", "cleartaints-own-node-startup-taint"),
        ("ValidatingAdmissionPolicyBinding", "cleartaints-own-node-startup-taint"),
        ("ValidatingAdmissionPolicy", "cleartaints-own-node-claim"),
        ("ValidatingAdmissionPolicyBinding", "cleartaints-own-node-claim"),
    }


def test_the_container_runs_the_readiness_script_with_bash(daemon_set: dict[str, Any]) -> None:
    # The script uses bash features ([[ ]], ${var//...}, BASH_REMATCH): sh would not do.
    (container,) = daemon_set["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["/bin/bash", "-c", CLEAR_TAINT_SCRIPT]
    assert "args" not in container


def test_it_tolerates_only_the_startup_taint_it_removes(
    daemon_set: dict[str, Any], helpers: SimpleNamespace
) -> None:
    # operator Exists: whatever value the NodePool gives the taint. Only its NoSchedule effect:
    # a NoExecute taint with the same key (someone draining the node) must still evict the pod.
    tolerations = daemon_set["spec"]["template"]["spec"]["tolerations"]
    assert tolerations == [
        {"key": "multus/not-ready", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert helpers.tolerates(tolerations, "multus/not-ready", "any", "NoSchedule")
    assert not helpers.tolerates(tolerations, "multus/not-ready", "true", "NoExecute")


def test_every_cni_file_is_waited_for_at_its_path_under_the_mounted_config_dir(
    helpers: SimpleNamespace,
) -> None:
    # The script iterates $CNI_FILES word by word; each host file under /etc/cni/net.d is seen
    # by the container under the mount of that directory.
    props = ClearTaintsProps(
        image="public.ecr.aws/amazonlinux/amazonlinux:2023",
        pools=[
            ClearTaintsNodes(
                cni_files=[
                    "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig",
                    "/etc/cni/net.d/up.conf",
                ]
            )
        ],
    )
    manifests = cdk8s.Testing.synth(ClearTaintsChart(cdk8s.Testing.app(), "ct", props))
    (container,) = helpers.find(manifests, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    mount = next(m for m in container["volumeMounts"] if m["name"] == "cni-config")["mountPath"]
    assert env["CNI_FILES"].split(" ") == [
        f"{mount}/whereabouts.d/whereabouts.kubeconfig",
        f"{mount}/up.conf",
    ]
    assert env["CNI_CONF_DIR"] == mount


def test_every_denial_names_the_account_it_refuses(
    manifests: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    # Without a message the API server answers with the bare CEL expression; the person who
    # reads the denial (in the pod's log) should learn whose request the policy refused.
    validations = helpers.find(
        manifests, "ValidatingAdmissionPolicy", "cleartaints-own-node-startup-taint"
    )["spec"]["validations"]
    assert validations
    for validation in validations:
        assert "system:serviceaccount:cleartaints:cleartaints" in validation["message"]
