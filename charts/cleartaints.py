"""cleartaints: lifts the Multus startup taint from a Karpenter node once it can serve Multus pods.

A node is ready for Multus pods when (1) Multus has written its CNI config on the node and
(2) the node bootstrap has attached and named the Multus ENIs, which it signals by writing a
readiness marker file. Until both hold, the node keeps the startup taint and the scheduler keeps
Multus workloads away from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import cdk8s
import cdk8s_plus_28 as kplus
from constructs import Construct

from charts.building_blocks import (
    KARPENTER_NODE_LABEL_KEY,
    KARPENTER_NODE_LABEL_VALUE,
    MULTUS_NOT_READY_TAINT,
    NodeTaint,
    resources,
    restricted_security_context,
    select_pods,
)
from multus_pod_ips import AGENT_READY_MARKER
from node_bootstrap.renderer import READY_MARKER_PATH

# alpine/k8s is a public Alpine image with kubectl and a shell; its tag is the kubectl version
# (1.34.x matches the cluster). registry.k8s.io/kubectl is distroless: no shell for the loop.
CLEARTAINTS_IMAGE = "alpine/k8s:1.34.1"

_NOBODY = 65534
_TAINT_EFFECTS = {
    "NoSchedule": kplus.TaintEffect.NO_SCHEDULE,
    "PreferNoSchedule": kplus.TaintEffect.PREFER_NO_SCHEDULE,
    "NoExecute": kplus.TaintEffect.NO_EXECUTE,
}
_HOST_CNI_DIR = "/host/etc/cni/net.d"
_HOST_MARKER_DIR = "/host/multus-eni"
_HOST_POD_IPS_DIR = "/host/multus-pod-ips"

# Both readiness conditions, then the taint removal; "taint ... not found" means another
# actor already removed it. Afterwards the container idles: a DaemonSet pod that exits is
# restarted forever.
CLEAR_TAINT_SCRIPT = """\
set -u
multus_configured() {
  for conf in "$CNI_CONF_DIR"/*multus*.conf "$CNI_CONF_DIR"/*multus*.conflist; do
    [ -f "$conf" ] && return 0
  done
  return 1
}
until multus_configured && [ -f "$READY_MARKER" ] && [ -f "$POD_IPS_READY_MARKER" ]; do
  sleep 2
done
until output=$(kubectl taint nodes "$NODE_NAME" "$TAINT-" 2>&1); do
  case "$output" in
    *taint*"not found"*) break ;;
  esac
  echo "$output" >&2
  sleep 5
done
echo "Multus is ready on $NODE_NAME; removed taint $TAINT"
exec sleep infinity
"""


@dataclass(frozen=True)
class ClearTaintsProps:
    """namespace: created by this chart.
    node_selector: labels of the nodes that get the startup taint (Karpenter's Multus nodes).
    taint: the startup taint to remove (the NodePool's).
    cni_config_dir: host directory where Multus writes its CNI config (00-multus.conf).
    ready_marker_dir / ready_marker_file: host directory, mounted read-only, and the file in it
    that the node bootstrap writes once every Multus ENI is attached and named. The directory
    must be readable by any user: the container runs as nobody.
    pod_ips_marker_dir / pod_ips_marker_file: likewise for the multus-pod-ips agent, written
    once it serves the CNI plugin (which it installed before starting)."""

    namespace: str = "cleartaints"
    node_selector: Mapping[str, str] = field(
        default_factory=lambda: {KARPENTER_NODE_LABEL_KEY: KARPENTER_NODE_LABEL_VALUE}
    )
    taint: NodeTaint = MULTUS_NOT_READY_TAINT
    cni_config_dir: str = "/etc/cni/net.d"
    ready_marker_dir: str = str(PurePosixPath(READY_MARKER_PATH).parent)
    ready_marker_file: str = PurePosixPath(READY_MARKER_PATH).name
    pod_ips_marker_dir: str = str(PurePosixPath(AGENT_READY_MARKER).parent)
    pod_ips_marker_file: str = PurePosixPath(AGENT_READY_MARKER).name


class ClearTaintsChart(cdk8s.Chart):
    """Namespace, RBAC limited to nodes get/patch, and the cleartaints daemonset."""

    def __init__(self, scope: Construct, id: str, props: ClearTaintsProps) -> None:
        super().__init__(scope, id)
        kplus.Namespace(self, "namespace", metadata=cdk8s.ApiObjectMetadata(name=props.namespace))
        service_account = kplus.ServiceAccount(
            self,
            "service-account",
            metadata=cdk8s.ApiObjectMetadata(name="cleartaints", namespace=props.namespace),
        )
        role = kplus.ClusterRole(
            self, "cluster-role", metadata=cdk8s.ApiObjectMetadata(name="cleartaints")
        )
        role.allow(["get", "patch"], kplus.ApiResource.NODES)
        binding = kplus.ClusterRoleBinding(
            self,
            "cluster-role-binding",
            metadata=cdk8s.ApiObjectMetadata(name="cleartaints"),
            role=role,
        )
        binding.add_subjects(service_account)
        _daemon_set(self, props, service_account)


def _daemon_set(
    scope: Construct, props: ClearTaintsProps, service_account: kplus.ServiceAccount
) -> None:
    daemon_set = kplus.DaemonSet(
        scope,
        "daemon-set",
        metadata=cdk8s.ApiObjectMetadata(name="cleartaints", namespace=props.namespace),
        select=False,
        service_account=service_account,
        automount_service_account_token=True,
        security_context=kplus.PodSecurityContextProps(
            ensure_non_root=True, user=_NOBODY, group=_NOBODY
        ),
    )
    select_pods(daemon_set, {"app": "cleartaints"})
    if props.node_selector:
        daemon_set.scheduling.attract(
            kplus.Node.labeled(
                *(
                    kplus.NodeLabelQuery.is_(key, value)
                    for key, value in props.node_selector.items()
                )
            )
        )
    taint = props.taint
    daemon_set.scheduling.tolerate(
        kplus.Node.tainted(
            kplus.NodeTaintQuery.exists(taint.key, effect=_TAINT_EFFECTS[taint.effect])
        )
    )
    container = daemon_set.add_container(
        name="cleartaints",
        image=CLEARTAINTS_IMAGE,
        image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
        command=["/bin/sh", "-c", CLEAR_TAINT_SCRIPT],
        env_variables={
            # From the API server's view of the pod, so no instance metadata access is needed.
            "NODE_NAME": kplus.EnvValue.from_field_ref(kplus.EnvFieldPaths.NODE_NAME),
            "TAINT": kplus.EnvValue.from_value(f"{props.taint.key}:{props.taint.effect}"),
            "CNI_CONF_DIR": kplus.EnvValue.from_value(_HOST_CNI_DIR),
            "READY_MARKER": kplus.EnvValue.from_value(
                f"{_HOST_MARKER_DIR}/{props.ready_marker_file}"
            ),
            "POD_IPS_READY_MARKER": kplus.EnvValue.from_value(
                f"{_HOST_POD_IPS_DIR}/{props.pod_ips_marker_file}"
            ),
            # kubectl keeps its discovery cache under $HOME; the root filesystem is read-only.
            "HOME": kplus.EnvValue.from_value("/tmp"),
        },
        resources=resources(
            cpu_millis=10, cpu_limit_millis=100, memory_mib=32, memory_limit_mib=128
        ),
        security_context=restricted_security_context(_NOBODY),
    )
    for name, host_path, mount_path in (
        ("cni-config", props.cni_config_dir, _HOST_CNI_DIR),
        ("ready-marker", props.ready_marker_dir, _HOST_MARKER_DIR),
        ("pod-ips-marker", props.pod_ips_marker_dir, _HOST_POD_IPS_DIR),
    ):
        volume = kplus.Volume.from_host_path(
            scope,
            f"{name}-volume",
            name,
            path=host_path,
            # The pod may start before Multus or the bootstrap created the directory.
            type=kplus.HostPathVolumeType.DIRECTORY_OR_CREATE,
        )
        container.mount(mount_path, volume, read_only=True)
    scratch = kplus.Volume.from_empty_dir(
        scope, "tmp-volume", "tmp", size_limit=cdk8s.Size.mebibytes(16)
    )
    container.mount("/tmp", scratch)
