"""The user-data Karpenter gives an Amazon Linux 2023 node, for the node box: each part of the
EC2NodeClass's userData (our Multus ENI bootstrap), then its own NodeConfig (nodeadm's
configuration of the cluster and the kubelet) as the last part, in one MIME multipart document
(last since v1.0.0, commit 06103f7 "consistent userData override ordering": nodeadm merges
later documents over earlier ones, so Karpenter's keys win).

Modelled on karpenter-provider-aws (v1), pkg/providers/amifamily/bootstrap/nodeadm.go and
mime/mime.go: the cluster's name, API endpoint, CA bundle and service CIDR; the kubelet's
clusterDNS, maxPods and registerWithTaints (the pool's taints, its startup taints and
karpenter.sh/unregistered); the pool's labels in one --node-labels flag (sorted, quoted as Go's
%q does); the archive with boundary "//", ours then Karpenter's, without carriage returns.
Not modelled: the labels and kubelet settings Karpenter derives from the instance type and the
NodeClaim (instance type, zone, capacity type; maxPods from the ENI limits: here a constant),
nor a kubelet block of the EC2NodeClass (ours sets none).
"""

from __future__ import annotations

import base64
import email
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

NODE_CONFIG_CONTENT_TYPE = "application/node.eks.aws"
UNREGISTERED_TAINT = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
NODEPOOL_LABEL = "karpenter.sh/nodepool"
BOUNDARY = "//"


@dataclass(frozen=True)
class ClusterDetails:
    """What Karpenter reads from the EKS cluster (stand-ins: the box reaches no cluster)."""

    name: str
    endpoint: str = "https://0123456789ABCDEF0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com"
    certificate_authority: bytes = (
        b"-----BEGIN CERTIFICATE-----\nbm9kZS1ib3g=\n-----END CERTIFICATE-----\n"
    )
    #: EKS's service range when the VPC is in 10.0.0.0/8 and the config names none.
    cidr: str = "172.20.0.0/16"
    cluster_dns: str = "172.20.0.10"


def node_config(
    cluster: ClusterDetails,
    *,
    labels: Mapping[str, str],
    taints: Sequence[Mapping[str, str]],
    max_pods: int = 110,
) -> str:
    """The NodeConfig YAML Karpenter puts first (keys sorted, as sigs.k8s.io/yaml writes them)."""
    document = {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "metadata": {"creationTimestamp": None},
        "spec": {
            "cluster": {
                "apiServerEndpoint": cluster.endpoint,
                "certificateAuthority": base64.b64encode(cluster.certificate_authority).decode(),
                "cidr": cluster.cidr,
                "name": cluster.name,
            },
            "containerd": {},
            "instance": {"localStorage": {}},
            "kubelet": {
                "config": {
                    "clusterDNS": [cluster.cluster_dns],
                    "maxPods": max_pods,
                    "registerWithTaints": [dict(taint) for taint in taints] + [UNREGISTERED_TAINT],
                },
                "flags": [node_labels_flag(labels)],
            },
        },
    }
    return "# Karpenter Generated NodeConfig\n" + yaml.safe_dump(document, sort_keys=True)


def node_labels_flag(labels: Mapping[str, str]) -> str:
    joined = ",".join(f"{key}={labels[key]}" for key in sorted(labels))
    return f"--node-labels={json.dumps(joined)}"  # Go's %q of a plain ASCII string


def user_data(node_config_yaml: str, custom_user_data: str) -> str:
    """Karpenter's archive: each part of the EC2NodeClass's MIME userData with its Content-Type
    and content as Go's multipart reader gives them, then its NodeConfig (karpenter-provider-aws
    v1.14.1 pkg/providers/amifamily/bootstrap/nodeadm.go: append(customEntries, NodeConfig))."""
    message = email.message_from_string(custom_user_data)
    if not message.is_multipart():
        raise ValueError("the EC2NodeClass userData is expected in MIME multipart form")
    parts = []
    for part in message.get_payload():
        assert isinstance(part, email.message.Message)
        parts.append((str(part["Content-Type"]), str(part.get_payload())))
    parts.append((NODE_CONFIG_CONTENT_TYPE, node_config_yaml))
    body = "".join(
        f"--{BOUNDARY}\nContent-Type: {content_type}\n\n{content}\n"
        for content_type, content in parts
    )
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"\n\n'
        f"{body}--{BOUNDARY}--\n"
    )
