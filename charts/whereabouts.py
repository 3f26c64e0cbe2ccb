"""Whereabouts v0.9.4: cluster-wide IPAM for the Multus interfaces (ranges in NADs).

The daemonset installs the whereabouts CNI binary and its kubeconfig on every node; the
reconciler releases addresses held by pods that no longer exist, on a cron schedule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, cast

import cdk8s
import cdk8s_plus_28 as kplus
from constructs import Construct

from charts.building_blocks import (
    custom_resource_definition,
    host_path_volume,
    object_schema,
    resource_schema,
    resources,
    restricted_security_context,
    roll_on_change,
    root_without_capabilities_security_context,
    select_pods,
    string_schema,
    toleration,
)
from config.node_labels import NodeTaint

_GROUP = "whereabouts.cni.cncf.io"
_VERSION = "v1alpha1"
_NOBODY = 65534

# The schemas below mirror the v0.9.4 CRDs field for field (descriptions left out): every
# field is typed, so no subtree needs x-kubernetes-preserve-unknown-fields.
_IP_POOL_SCHEMA = resource_schema(
    object_schema(
        {
            "allocations": {
                "type": "object",
                "additionalProperties": object_schema(
                    {"id": string_schema(), "ifname": string_schema(), "podref": string_schema()},
                    required=("id", "podref"),
                ),
            },
            "range": string_schema(),
        },
        required=("allocations", "range"),
    )
)
_OVERLAPPING_RANGE_RESERVATION_SCHEMA = resource_schema(
    object_schema(
        {"containerid": string_schema(), "ifname": string_schema(), "podref": string_schema()},
        required=("podref",),
    ),
    required=("spec",),
)
_NODE_SLICE_POOL_SCHEMA = resource_schema(
    object_schema({"range": string_schema(), "sliceSize": string_schema()}, ("range", "sliceSize")),
    status=object_schema(
        {
            "allocations": {
                "type": "array",
                "items": object_schema(
                    {"nodeName": string_schema(), "sliceRange": string_schema()},
                    required=("nodeName", "sliceRange"),
                ),
            }
        },
        required=("allocations",),
    ),
)


@dataclass(frozen=True)
class WhereaboutsProps:
    """image: the whereabouts v0.9.4 image (or a mirror of it).
    namespace: where the daemonset, reconciler and service account run.
    reconcile_schedule: cron expression (5 fields, UTC; v0.9.4 parses it with gocron's
    CronJob without seconds) of the IP reconciler, which frees addresses of pods that no longer
    exist, e.g. on a node that was terminated without CNI DEL. Upstream's daily 04:30 would
    keep them from reuse for up to a day; every 2 minutes reuses them within minutes.
    log_level: whereabouts' own levels, most to least verbose: debug, verbose, error, panic.
    reconciler_node_labels / reconciler_tolerations: where the reconciler runs. The stack
    gives the system nodes' label and taint, so an empty cluster keeps no Karpenter node (with
    its Multus ENIs) running just for the reconciler. Empty: any untainted node."""

    image: str
    namespace: str = "kube-system"
    reconcile_schedule: str = "*/2 * * * *"
    log_level: Literal["debug", "verbose", "error", "panic"] = "verbose"
    reconciler_node_labels: Mapping[str, str] = field(default_factory=dict)
    reconciler_tolerations: Sequence[NodeTaint] = ()


class WhereaboutsChart(cdk8s.Chart):
    """Whereabouts CRDs, RBAC, the install daemonset and the IP reconciler."""

    def __init__(self, scope: Construct, construct_id: str, props: WhereaboutsProps) -> None:
        super().__init__(scope, construct_id)
        _custom_resource_definitions(self)
        service_account = kplus.ServiceAccount(
            self,
            "service-account",
            metadata=cdk8s.ApiObjectMetadata(name="whereabouts", namespace=props.namespace),
        )
        _cluster_role(self, props.namespace, service_account)
        schedule = kplus.ConfigMap(
            self,
            "reconciler-schedule",
            metadata=cdk8s.ApiObjectMetadata(name="whereabouts-config", namespace=props.namespace),
            data={"cron-expression": props.reconcile_schedule},
        )
        _daemon_set(self, props, service_account)
        _reconciler(self, props, service_account, schedule)


def _custom_resource_definitions(scope: Construct) -> None:
    for kind, plural, schema in (
        ("IPPool", "ippools", _IP_POOL_SCHEMA),
        (
            "OverlappingRangeIPReservation",
            "overlappingrangeipreservations",
            _OVERLAPPING_RANGE_RESERVATION_SCHEMA,
        ),
        ("NodeSlicePool", "nodeslicepools", _NODE_SLICE_POOL_SCHEMA),
    ):
        custom_resource_definition(
            scope,
            f"{plural}-crd",
            group=_GROUP,
            kind=kind,
            plural=plural,
            singular=kind.lower(),
            version=_VERSION,
            schema=schema,
        )


def _cluster_role(scope: Construct, namespace: str, service_account: kplus.ServiceAccount) -> None:
    role = kplus.ClusterRole(
        scope, "cluster-role", metadata=cdk8s.ApiObjectMetadata(name="whereabouts-cni")
    )
    role.allow(
        ["get", "list", "watch", "create", "update", "patch", "delete"],
        *(
            kplus.ApiResource.custom(api_group=_GROUP, resource_type=plural)
            for plural in ("ippools", "overlappingrangeipreservations", "nodeslicepools")
        ),
    )
    role.allow(["get", "list", "watch"], kplus.ApiResource.PODS, kplus.ApiResource.NODES)
    role.allow(
        ["get", "list", "watch"],
        kplus.ApiResource.custom(
            api_group="k8s.cni.cncf.io", resource_type="network-attachment-definitions"
        ),
    )
    role.allow(
        ["create", "patch", "update", "get"],
        kplus.ApiResource.EVENTS,
        kplus.ApiResource.custom(api_group="events.k8s.io", resource_type="events"),
    )
    binding = kplus.ClusterRoleBinding(
        scope,
        "cluster-role-binding",
        metadata=cdk8s.ApiObjectMetadata(name="whereabouts"),
        role=role,
    )
    binding.add_subjects(service_account)
    # The plugin's leader election (pkg/storage/kubernetes/ipam.go, newLeaderElector) gets,
    # creates and updates one Lease in the namespace of its kubeconfig's context, which
    # install-cni.sh sets to WHEREABOUTS_NAMESPACE: this one. Upstream grants every verb on
    # leases cluster-wide, which would let a node's whereabouts token rewrite the nodes'
    # heartbeats in kube-node-lease and the controllers' leader leases.
    lease_role = kplus.Role(
        scope,
        "lease-role",
        metadata=cdk8s.ApiObjectMetadata(name="whereabouts-leader-election", namespace=namespace),
    )
    # ApiResource implements IApiResource; the Python stubs declare it for IApiEndpoint only.
    leases = cast(kplus.IApiResource, kplus.ApiResource.LEASES)
    lease_role.allow(["get", "create", "update"], leases)
    lease_binding = kplus.RoleBinding(
        scope,
        "lease-role-binding",
        metadata=cdk8s.ApiObjectMetadata(name="whereabouts-leader-election", namespace=namespace),
        role=lease_role,
    )
    lease_binding.add_subjects(service_account)


def _namespace_env() -> dict[str, kplus.EnvValue]:
    # Whereabouts keeps its IPPool objects in its own namespace.
    return {
        "WHEREABOUTS_NAMESPACE": kplus.EnvValue.from_field_ref(kplus.EnvFieldPaths.POD_NAMESPACE)
    }


def _daemon_set(
    scope: Construct, props: WhereaboutsProps, service_account: kplus.ServiceAccount
) -> None:
    daemon_set = kplus.DaemonSet(
        scope,
        "daemon-set",
        metadata=cdk8s.ApiObjectMetadata(
            name="whereabouts",
            namespace=props.namespace,
            labels={"app": "whereabouts", "tier": "node"},
        ),
        select=False,
        service_account=service_account,
        automount_service_account_token=True,
        host_network=True,
        security_context=kplus.PodSecurityContextProps(ensure_non_root=False),
    )
    select_pods(daemon_set, {"name": "whereabouts"})
    # Needed wherever Multus pods may run, in particular on Karpenter nodes that still carry the
    # multus/not-ready startup taint: the taint only goes once the node can serve Multus pods.
    daemon_set.scheduling.tolerate(kplus.Node.tainted(kplus.NodeTaintQuery.any()))
    # install-cni.sh copies the binary and writes whereabouts.d/whereabouts.kubeconfig from the
    # service account token; token-watcher.sh rewrites it when the token rotates.
    install_and_watch = (
        "SLEEP=false source /install-cni.sh\n"
        "/token-watcher.sh &\n"
        f"exec /ip-control-loop -log-level {props.log_level}\n"
    )
    container = daemon_set.add_container(
        name="whereabouts",
        image=props.image,
        image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
        command=["/bin/sh", "-c", install_and_watch],
        env_variables={
            "NODENAME": kplus.EnvValue.from_field_ref(kplus.EnvFieldPaths.NODE_NAME),
            **_namespace_env(),
        },
        resources=resources(
            cpu_millis=100, cpu_limit_millis=100, memory_mib=100, memory_limit_mib=200
        ),
        # Nothing here touches a network namespace or a netlink socket (the whereabouts binary
        # it installs runs later as a Multus delegate, in Multus' container): it writes into
        # host directories that root owns and calls the API server, so root without
        # capabilities suffices. The shell scripts write only below /host (busybox ash feeds
        # here-documents through pipes, not temporary files), so the image stays read-only.
        security_context=root_without_capabilities_security_context(),
    )
    container.mount("/host/opt/cni/bin", host_path_volume(scope, "cnibin", "/opt/cni/bin"))
    container.mount("/host/etc/cni/net.d", host_path_volume(scope, "cni-net-dir", "/etc/cni/net.d"))


def _reconciler(
    scope: Construct,
    props: WhereaboutsProps,
    service_account: kplus.ServiceAccount,
    schedule: kplus.ConfigMap,
) -> None:
    deployment = kplus.Deployment(
        scope,
        "reconciler",
        metadata=cdk8s.ApiObjectMetadata(
            name="whereabouts-reconciler",
            namespace=props.namespace,
            labels={"app": "whereabouts-reconciler"},
        ),
        # The reconciler has no leader election: never run two, not even during a rollout.
        replicas=1,
        strategy=kplus.DeploymentStrategy.recreate(),
        select=False,
        service_account=service_account,
        automount_service_account_token=True,
    )
    select_pods(deployment, {"name": "whereabouts-reconciler"})
    if props.reconciler_node_labels:
        deployment.scheduling.attract(
            kplus.Node.labeled(
                *(
                    kplus.NodeLabelQuery.is_(key, value)
                    for key, value in props.reconciler_node_labels.items()
                )
            )
        )
    for taint in props.reconciler_tolerations:
        deployment.scheduling.tolerate(kplus.Node.tainted(toleration(taint)))
    container = deployment.add_container(
        name="whereabouts-reconciler",
        image=props.image,
        image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
        command=["/ip-reconciler"],
        args=["-log-level", props.log_level],
        env_variables=_namespace_env(),
        resources=resources(
            cpu_millis=100, cpu_limit_millis=100, memory_mib=50, memory_limit_mib=50
        ),
        # It only talks to the API server and reads its schedule, so it needs no root.
        security_context=restricted_security_context(_NOBODY),
    )
    schedule_volume = kplus.Volume.from_config_map(
        scope,
        "reconciler-schedule-volume",
        schedule,
        name="cron-scheduler-configmap",
        default_mode=0o644,
        items={"cron-expression": kplus.PathMapping(path="config")},
    )
    # The reconciler reads its cron expression from /cron-schedule/config.
    container.mount("/cron-schedule", schedule_volume, read_only=True)
    roll_on_change(deployment, schedule)
