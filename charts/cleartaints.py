"""cleartaints: lifts the Multus startup taint from a Karpenter node once it can serve Multus pods.

A node is ready for Multus pods when (1) every CNI plugin binary the NADs call is in the node's
CNI bin directory (AL2023 ships it empty: the VPC CNI installs ipvlan and sbr from v1.20.4 on,
Whereabouts installs its own), (2) the files those plugins read exist (Whereabouts'
kubeconfig), (3) Multus has written its CNI config and (4) the node bootstrap has attached and
named the Multus ENIs, which it signals with a readiness marker file, and (5) the multus-pod-ips
agent serves its CNI plugin (its own marker file). Each node pool with Multus networks gets its
own DaemonSet, on its nodes only, that waits for the binaries and files of that pool's networks
alone (a pool without networks has no startup taint and no DaemonSet). Until all hold, the node
keeps the startup taint and the scheduler keeps Multus workloads away from it; the pod's log
says every minute what is still missing.

The container is Amazon Linux 2023 (bash, curl) and talks to the API server with curl and its
own service account token. Its RBAC allows patching nodes; a ValidatingAdmissionPolicy narrows
that to removing this one taint from the node the pod runs on (the bound token names that node
in the request's user info, Kubernetes >= 1.32).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import cdk8s
import cdk8s_plus_28 as kplus
from constructs import Construct

from charts.building_blocks import (
    TAINT_EFFECTS,
    api_object,
    resources,
    restricted_security_context,
    select_pods,
    toleration,
)
from config.node_bootstrap_plan import READY_MARKER_PATH
from config.node_labels import (
    DEFAULT_NODE_POOL_NAME,
    KARPENTER_NODE_LABEL_KEY,
    KARPENTER_NODE_LABEL_VALUE,
    MULTUS_NOT_READY_TAINT,
    NodeTaint,
    pool_object_name,
)
from multus_pod_ips import AGENT_READY_MARKER

#: The user info extra in which the API server names the node of a pod's bound token.
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
_NOBODY = 65534
_HOST_CNI_DIR = "/host/etc/cni/net.d"
_HOST_CNI_BIN_DIR = "/host/opt/cni/bin"
_HOST_MARKER_DIR = "/host/multus-eni"
_HOST_POD_IPS_DIR = "/host/multus-pod-ips"

# Waits for every condition, then removes the taint with a JSON patch whose "test" step makes
# it fail (and retry) if the taint list changed since it was read. The API server pretty-prints
# JSON for curl's user agent, so whitespace is dropped before the taint list is parsed; taint
# fields never contain whitespace, '}' or ']'. Afterwards the container idles: a DaemonSet pod
# that exits is restarted forever.
CLEAR_TAINT_SCRIPT = """\
set -u
token_dir=${SERVICE_ACCOUNT_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}
api_host=$KUBERNETES_SERVICE_HOST
[[ $api_host == *:* ]] && api_host="[$api_host]"
api_url="https://$api_host:$KUBERNETES_SERVICE_PORT/api/v1/nodes/$NODE_NAME"

