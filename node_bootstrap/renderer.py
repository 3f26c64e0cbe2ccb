"""Renders the EC2NodeClass user-data that attaches one ENI per Multus network to a node.

The node-side logic is the shell script next to this module; rendering only prepends the
deploy-time data it needs (cluster name, networks, per-AZ subnet and security-group IDs) and
wraps the result in the MIME multipart form that Karpenter merges with its own nodeadm part.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

from node_bootstrap.node_prefix import (
    CNI_CONFIG_DIR,
    IPAM_DATA_DIR,
    RUNTIME_CNI_CONFIG,
    NodePrefixNetwork,
    render_node_prefix_lines,
)

#: Directory the bootstrap keeps its state in; the readiness marker lives here.
READY_MARKER_DIR = "/var/lib/multus-eni"
#: Written only once every Multus interface is attached and up (one interface name per line).
READY_MARKER_PATH = f"{READY_MARKER_DIR}/ready"

#: Karpenter's cluster tag on every instance and primary ENI it launches; never on Multus ENIs.
CLUSTER_TAG_KEY = "eks:eks-cluster-name"
#: Tag keys the script puts on every ENI it creates. The owner tag (value: the cluster name) is
#: set only by the bootstrap, at creation; the node role's IAM touches no ENI without it.
OWNER_TAG_KEY = "multus-eni/cluster"
NETWORK_TAG_KEY = "multus-eni/network"
INSTANCE_TAG_KEY = "multus-eni/instance-id"
#: Makes the VPC CNI leave the ENI alone.
NO_MANAGE_TAG_KEY = "node.k8s.amazonaws.com/no_manage"

SCRIPT_NAME = "multus_eni_bootstrap.sh"
#: Included only when a network is in node_prefix mode.
NODE_PREFIX_SCRIPT_NAME = "node_prefix.sh"
_MAIN_CALL = '\nmain "$@"\n'
MIME_BOUNDARY = "==MULTUS-ENI-BOUNDARY=="

# Linux caps interface names at 15 characters; dots would clash with sysctl key syntax.
_INTERFACE_NAME = re.compile(r"[A-Za-z0-9_-]{1,15}")
# Network names end up in NetworkAttachmentDefinition names and in ENI tags.
_NETWORK_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_AZ_NAME = re.compile(r"[a-z0-9-]+")


@dataclass(frozen=True)
class MultusInterface:
    network: str  # Multus network name, e.g. "multus1"
    interface_name: str  # stable Linux name given to the ENI, e.g. "multus1" (<=15 chars)
    device_index: int  # EC2 device index to attach at (1, 2, ...)


@dataclass(frozen=True)
class AzPlacement:
    subnet_ids: Sequence[str]  # one per interface, same order as NodeBootstrapProps.interfaces
    security_group_ids: Sequence[str]  # security groups put on every Multus ENI in this AZ


@dataclass(frozen=True)
class NodeBootstrapProps:
    cluster_name: str
    interfaces: Sequence[MultusInterface]
    placements: Mapping[str, AzPlacement]  # AZ name -> placement
    node_prefix: Sequence[NodePrefixNetwork] = ()  # per (AZ, network) in node_prefix mode


def render_user_data(props: NodeBootstrapProps) -> str:
    """Returns the MIME multipart user-data; IDs may be CDK tokens and are embedded verbatim."""
    shell_script = _with_configuration(_bootstrap_script(), props)
    if MIME_BOUNDARY in shell_script:
        raise ValueError(f"props must not contain the MIME boundary {MIME_BOUNDARY}")
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\n'
        "\n"
        f"--{MIME_BOUNDARY}\n"
        'Content-Type: text/x-shellscript; charset="us-ascii"\n'
        "\n"
        f"{shell_script}"
        f"--{MIME_BOUNDARY}--\n"
    )


def _validate(props: NodeBootstrapProps) -> None:
    interfaces = props.interfaces
    if not interfaces:
        raise ValueError("interfaces: at least one Multus interface is required")
    for field in ("network", "interface_name", "device_index"):
        values = [getattr(interface, field) for interface in interfaces]
        duplicates = sorted({str(value) for value in values if values.count(value) > 1})
        if duplicates:
            raise ValueError(f"interfaces: duplicate {field} {', '.join(duplicates)}")
    for interface in interfaces:
        if not _NETWORK_NAME.fullmatch(interface.network):
            raise ValueError(
                f"interfaces: network {interface.network!r} must be a DNS label "
                "(lowercase letters, digits, '-')"
            )
        if not _INTERFACE_NAME.fullmatch(interface.interface_name):
            raise ValueError(
                f"interfaces: interface_name {interface.interface_name!r} must be 1-15 "
                "letters, digits, '_' or '-'"
            )
        if interface.device_index < 1:
            raise ValueError(
                f"interfaces: device_index {interface.device_index} of {interface.network} "
                "must be >= 1 (0 is the primary ENI)"
            )
    if not props.placements:
        raise ValueError("placements: at least one availability zone is required")
    for az, placement in props.placements.items():
        if not _AZ_NAME.fullmatch(az):
            raise ValueError(f"placements: {az!r} is not an availability zone name")
        if len(placement.subnet_ids) != len(interfaces):
            raise ValueError(
                f"placements[{az}]: {len(placement.subnet_ids)} subnet IDs for "
                f"{len(interfaces)} interfaces; give one subnet per interface, in order"
            )
        if not placement.security_group_ids:
            raise ValueError(f"placements[{az}]: at least one security group ID is required")
    _validate_node_prefix(props)


def _validate_node_prefix(props: NodeBootstrapProps) -> None:
    device_indexes = {i.interface_name: i.device_index for i in props.interfaces}
    for network in props.node_prefix:
        where = f"node_prefix[{network.availability_zone}/{network.interface_name}]"
        if device_indexes.get(network.interface_name) != network.device_index:
            raise ValueError(f"{where}: not an interface at device index {network.device_index}")
        if network.availability_zone not in props.placements:
            raise ValueError(f"{where}: {network.availability_zone} has no placement")


def _bootstrap_script() -> str:
    return _read(SCRIPT_NAME)


def _read(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def render_configuration(props: NodeBootstrapProps) -> str:
    """The data-only shell block that render_user_data puts in front of the script."""
    _validate(props)
    networks = "\n".join(
        f"{interface.network} {interface.interface_name} {interface.device_index}"
        for interface in props.interfaces
    )
    placements = "\n".join(
        f"{az} {','.join(placement.subnet_ids)} {','.join(placement.security_group_ids)}"
        for az, placement in props.placements.items()
    )
    return (
        f"# Generated by node_bootstrap.renderer; {SCRIPT_NAME} documents these.\n"
        f"MULTUS_CLUSTER_NAME={shlex.quote(props.cluster_name)}\n"
        f"MULTUS_OWNER_TAG_KEY={shlex.quote(OWNER_TAG_KEY)}\n"
        f"MULTUS_NETWORK_TAG_KEY={shlex.quote(NETWORK_TAG_KEY)}\n"
        f"MULTUS_INSTANCE_TAG_KEY={shlex.quote(INSTANCE_TAG_KEY)}\n"
        f"MULTUS_NO_MANAGE_TAG_KEY={shlex.quote(NO_MANAGE_TAG_KEY)}\n"
        f"MULTUS_NETWORKS={shlex.quote(networks)}\n"
        f"MULTUS_PLACEMENTS={shlex.quote(placements)}\n"
    ) + _node_prefix_configuration(props)


def _node_prefix_configuration(props: NodeBootstrapProps) -> str:
    if not props.node_prefix:
        return ""
    return (
        f"MULTUS_NODE_PREFIX={shlex.quote(render_node_prefix_lines(props.node_prefix))}\n"
        f"MULTUS_CNI_CONFIG_DIR={shlex.quote(CNI_CONFIG_DIR)}\n"
        f"MULTUS_IPAM_DATA_DIR={shlex.quote(IPAM_DATA_DIR)}\n"
        f"MULTUS_RUNTIME_CNI_CONFIG={shlex.quote(RUNTIME_CNI_CONFIG)}\n"
    )


def _with_configuration(script: str, props: NodeBootstrapProps) -> str:
    """Puts the data block right after the shebang and drops comments, blank lines and
    indentation.

    EC2 caps user-data at 16 KB including Karpenter's part; the comments and the layout serve
    the source file and are not needed on the node.
    """
    shebang, body = script.split("\n", 1)
    if props.node_prefix:
        # Its hooks must be defined before main runs, after the script's no-op ones.
        library = _code(_read(NODE_PREFIX_SCRIPT_NAME).split("\n", 1)[1])
        body = body.replace(_MAIN_CALL, library + _MAIN_CALL)
    return f"{shebang}\n{render_configuration(props)}{_code(body)}"


def _code(text: str) -> str:
    """The script without comments, blank lines and indentation (the scripts have no
    here-documents or multi-line strings, so none of it changes what bash runs; a test compares
    the parsed functions)."""
    lines = (line.lstrip(" ") for line in text.splitlines(keepends=True))
    return "".join(line for line in lines if line.strip() and not line.startswith("#"))
