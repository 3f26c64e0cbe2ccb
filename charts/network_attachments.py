"""NetworkAttachmentDefinitions: one per (Multus network, availability zone), each carrying
the CNI chain charts/nad_cni_configs.py renders; networks in node_prefix mode get a NAD without
config instead (docs/node-prefix-mode.md).

Each network's NADs are a chart (one manifest, one CloudFormation resource) of their own
(`NetworkAttachmentsProps.of_manifest`), so removing a network from the config removes its
resource and CloudFormation's Delete of it deletes its NADs: an update of one manifest for all
networks would leave them, as kubectl's prune list has no custom resources (docs/operations.md,
"How an update is applied"). For the same reason the NADs of an AZ that can be removed (one
outside the control plane's AZs, which cannot: config/model/app_config.py) are a manifest per
network and AZ; the network's manifest keeps the rest under its first ID, so an upgrade from a
manifest per network changes nothing. `NetworkInventoryChart` keeps the NAD namespace, when the
app creates it, and a ConfigMap naming each network's NADs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import cdk8s
import cdk8s_plus_28 as kplus
from constructs import Construct

from charts.building_blocks import api_object, inventory_config_map
from charts.nad_cni_configs import NetworkAttachment, cni_configs


@dataclass(frozen=True)
class NetworkAttachmentsProps:
    """namespace: where the NADs live (pods elsewhere refer to them as <namespace>/<name>).
    create_namespace: the chart creates the namespace (for one Kubernetes does not have by
    itself); it then belongs to this chart, and removing the chart deletes it with its pods.
    node_local_names: NADs of node_prefix networks, which carry no config: Multus reads the CNI
    config whose "name" is the NAD's name from the node (the node bootstrap writes it).
    networks: each Multus network's NAD names, in multus.networks order (the inventory).
    manifests: the NAD names of each manifest (`of_manifest`), by its key: the network's name
    for its NADs in the control plane's AZs, <network>-<AZ> for those of another AZ."""

    namespace: str
    attachments: Sequence[NetworkAttachment]
    create_namespace: bool = False
    node_local_names: Sequence[str] = ()
    networks: Mapping[str, Sequence[str]] = field(default_factory=dict)
    manifests: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def of_manifest(self, key: str) -> NetworkAttachmentsProps:
        """The NADs of one manifest (its chart creates no namespace: the inventory does)."""
        names = set(self.manifests[key])
        return replace(
            self,
            attachments=[a for a in self.attachments if a.name in names],
            node_local_names=[n for n in self.node_local_names if n in names],
            create_namespace=False,
            networks={},
            manifests={key: self.manifests[key]},
        )


class NetworkAttachmentsChart(cdk8s.Chart):
    """One k8s.cni.cncf.io/v1 NetworkAttachmentDefinition per attachment."""

    def __init__(self, scope: Construct, construct_id: str, props: NetworkAttachmentsProps) -> None:
        super().__init__(scope, construct_id)
        configs = [config for a in props.attachments for config in cni_configs(a)]
        names = [config["name"] for config in configs]
        names += props.node_local_names
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"network attachment names must be unique, repeated: {duplicates}")
        namespace = (
            kplus.Namespace(
                self, "namespace", metadata=cdk8s.ApiObjectMetadata(name=props.namespace)
            )
            if props.create_namespace
            else None
        )
        for config in configs:
            nad = api_object(
                self,
                config["name"],
                api_version="k8s.cni.cncf.io/v1",
                kind="NetworkAttachmentDefinition",
                name=config["name"],
                namespace=props.namespace,
                body={"spec": {"config": json.dumps(config)}},
            )
            if namespace is not None:
                nad.add_dependency(namespace)
        for name in props.node_local_names:
            nad = _node_local_attachment(self, name, props.namespace)
            if namespace is not None:
                nad.add_dependency(namespace)


def _node_local_attachment(scope: Construct, name: str, namespace: str) -> cdk8s.ApiObject:
    """A NAD with an empty spec: Multus then loads the config file named after it from its
    confDir (the node's /etc/cni/net.d) instead of a config carried here."""
    return api_object(
        scope,
        name,
        api_version="k8s.cni.cncf.io/v1",
        kind="NetworkAttachmentDefinition",
        name=name,
        namespace=namespace,
        body={"spec": {}},
    )


#: The ConfigMap (in kube-system) that names each network's NADs.
INVENTORY_CONFIG_MAP = "multus-network-attachments"


class NetworkInventoryChart(cdk8s.Chart):
    """The NAD namespace when the app creates it, and a ConfigMap naming each network's NADs
    (the manifest the NADs of every network were in before each network had its own: it keeps
    its CloudFormation resource, so an upgrade updates it instead of deleting it, which would
    delete those NADs; and the namespace stays in it, as moving it would prune it)."""

    def __init__(self, scope: Construct, construct_id: str, props: NetworkAttachmentsProps) -> None:
        super().__init__(scope, construct_id)
        if props.create_namespace:
            kplus.Namespace(
                self, "namespace", metadata=cdk8s.ApiObjectMetadata(name=props.namespace)
            )
        inventory_config_map(
            self,
            INVENTORY_CONFIG_MAP,
            {
                network: [f"{props.namespace}/{name}" for name in names]
                for network, names in props.networks.items()
            },
        )