missing() {
  local name conf
  for name in $CNI_BINARIES; do
    if [[ ! -f $CNI_BIN_DIR/$name ]]; then
      echo "CNI plugin $name in /opt/cni/bin ($CNI_BIN_HINT)"
      return
    fi
  done
  for name in $CNI_FILES; do
    [[ -f $name ]] || { echo "${name#/host}"; return; }
  done
  for conf in "$CNI_CONF_DIR"/*multus*.conf "$CNI_CONF_DIR"/*multus*.conflist; do
    [[ -f $conf ]] && break
  done
  [[ -f $conf ]] || { echo "Multus CNI config in /etc/cni/net.d"; return; }
  [[ -f $READY_MARKER ]] || { echo "Multus ENI bootstrap marker ${READY_MARKER#/host}"; return; }
  [[ -z $POD_IPS_READY_MARKER || -f $POD_IPS_READY_MARKER ]] ||
    echo "multus-pod-ips agent marker ${POD_IPS_READY_MARKER#/host}"
}

api() {
  curl -sS --fail-with-body --max-time 15 --user-agent cleartaints \\
    --cacert "$token_dir/ca.crt" -H "Authorization: Bearer $(<"$token_dir/token")" "$@" "$api_url"
}

# A node that never gets ready is replaced: its NodeClaim (the node's owner, which Karpenter
# sets at registration) is deleted with its UID as precondition, and Karpenter drains the node,
# terminates the instance and launches another for the pods still pending. Karpenter itself
# replaces no node that has not initialized, and a pool with expire_after Never never expires.
replace_node() {
  local node claim uid owner
  node=$(api) || return 1
  node=${node//[[:space:]]/}
  owner='\\"kind\\":\\"NodeClaim\\",\\"name\\":\\"([^\\"]+)\\",\\"uid\\":\\"([^\\"]+)\\"'
  [[ $node =~ $owner ]] || {
    echo "$NODE_NAME: no NodeClaim owns the node; nothing to replace" >&2
    return 0
  }
  claim=${BASH_REMATCH[1]}
  uid=${BASH_REMATCH[2]}
  echo "$NODE_NAME: not ready after ${replace_after}s (waiting for $1);" \\
    "deleting NodeClaim $claim so that Karpenter replaces the node" >&2
  curl -sS --fail-with-body --max-time 15 --user-agent cleartaints -X DELETE \\
    --cacert "$token_dir/ca.crt" -H "Authorization: Bearer $(<"$token_dir/token")" \\
    -H "Content-Type: application/json" --data "{\\"preconditions\\":{\\"uid\\":\\"$uid\\"}}" \\
    "${api_url%/api/v1/nodes/*}/apis/karpenter.sh/v1/nodeclaims/$claim" >/dev/null
}

# Prints the JSON patch that removes the taint, or nothing when the node no longer has it.
taint_removal_patch() {
  local node taints entry index=0
  node=$(api) || return 1
  node=${node//[[:space:]]/}
  [[ $node =~ \\"spec\\":\\{[^}]*\\"taints\\":\\[([^]]*)\\] ]] || return 0
  taints=${BASH_REMATCH[1]}
  while [[ -n $taints ]]; do
    entry=${taints%%\\}*}
    if [[ $entry == *"\\"key\\":\\"$TAINT_KEY\\""* &&
      $entry == *"\\"effect\\":\\"$TAINT_EFFECT\\""* ]]; then
      printf '[{"op":"test","path":"/spec/taints/%d/key","value":"%s"},' "$index" "$TAINT_KEY"
      printf '{"op":"remove","path":"/spec/taints/%d"}]' "$index"
      return 0
    fi
    taints=${taints#*\\}}
    taints=${taints#,}
    index=$((index + 1))
  done
}

waited=0
replaced=
replace_after=${REPLACE_AFTER_SECONDS:-0}
while what=$(missing) && [[ -n $what ]]; do
  (( waited % 60 == 0 )) && echo "$NODE_NAME: waiting for $what"
  if [[ -z $replaced ]] && (( replace_after > 0 && waited >= replace_after )); then
    replace_node "$what" && replaced=1
  fi
  sleep 2
  waited=$((waited + 2))
done
until patch=$(taint_removal_patch) && { [[ -z $patch ]] ||
  api -X PATCH -H "Content-Type: application/json-patch+json" --data "$patch" >/dev/null; }; do
  echo "$NODE_NAME: removing $TAINT_KEY failed; retrying" >&2
  sleep 5
done
echo "Multus is ready on $NODE_NAME; taint $TAINT_KEY:$TAINT_EFFECT is gone"
exec sleep infinity
"""


@dataclass(frozen=True)
class ClearTaintsNodes:
    """One node pool's DaemonSet.
    pool: the pool's name (its DaemonSet is cleartaints, or cleartaints-<pool> for a pool
    other than the default one).
    cni_binaries: CNI plugins the NADs of the pool's networks call
    (network_attachments.cni_binaries).
    cni_files: host files those NADs' plugins read (network_attachments.cni_host_files) and the
    node-local CNI configs of the pool's node_prefix networks; each must be inside
    cni_config_dir, the only host config directory mounted.
    wait_for_pod_ips: wait for the multus-pod-ips agent's marker (the pool has a network whose
    pod addresses the agent assigns).
    node_selector: labels of the pool's nodes (which get the startup taint).
    tolerations: the pool's own taints, which its nodes carry beside the startup taint.
    replace_after_seconds: how long a node may wait for readiness before its NodeClaim is
    deleted, so that Karpenter replaces it (0: never)."""

    pool: str = DEFAULT_NODE_POOL_NAME
    cni_binaries: Sequence[str] = ()
    cni_files: Sequence[str] = ()
    wait_for_pod_ips: bool = True
    node_selector: Mapping[str, str] = field(
        default_factory=lambda: {KARPENTER_NODE_LABEL_KEY: KARPENTER_NODE_LABEL_VALUE}
    )
    tolerations: Sequence[NodeTaint] = ()
    replace_after_seconds: int = 0

    @property
    def daemon_set_name(self) -> str:
        return pool_object_name("cleartaints", self.pool)


#: The namespace the chart creates for its DaemonSets (the alerts' runbooks name it).
CLEARTAINTS_NAMESPACE = "cleartaints"


@dataclass(frozen=True)
class ClearTaintsProps:
    """image: Amazon Linux 2023 (needs bash and curl).
    pools: one DaemonSet per node pool with Multus networks.
    cni_binaries_hint: where missing binaries come from, printed while waiting for them.
    namespace: created by this chart; service_account: the pods', named in the policy.
    taint: the startup taint to remove (the NodePools').
    cni_config_dir / cni_bin_dir: host directories of CNI configs and plugin binaries.
    ready_marker_dir / ready_marker_file: host directory, mounted read-only, and the file in it
    that the node bootstrap writes once every Multus ENI is attached and named. The directory
    must be readable by any user: the container runs as nobody.
    pod_ips_marker_dir / pod_ips_marker_file: likewise for the multus-pod-ips agent, written
    once it serves the CNI plugin (which it installed before starting)."""

    image: str
    pools: Sequence[ClearTaintsNodes] = (ClearTaintsNodes(),)
    cni_binaries_hint: str = (
        "installed by the VPC CNI add-on v1.20.4 or later, Whereabouts and multus-pod-ips"
    )
    namespace: str = CLEARTAINTS_NAMESPACE
    service_account: str = "cleartaints"
    taint: NodeTaint = MULTUS_NOT_READY_TAINT
    cni_config_dir: str = "/etc/cni/net.d"
    cni_bin_dir: str = "/opt/cni/bin"
    ready_marker_dir: str = str(PurePosixPath(READY_MARKER_PATH).parent)
    ready_marker_file: str = PurePosixPath(READY_MARKER_PATH).name
    pod_ips_marker_dir: str = str(PurePosixPath(AGENT_READY_MARKER).parent)
    pod_ips_marker_file: str = PurePosixPath(AGENT_READY_MARKER).name


class ClearTaintsChart(cdk8s.Chart):
    """Namespace, RBAC (nodes get/patch), the policy that narrows it, and the daemonset."""

    def __init__(self, scope: Construct, construct_id: str, props: ClearTaintsProps) -> None:
        super().__init__(scope, construct_id)
        kplus.Namespace(self, "namespace", metadata=cdk8s.ApiObjectMetadata(name=props.namespace))
        service_account = kplus.ServiceAccount(
            self,
            "service-account",
            metadata=cdk8s.ApiObjectMetadata(name=props.service_account, namespace=props.namespace),
        )
        role = kplus.ClusterRole(
            self, "cluster-role", metadata=cdk8s.ApiObjectMetadata(name="cleartaints")
        )
        role.allow(["get", "patch"], kplus.ApiResource.NODES)
        # Deleting the NodeClaim of its own node only: the policy below checks the claim's node.
        role.allow(
            ["delete"],
            kplus.ApiResource.custom(api_group="karpenter.sh", resource_type="nodeclaims"),
        )
        binding = kplus.ClusterRoleBinding(
            self,
            "cluster-role-binding",
            metadata=cdk8s.ApiObjectMetadata(name="cleartaints"),
            role=role,
        )
        binding.add_subjects(service_account)
        _own_node_taint_only_policy(self, props)
        for nodes in props.pools:
            _daemon_set(self, props, nodes, service_account, _container_paths(props, nodes))


def _container_paths(props: ClearTaintsProps, nodes: ClearTaintsNodes) -> list[str]:
    config_dir = PurePosixPath(props.cni_config_dir)
    paths = []
    for host_file in nodes.cni_files:
        path = PurePosixPath(host_file)
        if not path.is_relative_to(config_dir):
            raise ValueError(
                f"cni_files: {host_file} is outside cni_config_dir {props.cni_config_dir}, the "
                "only host config directory cleartaints mounts"
            )
        paths.append(str(PurePosixPath(_HOST_CNI_DIR) / path.relative_to(config_dir)))
    return paths


def _unchanged(path: str) -> str:
    """CEL: the field at `path` is the same (or equally absent) before and after the update."""
    return (
        f"has(object.{path}) == has(oldObject.{path}) && "
        f"(!has(object.{path}) || object.{path} == oldObject.{path})"
    )


# Everything a node update by this service account could change besides the taints (status is
# a subresource that its RBAC does not grant).
_FROZEN_NODE_FIELDS = (
    "metadata.labels",
    "metadata.annotations",
    "metadata.finalizers",
    "metadata.ownerReferences",
    "spec.unschedulable",
    "spec.providerID",
    "spec.podCIDR",
    "spec.podCIDRs",
    "spec.configSource",
)


def _own_node_taint_only_policy(scope: Construct, props: ClearTaintsProps) -> None:
    name = "cleartaints-own-node-startup-taint"
    user = f"system:serviceaccount:{props.namespace}:{props.service_account}"
    taint_key = props.taint.key
    api_object(
        scope,
        "policy",
        api_version="admissionregistration.k8s.io/v1",
        kind="ValidatingAdmissionPolicy",
        name=name,
        body={
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["nodes"],
                        }
                    ]
                },
                "matchConditions": [
                    {
                        "name": "cleartaints-only",
                        "expression": f"request.userInfo.username == '{user}'",
                    }
                ],
                "variables": [
                    {
                        "name": "tokenNodes",
                        "expression": f"has(request.userInfo.extra) && '{NODE_NAME_EXTRA}' in "
                        f"request.userInfo.extra ? request.userInfo.extra['{NODE_NAME_EXTRA}'] "
                        ": []",
                    },
                    {
                        "name": "oldTaints",
                        "expression": "has(oldObject.spec.taints) ? oldObject.spec.taints : []",
                    },
                    {
                        "name": "newTaints",
                        "expression": "has(object.spec.taints) ? object.spec.taints : []",
                    },
                ],
                "validations": [
                    {
                        "expression": "object.metadata.name in variables.tokenNodes",
                        "message": f"{user} may only update the node its pod runs on",
                    },
                    {
                        "expression": "variables.newTaints == variables.oldTaints.filter(t, "
                        f"t.key != '{taint_key}')",
                        "message": f"{user} may only remove the {taint_key} taint",
                    },
                    *(
                        {
                            "expression": _unchanged(path),
                            "message": f"{user} may not change {path}",
                        }
                        for path in _FROZEN_NODE_FIELDS
                    ),
                ],
            }
        },
    )
    api_object(
        scope,
        "policy-binding",
        api_version="admissionregistration.k8s.io/v1",
        kind="ValidatingAdmissionPolicyBinding",
        name=name,
        body={"spec": {"policyName": name, "validationActions": ["Deny"]}},
    )
    _own_node_claim_only_policy(scope, user)


def _own_node_claim_only_policy(scope: Construct, user: str) -> None:
    """The remover may delete a NodeClaim only if it is the claim of the node its pod runs on
    (status.nodeName, which Karpenter sets at registration), whatever its RBAC says."""
    name = "cleartaints-own-node-claim"
    api_object(
        scope,
        "claim-policy",
        api_version="admissionregistration.k8s.io/v1",
        kind="ValidatingAdmissionPolicy",
        name=name,
        body={
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["karpenter.sh"],
                            "apiVersions": ["*"],
                            "operations": ["DELETE"],
                            "resources": ["nodeclaims"],
                        }
                    ]
                },
                "matchConditions": [
                    {
                        "name": "cleartaints-only",
                        "expression": f"request.userInfo.username == '{user}'",
                    }
                ],
                "validations": [
                    {
                        "expression": f"has(request.userInfo.extra) && '{NODE_NAME_EXTRA}' in "
                        "request.userInfo.extra && has(oldObject.status.nodeName) && "
                        f"oldObject.status.nodeName in request.userInfo.extra['{NODE_NAME_EXTRA}']",
                        "message": f"{user} may only delete the NodeClaim of the node its pod "
                        "runs on",
                    }
                ],
            }
        },
    )
    api_object(
        scope,
        "claim-policy-binding",
        api_version="admissionregistration.k8s.io/v1",
        kind="ValidatingAdmissionPolicyBinding",
        name=name,
        body={"spec": {"policyName": name, "validationActions": ["Deny"]}},
    )


def _daemon_set(
    scope: Construct,
    props: ClearTaintsProps,
    nodes: ClearTaintsNodes,
    service_account: kplus.ServiceAccount,
    container_files: Sequence[str],
) -> None:
    name = nodes.daemon_set_name
    daemon_set = kplus.DaemonSet(
        scope,
        pool_object_name("daemon-set", nodes.pool),
        metadata=cdk8s.ApiObjectMetadata(name=name, namespace=props.namespace),
        select=False,
        service_account=service_account,
        automount_service_account_token=True,
        security_context=kplus.PodSecurityContextProps(
            ensure_non_root=True, user=_NOBODY, group=_NOBODY
        ),
    )
    select_pods(daemon_set, {"app": name})
    if nodes.node_selector:
        daemon_set.scheduling.attract(
            kplus.Node.labeled(
                *(
                    kplus.NodeLabelQuery.is_(key, value)
                    for key, value in nodes.node_selector.items()
                )
            )
        )
    taint = props.taint
    daemon_set.scheduling.tolerate(
        kplus.Node.tainted(
            kplus.NodeTaintQuery.exists(taint.key, effect=TAINT_EFFECTS[taint.effect])
        )
    )
    # The pool's own taints (a UPF pool's NoSchedule) are on its nodes from the start, and the
    # DaemonSet controller places a pod only on a node whose NoSchedule and NoExecute taints it
    # all tolerates (kubernetes pkg/controller/daemon/daemon_controller.go, predicates:
    # FindMatchingUntoleratedTaint): without these, the startup taint would never go.
    for pool_taint in nodes.tolerations:
        daemon_set.scheduling.tolerate(kplus.Node.tainted(toleration(pool_taint)))
    container = daemon_set.add_container(
        name="cleartaints",
        image=props.image,
        image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
        command=["/bin/bash", "-c", CLEAR_TAINT_SCRIPT],
        env_variables={
            # From the API server's view of the pod, so no instance metadata access is needed.
            "NODE_NAME": kplus.EnvValue.from_field_ref(kplus.EnvFieldPaths.NODE_NAME),
            "TAINT_KEY": kplus.EnvValue.from_value(taint.key),
            "TAINT_EFFECT": kplus.EnvValue.from_value(taint.effect),
            "CNI_CONF_DIR": kplus.EnvValue.from_value(_HOST_CNI_DIR),
            "CNI_BIN_DIR": kplus.EnvValue.from_value(_HOST_CNI_BIN_DIR),
            "CNI_BINARIES": kplus.EnvValue.from_value(" ".join(nodes.cni_binaries)),
            "CNI_BIN_HINT": kplus.EnvValue.from_value(props.cni_binaries_hint),
            "CNI_FILES": kplus.EnvValue.from_value(" ".join(container_files)),
            "READY_MARKER": kplus.EnvValue.from_value(
                f"{_HOST_MARKER_DIR}/{props.ready_marker_file}"
            ),
            "REPLACE_AFTER_SECONDS": kplus.EnvValue.from_value(str(nodes.replace_after_seconds)),
            "POD_IPS_READY_MARKER": kplus.EnvValue.from_value(
                f"{_HOST_POD_IPS_DIR}/{props.pod_ips_marker_file}" if nodes.wait_for_pod_ips else ""
            ),
        },
        resources=resources(
            cpu_millis=10, cpu_limit_millis=100, memory_mib=32, memory_limit_mib=64
        ),
        security_context=restricted_security_context(_NOBODY),
    )
    for volume_name, host_path, mount_path in (
        ("cni-config", props.cni_config_dir, _HOST_CNI_DIR),
        ("cni-bin", props.cni_bin_dir, _HOST_CNI_BIN_DIR),
        ("ready-marker", props.ready_marker_dir, _HOST_MARKER_DIR),
        ("pod-ips-marker", props.pod_ips_marker_dir, _HOST_POD_IPS_DIR),
    ):
        volume = kplus.Volume.from_host_path(
            daemon_set,
            f"{volume_name}-volume",
            volume_name,
            path=host_path,
            # The pod may start before Multus or the bootstrap created the directory.
            type=kplus.HostPathVolumeType.DIRECTORY_OR_CREATE,
        )
        container.mount(mount_path, volume, read_only=True)
