"""Multus CNI, thick plugin, as built by Amazon EKS (v4.1.4-eksbuild.3).

Multus delegates each pod's primary interface to the VPC CNI (10-aws.conflist) and adds the
secondary interfaces named in the pod's k8s.v1.cni.cncf.io/networks annotation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import cdk8s
import cdk8s_plus_28 as kplus
from constructs import Construct

from charts.building_blocks import (
    custom_resource_definition,
    host_path_volume,
    node_critical,
    object_schema,
    privileged_security_context,
    resource_schema,
    resources,
    roll_on_change,
    select_pods,
    string_schema,
)

MULTUS_IMAGE_TAG = "v4.1.4-eksbuild.3_thick"
# The daemon and the delegates of a 50-pod burst, with headroom (docs/node-capacity.md).
DAEMON_MEMORY_LIMIT_MIB = 1536

# Account of the Amazon EKS add-on image registry in each region, from the Amazon EKS User Guide
# page "View Amazon container image registries for Amazon EKS add-ons"
# (https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html).
EKS_ADDON_REGISTRY_ACCOUNTS: Mapping[str, str] = MappingProxyType(
    {
        "af-south-1": "877085696533",
        "ap-east-1": "800184023465",
        "ap-east-2": "533267051163",
        "ap-northeast-1": "602401143452",
        "ap-northeast-2": "602401143452",
        "ap-northeast-3": "602401143452",
        "ap-south-1": "602401143452",
        "ap-south-2": "900889452093",
        "ap-southeast-1": "602401143452",
        "ap-southeast-2": "602401143452",
        "ap-southeast-3": "296578399912",
        "ap-southeast-4": "491585149902",
        "ap-southeast-5": "151610086707",
        "ap-southeast-6": "333609536671",
        "ap-southeast-7": "121268973566",
        "ca-central-1": "602401143452",
        "ca-west-1": "761377655185",
        "cn-north-1": "918309763551",
        "cn-northwest-1": "961992271922",
        "eu-central-1": "602401143452",
        "eu-central-2": "900612956339",
        "eu-north-1": "602401143452",
        "eu-south-1": "590381155156",
        "eu-south-2": "455263428931",
        "eu-west-1": "602401143452",
        "eu-west-2": "602401143452",
        "eu-west-3": "602401143452",
        "eusc-de-east-1": "877088126301",
        "il-central-1": "066635153087",
        "me-central-1": "759879836304",
        "me-south-1": "558608220178",
        "mx-central-1": "730335286997",
        "sa-east-1": "602401143452",
        "us-east-1": "602401143452",
        "us-east-2": "602401143452",
        "us-gov-east-1": "151742754352",
        "us-gov-west-1": "013241004608",
        "us-west-1": "602401143452",
        "us-west-2": "602401143452",
    }
)

# Partitions whose endpoints do not end in amazonaws.com.
_DNS_SUFFIX_BY_REGION_PREFIX = {"cn-": "amazonaws.com.cn", "eusc-": "amazonaws.eu"}

_CNI_GROUP = "k8s.cni.cncf.io"
NAD_PLURAL = "network-attachment-definitions"
_SELECTOR = {"name": "multus"}  # the upstream selector, so an existing kube-multus-ds can adopt it

# Multus thick: the daemon writes 00-multus.conf in front of the VPC CNI's conflist and serves
# the CNI shim over a socket in /run/multus. Logs go to stderr only, so no log file grows inside
# the container.
_DAEMON_CONFIG = {
    "chrootDir": "/hostroot",
    "confDir": "/host/etc/cni/net.d",
    "logLevel": "verbose",
    "logToStderr": True,
    "socketDir": "/host/run/multus/",
    "cniVersion": "0.3.1",
    "cniConfigDir": "/host/etc/cni/net.d",
    "multusConfigFile": "auto",
    "multusAutoconfigDir": "/host/etc/cni/net.d",
    "multusMasterCNI": "10-aws.conflist",
}

_HOST_TO_CONTAINER = kplus.MountPropagation.HOST_TO_CONTAINER

# (volume name, host path, mount path in the daemon, propagation)
_DAEMON_HOST_MOUNTS: tuple[tuple[str, str, str, kplus.MountPropagation | None], ...] = (
    ("cni", "/etc/cni/net.d", "/host/etc/cni/net.d", None),
    # multus-daemon requires the CNI binary directory at the same path as on the host.
    ("cnibin", "/opt/cni/bin", "/opt/cni/bin", None),
    ("host-run", "/run", "/host/run", None),
    ("host-var-lib-cni-multus", "/var/lib/cni/multus", "/var/lib/cni/multus", None),
    ("host-var-lib-kubelet", "/var/lib/kubelet", "/var/lib/kubelet", _HOST_TO_CONTAINER),
    ("host-run-k8s-cni-cncf-io", "/run/k8s.cni.cncf.io", "/run/k8s.cni.cncf.io", None),
    ("host-run-netns", "/run/netns/", "/run/netns", _HOST_TO_CONTAINER),
    ("hostroot", "/", "/hostroot", _HOST_TO_CONTAINER),
)


def multus_image(region: str) -> str:
    """The EKS build of Multus in the add-on registry of `region` (a literal region name)."""
    account = EKS_ADDON_REGISTRY_ACCOUNTS.get(region)
    if account is None:
        raise ValueError(
            f"no Amazon EKS add-on image registry is known for region {region!r}: add its "
            "account from the EKS user guide page 'View Amazon container image registries for "
            "Amazon EKS add-ons' to charts.multus.EKS_ADDON_REGISTRY_ACCOUNTS"
        )
    suffix = next(
        (s for prefix, s in _DNS_SUFFIX_BY_REGION_PREFIX.items() if region.startswith(prefix)),
        "amazonaws.com",
    )
    return f"{account}.dkr.ecr.{region}.{suffix}/eks/multus-cni:{MULTUS_IMAGE_TAG}"


@dataclass(frozen=True)
class MultusProps:
    """region: the cluster's AWS region as a literal name (selects the image registry).
    image: a mirror of the Multus image; None: the EKS build in the region's add-on registry.
    namespace: namespace of the daemonset, its config map and service account."""

    region: str
    image: str | None = None
    namespace: str = "kube-system"


class MultusChart(cdk8s.Chart):
    """NetworkAttachmentDefinition CRD, RBAC, daemon config and the Multus thick daemonset."""

    def __init__(self, scope: Construct, construct_id: str, props: MultusProps) -> None:
        super().__init__(scope, construct_id)
        image = props.image or multus_image(props.region)
        _network_attachment_definition_crd(self)
        service_account = kplus.ServiceAccount(
            self,
            "service-account",
            metadata=cdk8s.ApiObjectMetadata(name="multus", namespace=props.namespace),
        )
        _cluster_role(self, service_account)
        daemon_config = kplus.ConfigMap(
            self,
            "daemon-config",
            metadata=cdk8s.ApiObjectMetadata(
                name="multus-daemon-config", namespace=props.namespace
            ),
            data={"daemon-config.json": json.dumps(_DAEMON_CONFIG, indent=2)},
        )
        _daemon_set(self, props.namespace, image, service_account, daemon_config)


def _network_attachment_definition_crd(scope: Construct) -> None:
    custom_resource_definition(
        scope,
        "network-attachment-definition-crd",
        group=_CNI_GROUP,
        kind="NetworkAttachmentDefinition",
        plural=NAD_PLURAL,
        singular="network-attachment-definition",
        short_names=("net-attach-def",),
        version="v1",
        schema=resource_schema(object_schema({"config": string_schema()})),
    )


def _cluster_role(scope: Construct, service_account: kplus.ServiceAccount) -> None:
    role = kplus.ClusterRole(scope, "cluster-role", metadata=cdk8s.ApiObjectMetadata(name="multus"))
    # The thick daemon only reads NADs (informer + lookups); nothing in it writes k8s.cni.cncf.io.
    role.allow(
        ["get", "list", "watch"],
        kplus.ApiResource.custom(api_group=_CNI_GROUP, resource_type=NAD_PLURAL),
    )
    role.allow(
        ["get", "list", "update", "watch"],
        kplus.ApiResource.PODS,
        kplus.ApiResource.custom(api_group="", resource_type="pods/status"),
    )
    role.allow(
        ["create", "patch", "update"],
        kplus.ApiResource.EVENTS,
        kplus.ApiResource.custom(api_group="events.k8s.io", resource_type="events"),
    )
    binding = kplus.ClusterRoleBinding(
        scope, "cluster-role-binding", metadata=cdk8s.ApiObjectMetadata(name="multus"), role=role
    )
    binding.add_subjects(service_account)


def _daemon_set(
    scope: Construct,
    namespace: str,
    image: str,
    service_account: kplus.ServiceAccount,
    daemon_config: kplus.ConfigMap,
) -> None:
    daemon_set = kplus.DaemonSet(
        scope,
        "daemon-set",
        metadata=cdk8s.ApiObjectMetadata(
            name="kube-multus-ds", namespace=namespace, labels={"app": "multus", "tier": "node"}
        ),
        select=False,
        service_account=service_account,
        automount_service_account_token=True,
        host_network=True,
        security_context=kplus.PodSecurityContextProps(ensure_non_root=False),
        termination_grace_period=cdk8s.Duration.seconds(10),
    )
    select_pods(daemon_set, _SELECTOR)
    # No pod with a Multus network (nor, through Multus, any pod) starts on a node without it;
    # the delegates inherit its OOM score adjustment.
    node_critical(daemon_set)
    # Every node may run pods with secondary interfaces, whatever taints it carries (Karpenter's
    # multus/not-ready startup taint, the system node group's karpenter.sh/controller taint...).
    daemon_set.scheduling.tolerate(kplus.Node.tainted(kplus.NodeTaintQuery.any()))
    daemon_set.scheduling.attract(
        kplus.Node.labeled(
            kplus.NodeLabelQuery.is_("kubernetes.io/os", "linux"),
            kplus.NodeLabelQuery.not_in("eks.amazonaws.com/compute-type", ["fargate"]),
        )
    )
    # The thick daemon resolves pod network namespaces through the host's PID namespace.
    # cdk8s-plus has no prop for it, and its L1 object maps patched fields by their L1 names
    # ("hostPid" is rendered as hostPID; a patch spelled hostPID would be dropped).
    cdk8s.ApiObject.of(daemon_set).add_json_patch(
        cdk8s.JsonPatch.add("/spec/template/spec/hostPid", True)
    )

    volumes = {
        name: host_path_volume(scope, name, host) for name, host, _, _ in _DAEMON_HOST_MOUNTS
    }
    daemon = daemon_set.add_container(
        name="kube-multus",
        image=image,
        image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
        command=["/usr/src/multus-cni/bin/multus-daemon"],
        env_variables={
            "MULTUS_NODE_NAME": kplus.EnvValue.from_field_ref(kplus.EnvFieldPaths.NODE_NAME)
        },
        # Every delegate plugin runs as a child of this container (docs/node-capacity.md,
        # "Sizing the Multus daemon"): no CPU limit, a memory limit for a 50-pod burst.
        resources=resources(
            cpu_millis=100,
            cpu_limit_millis=None,
            memory_mib=200,
            memory_limit_mib=DAEMON_MEMORY_LIMIT_MIB,
        ),
        security_context=privileged_security_context(),
    )
    for name, _, mount_path, propagation in _DAEMON_HOST_MOUNTS:
        daemon.mount(mount_path, volumes[name], propagation=propagation)
    config_volume = kplus.Volume.from_config_map(
        scope,
        "daemon-config-volume",
        daemon_config,
        name="multus-daemon-config",
        items={"daemon-config.json": kplus.PathMapping(path="daemon-config.json")},
    )
    daemon.mount("/etc/cni/net.d/multus.d", config_volume, read_only=True)
    roll_on_change(daemon_set, daemon_config)

    # Bidirectional so the shim copied here shows up in the host's /opt/cni/bin for the kubelet.
    daemon_set.add_init_container(
        name="install-multus-binary",
        image=image,
        image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
        command=[
            "cp",
            "-f",
            "/usr/src/multus-cni/bin/multus-shim",
            "/host/opt/cni/bin/multus-shim",
        ],
        resources=resources(
            cpu_millis=10, cpu_limit_millis=100, memory_mib=15, memory_limit_mib=50
        ),
        security_context=privileged_security_context(),
        volume_mounts=[
            kplus.VolumeMount(
                path="/host/opt/cni/bin",
                volume=volumes["cnibin"],
                propagation=kplus.MountPropagation.BIDIRECTIONAL,
            )
        ],
    )
