from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cdk8s
import pytest

from charts.whereabouts import WhereaboutsChart, WhereaboutsProps
from config.images import ImagesConfig

WHEREABOUTS_IMAGE = ImagesConfig().whereabouts.reference

CRD_KINDS = ("IPPool", "OverlappingRangeIPReservation", "NodeSlicePool")


@pytest.fixture(scope="module")
def whereabouts(seed_manifests: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return seed_manifests["whereabouts"]


@pytest.fixture(scope="module")
def upstream_install(helpers: SimpleNamespace, reference_dir: Path) -> list[dict[str, Any]]:
    folder = reference_dir / "whereabouts-v0.9.4"
    return [
        *helpers.load_yaml_documents(folder / "daemonset-install.yaml"),
        *helpers.load_yaml_documents(folder / "reconciler-deployment.yaml"),
    ]


def test_crds_are_the_three_whereabouts_kinds(
    whereabouts: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    crds = helpers.find_all(whereabouts, "CustomResourceDefinition")
    assert sorted(crd["metadata"]["name"] for crd in crds) == [
        "ippools.whereabouts.cni.cncf.io",
        "nodeslicepools.whereabouts.cni.cncf.io",
        "overlappingrangeipreservations.whereabouts.cni.cncf.io",
    ]


@pytest.mark.parametrize("kind", CRD_KINDS)
def test_crd_matches_upstream_v0_9_4(
    kind: str,
    whereabouts: list[dict[str, Any]],
    helpers: SimpleNamespace,
    upstream_crds: dict[str, dict[str, Any]],
) -> None:
    upstream = upstream_crds[f"whereabouts.cni.cncf.io/{kind}"]
    (ours,) = [
        crd
        for crd in helpers.find_all(whereabouts, "CustomResourceDefinition")
        if crd["spec"]["names"]["kind"] == kind
    ]
    assert ours["metadata"]["name"] == upstream["metadata"]["name"]
    assert ours["spec"]["names"] == upstream["spec"]["names"]
    assert ours["spec"]["scope"] == upstream["spec"]["scope"]
    assert helpers.crd_schema(ours, "v1alpha1") == helpers.without_descriptions(
        helpers.crd_schema(upstream, "v1alpha1")
    )


def test_every_container_runs_the_pinned_release(
    whereabouts: list[dict[str, Any]],
    helpers: SimpleNamespace,
    upstream_install: list[dict[str, Any]],
) -> None:
    images = {
        container["image"]
        for kind in ("DaemonSet", "Deployment")
        for container in helpers.containers(helpers.find(whereabouts, kind))
    }
    upstream_repositories = {
        container["image"].rpartition(":")[0]
        for manifest in upstream_install
        if manifest["kind"] in ("DaemonSet", "Deployment")
        for container in helpers.containers(manifest)
    }
    assert images == {WHEREABOUTS_IMAGE}
    repository, _, tag = WHEREABOUTS_IMAGE.rpartition(":")
    assert upstream_repositories == {repository}
    assert tag == "v0.9.4"


def test_daemonset_tolerates_the_multus_startup_taint(
    whereabouts: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    pod = helpers.find(whereabouts, "DaemonSet")["spec"]["template"]["spec"]
    assert helpers.tolerates(pod["tolerations"], "multus/not-ready", "true", "NoSchedule")
    assert pod["hostNetwork"] is True
    assert pod["automountServiceAccountToken"] is True


def test_daemonset_installs_into_the_host_cni_directories(
    whereabouts: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    pod = helpers.find(whereabouts, "DaemonSet")["spec"]["template"]["spec"]
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    (container,) = pod["containers"]
    mounts = {m["mountPath"]: host_paths[m["name"]] for m in container["volumeMounts"]}
    assert mounts == {"/host/opt/cni/bin": "/opt/cni/bin", "/host/etc/cni/net.d": "/etc/cni/net.d"}
    assert "/install-cni.sh" in container["command"][-1]
    assert "/token-watcher.sh &" in container["command"][-1]


def test_reconciler_is_a_single_replica_that_never_overlaps(
    whereabouts: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    reconciler = helpers.find(whereabouts, "Deployment", "whereabouts-reconciler")
    assert reconciler["spec"]["replicas"] == 1
    assert reconciler["spec"]["strategy"] == {"type": "Recreate"}
    (container,) = reconciler["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["/ip-reconciler"]
    assert container["securityContext"]["runAsNonRoot"] is True


def test_reconciler_reads_the_configured_schedule(helpers: SimpleNamespace) -> None:
    props = WhereaboutsProps(
        image=WHEREABOUTS_IMAGE, reconcile_schedule="*/15 * * * *", log_level="error"
    )
    manifests = cdk8s.Testing.synth(WhereaboutsChart(cdk8s.Testing.app(), "w", props))
    config_map = helpers.find(manifests, "ConfigMap")
    assert config_map["data"] == {"cron-expression": "*/15 * * * *"}
    pod = helpers.find(manifests, "Deployment")["spec"]["template"]["spec"]
    (volume,) = pod["volumes"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert volume["configMap"]["items"] == [{"key": "cron-expression", "path": "config"}]
    (container,) = pod["containers"]
    (mount,) = container["volumeMounts"]
    assert (mount["name"], mount["mountPath"]) == (volume["name"], "/cron-schedule")
    assert container["args"] == ["-log-level", "error"]
    daemon = helpers.find(manifests, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    assert "-log-level error" in daemon["command"][-1]


def test_rbac_grants_what_upstream_grants(
    whereabouts: list[dict[str, Any]],
    helpers: SimpleNamespace,
    upstream_install: list[dict[str, Any]],
) -> None:
    """But leases: upstream grants every verb on them cluster-wide; the plugin needs get,
    create and update in its own namespace only (a Role; tests/cluster_box/test_permissions.py
    asks the real authorizer)."""
    ours = helpers.find(whereabouts, "ClusterRole", "whereabouts-cni")["rules"]
    upstream = helpers.find(upstream_install, "ClusterRole", "whereabouts-cni")["rules"]
    leases = {("coordination.k8s.io", "leases", "*")}
    assert helpers.rule_triples(ours) == helpers.rule_triples(upstream) - leases
    lease_role = helpers.find(whereabouts, "Role", "whereabouts-leader-election")
    assert lease_role["metadata"]["namespace"] == "kube-system"
    assert helpers.rule_triples(lease_role["rules"]) == {
        ("coordination.k8s.io", "leases", verb) for verb in ("get", "create", "update")
    }
    binding = helpers.find(whereabouts, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "whereabouts-cni"
    assert [(s["kind"], s["name"], s["namespace"]) for s in binding["subjects"]] == [
        ("ServiceAccount", "whereabouts", "kube-system")
    ]
    for kind in ("DaemonSet", "Deployment"):
        pod = helpers.find(whereabouts, kind)["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "whereabouts"


def test_reconciler_runs_on_the_system_nodes_and_the_daemonset_everywhere(
    whereabouts: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    reconciler = helpers.find(whereabouts, "Deployment", "whereabouts-reconciler")
    pod = reconciler["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [
        {"key": "karpenter.sh/controller", "operator": "In", "values": ["true"]}
    ]
    assert helpers.tolerates(pod["tolerations"], "karpenter.sh/controller", "true", "NoSchedule")
    assert not helpers.tolerates(pod["tolerations"], "multus/not-ready", "true", "NoSchedule")
    daemon = helpers.find(whereabouts, "DaemonSet")["spec"]["template"]["spec"]
    assert "affinity" not in daemon


def test_reconciler_without_placement_props_has_no_node_constraints(
    helpers: SimpleNamespace,
) -> None:
    props = WhereaboutsProps(image=WHEREABOUTS_IMAGE)
    manifests = cdk8s.Testing.synth(WhereaboutsChart(cdk8s.Testing.app(), "w", props))
    pod = helpers.find(manifests, "Deployment")["spec"]["template"]["spec"]
    assert "affinity" not in pod and "tolerations" not in pod


def test_reconciler_runs_every_two_minutes_by_default(
    seed_manifests: dict[str, list[dict[str, Any]]], helpers: SimpleNamespace
) -> None:
    # 5-field cron (v0.9.4: gocron CronJob without seconds): addresses of pods that are gone
    # (e.g. on a terminated node) are free again within minutes, not once a day at 04:30.
    config_map = helpers.find(seed_manifests["whereabouts"], "ConfigMap")
    assert config_map["data"] == {"cron-expression": "*/2 * * * *"}


def test_daemonset_runs_as_root_without_privileges_or_capabilities(
    whereabouts: list[dict[str, Any]], helpers: SimpleNamespace
) -> None:
    """What the DaemonSet's container runs needs no privilege (k8snetworkplumbingwg/whereabouts
    v0.9.4): script/install-cni.sh with script/lib.sh only writes below CNI_BIN_DIR
    (/host/opt/cni/bin/: `cp -f /whereabouts`) and CNI_CONF_DIR (/host/etc/cni/net.d:
    whereabouts.d/ with the kubeconfig, whereabouts.conf and nodename, chmod 600), host
    directories that root owns, so uid 0 writes them through the owner's permission bits without
    CAP_DAC_OVERRIDE; script/token-watcher.sh rewrites the same kubeconfig; ip-control-loop
    (cmd/controlloop/controlloop.go) only talks to the API server (rest.InClusterConfig and
    informers); nothing under cmd/ or pkg/ opens a network namespace or a netlink socket. The
    ipvlan and whereabouts plugins that do run in the Multus daemon's container."""
    (container,) = helpers.find(whereabouts, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert container["securityContext"] == {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsUser": 0,
        "runAsGroup": 0,
        "runAsNonRoot": False,
        "readOnlyRootFilesystem": True,
    }
    # The only writes go to the host directories mounted at lib.sh's default paths.
    mounted = {mount["mountPath"] for mount in container["volumeMounts"]}
    assert mounted == {"/host/opt/cni/bin", "/host/etc/cni/net.d"}
    assert not {"CNI_BIN_DIR", "CNI_CONF_DIR"} & {env["name"] for env in container["env"]}
