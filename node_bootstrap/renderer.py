"""Renders the EC2NodeClass user-data that attaches one ENI per Multus network to a node.

The node-side logic is the shell script next to this module; rendering only prepends the
deploy-time data it needs (cluster name, networks with their security-group IDs, per-AZ subnet
IDs) and
wraps the result in the MIME multipart form that Karpenter merges with its own nodeadm part.
A pool's node profile adds a nodeadm NodeConfig part after the shell part
(node_bootstrap/node_profile.py).
"""

from __future__ import annotations

import base64
import gzip
import re
import shlex
import textwrap
from dataclasses import replace
from importlib import resources

from config.interface_names import interface_name_problem
from config.node_bootstrap_plan import (
    USER_DATA_LIMIT_BYTES,
    AzPlacement,
    MultusInterface,
    NodeBootstrapProps,
)
from config.path_mtu import MIN_MTU, VPC_MTU
from node_bootstrap.host_device import render_host_device_lines
from node_bootstrap.node_prefix import (
    CNI_CONFIG_DIR,
    IPAM_DATA_DIR,
    RUNTIME_CNI_CONFIG,
    render_node_prefix_lines,
)
from node_bootstrap.node_profile import bootstrap_variables, node_config_part

#: Tag keys the script puts on every ENI it creates. The cluster tag (the teardown sweeps ENIs
#: by it) is also Karpenter's, on every instance and primary ENI it launches; the owner tag
#: (value: the cluster name) is set only by the bootstrap, at creation, and the node role's IAM
#: touches no ENI without it.
CLUSTER_TAG_KEY = "eks:eks-cluster-name"
OWNER_TAG_KEY = "multus-eni/cluster"
NETWORK_TAG_KEY = "multus-eni/network"
INSTANCE_TAG_KEY = "multus-eni/instance-id"
#: Makes the VPC CNI leave the ENI alone.
NO_MANAGE_TAG_KEY = "node.k8s.amazonaws.com/no_manage"
#: Put on its own instance by a node whose bootstrap failed, before it powers off; the value is
#: the reason. The only tag the node role may put on an instance.
FAILURE_TAG_KEY = "multus-eni/bootstrap-failure"

SCRIPT_NAME = "multus_eni_bootstrap.sh"
#: Included only when a network is in node_prefix mode.
NODE_PREFIX_SCRIPT_NAME = "node_prefix.sh"
#: Included, before those two, when either is.
NODE_CNI_CONFIG_SCRIPT_NAME = "node_cni_config.sh"
#: Included only when a network is in host-device mode.
HOST_DEVICE_SCRIPT_NAME = "host_device.sh"
#: Included only when a network is dual-stack.
DUAL_STACK_SCRIPT_NAME = "dual_stack.sh"
#: Included only when the pool's node profile sets hugepages, kernel settings, a CPU count or
#: the interrupt placement.
NODE_PROFILE_SCRIPT_NAME = "node_profile.sh"
#: Included only when a network's ENIs go to a network card other than 0.
NETWORK_CARD_SCRIPT_NAME = "network_card.sh"
_MAIN_CALL = '\nmain "$@"\n'
MIME_BOUNDARY = "==MULTUS-ENI-BOUNDARY=="
#: Ends the here-document that carries the packed script, and the comment line before it.
PACKED_SCRIPT_END = "MULTUS_ENI_SCRIPT"
PACKED_SCRIPT_COMMENT = f"# {SCRIPT_NAME}, gzip + base64 (EC2 user-data is limited to 16 KB)"

# Longest IDs CloudFormation may put in place of the subnet and security-group tokens.
_DEPLOYED_SUBNET_ID = "subnet-" + "f" * 17
_DEPLOYED_SECURITY_GROUP_ID = "sg-" + "f" * 17

# Network names end up in NetworkAttachmentDefinition names and in ENI tags.
_NETWORK_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_AZ_NAME = re.compile(r"[a-z0-9-]+")


class UserDataTooLarge(ValueError):
    """The rendered user-data would not leave Karpenter room within EC2's limit."""


def render_user_data(props: NodeBootstrapProps) -> str:
    """Returns the MIME multipart user-data; IDs may be CDK tokens and are embedded verbatim.

    Raises UserDataTooLarge when, with the longest IDs CloudFormation may substitute, it would
    exceed USER_DATA_LIMIT_BYTES.
    """
    size = deployed_size(props)
    if size > USER_DATA_LIMIT_BYTES:
        raise UserDataTooLarge(
            f"the Multus node user-data would be {size} bytes, over the {USER_DATA_LIMIT_BYTES} "
            "bytes left next to Karpenter's part within EC2's 16 KB limit; reduce the number of "
            "availability_zones or multus.networks (every node carries each AZ's subnet IDs), "
            f"or shorten node_bootstrap/{SCRIPT_NAME}"
        )
    return _render(props)


def deployed_size(props: NodeBootstrapProps) -> int:
    """Bytes of the user-data once CloudFormation has put the (longest possible) IDs in."""
    deployed = replace(
        props,
        interfaces=[
            replace(
                interface,
                security_group_ids=[_DEPLOYED_SECURITY_GROUP_ID]
                * len(interface.security_group_ids),
            )
            for interface in props.interfaces
        ],
        placements={
            az: AzPlacement(subnet_ids=[_DEPLOYED_SUBNET_ID] * len(placement.subnet_ids))
            for az, placement in props.placements.items()
        },
    )
    return len(_render(deployed).encode())


def _render(props: NodeBootstrapProps) -> str:
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
        f"{node_config_part(props.node_profile, MIME_BOUNDARY) if props.node_profile else ''}"
        f"--{MIME_BOUNDARY}--\n"
    )


def _validate(props: NodeBootstrapProps) -> None:
    interfaces = props.interfaces
    if not interfaces:
        raise ValueError("interfaces: at least one Multus interface is required")
    # A host-device network has one interface per ENI; any other network has one.
    whole_enis = {eni.interface_name for eni in props.host_device}
    for field in ("network", "interface_name", "device_index"):
        values = [
            device_field(interface) if field == "device_index" else getattr(interface, field)
            for interface in interfaces
            if field != "network" or interface.interface_name not in whole_enis
        ]
        duplicates = sorted({str(value) for value in values if values.count(value) > 1})
        if duplicates:
            raise ValueError(f"interfaces: duplicate {field} {', '.join(duplicates)}")
    for interface in interfaces:
        if not _NETWORK_NAME.fullmatch(interface.network):
            raise ValueError(
                f"interfaces: network {interface.network!r} must be a DNS label "
                "(lowercase letters, digits, '-')"
            )
        problem = interface_name_problem(interface.interface_name)
        if problem:
            raise ValueError(f"interfaces: interface_name {problem}")
        if interface.device_index < 1:
            raise ValueError(
                f"interfaces: device_index {interface.device_index} of {interface.network} "
                "must be >= 1 (0 is the primary ENI)"
            )
        if not MIN_MTU <= interface.mtu <= VPC_MTU:
            raise ValueError(
                f"interfaces: mtu {interface.mtu} of {interface.network} must be "
                f"{MIN_MTU}-{VPC_MTU}"
            )
        if not interface.security_group_ids:
            raise ValueError(
                f"interfaces: {interface.network} has no security group ID (without one, EC2 "
                "puts the ENI in the VPC's default group)"
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
    _validate_node_local(props)


def _validate_node_local(props: NodeBootstrapProps) -> None:
    """Each node_prefix network and host-device ENI is one of the interfaces, in a placed AZ."""
    slots = {i.interface_name: (i.network_card, i.device_index) for i in props.interfaces}
    for kind, entries in (("node_prefix", props.node_prefix), ("host_device", props.host_device)):
        for entry in entries:
            where = f"{kind}[{entry.availability_zone}/{entry.interface_name}]"
            if slots.get(entry.interface_name) != (entry.network_card, entry.device_index):
                raise ValueError(
                    f"{where}: not an interface at device index {entry.device_index} of "
                    f"network card {entry.network_card}"
                )
            if entry.availability_zone not in props.placements:
                raise ValueError(f"{where}: {entry.availability_zone} has no placement")


def _bootstrap_script() -> str:
    return _read(SCRIPT_NAME)


def _read(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def render_configuration(props: NodeBootstrapProps) -> str:
    """The data-only shell block that render_user_data puts in front of the script."""
    _validate(props)
    networks = "\n".join(
        f"{interface.network} {interface.interface_name} {device_field(interface)} "
        f"{str(interface.source_dest_check).lower()} {interface.mtu} "
        f"{','.join(interface.security_group_ids)}"
        for interface in props.interfaces
    )
    placements = "\n".join(
        f"{az} {','.join(placement.subnet_ids)}" for az, placement in props.placements.items()
    )
    return (
        f"# Generated by node_bootstrap.renderer; {SCRIPT_NAME} documents these.\n"
        f"MULTUS_CLUSTER_NAME={shlex.quote(props.cluster_name)}\n"
        f"MULTUS_CLUSTER_TAG_KEY={shlex.quote(CLUSTER_TAG_KEY)}\n"
        f"MULTUS_OWNER_TAG_KEY={shlex.quote(OWNER_TAG_KEY)}\n"
        f"MULTUS_NETWORK_TAG_KEY={shlex.quote(NETWORK_TAG_KEY)}\n"
        f"MULTUS_INSTANCE_TAG_KEY={shlex.quote(INSTANCE_TAG_KEY)}\n"
        f"MULTUS_NO_MANAGE_TAG_KEY={shlex.quote(NO_MANAGE_TAG_KEY)}\n"
        f"MULTUS_FAILURE_TAG_KEY={shlex.quote(FAILURE_TAG_KEY)}\n"
        f"MULTUS_NETWORKS={shlex.quote(networks)}\n"
        f"MULTUS_PLACEMENTS={shlex.quote(placements)}\n"
    ) + _optional_configuration(props)


def device_field(interface: MultusInterface) -> str:
    """The interface's device field of MULTUS_NETWORKS: its device index, with ".<card>" on a
    network card other than 0 (network_card.sh translates it for EC2 and IMDS)."""
    if interface.network_card == 0:
        return str(interface.device_index)
    return f"{interface.device_index}.{interface.network_card}"


def _optional_configuration(props: NodeBootstrapProps) -> str:
    """The variables of the included libraries (none when no network needs one)."""
    return (
        _node_cni_configuration(props)
        + _node_prefix_configuration(props)
        + _host_device_configuration(props)
        + _dual_stack_configuration(props)
        + _connection_tracking_configuration(props)
        + _node_profile_configuration(props)
    )


def _node_profile_variables(props: NodeBootstrapProps) -> dict[str, str]:
    return bootstrap_variables(props.node_profile) if props.node_profile else {}


def _node_profile_configuration(props: NodeBootstrapProps) -> str:
    return "".join(
        f"MULTUS_NODE_PROFILE_{name}={shlex.quote(value)}\n"
        for name, value in _node_profile_variables(props).items()
    )


def _connection_tracking_configuration(props: NodeBootstrapProps) -> str:
    """One line per interface whose network sets timeouts: its name, then each timeout as the
    CreateNetworkInterface parameter's member and seconds (TcpEstablishedTimeout=3600)."""
    lines = [
        " ".join(
            [interface.interface_name]
            + [f"{member}={seconds}" for member, seconds in tracking.ec2_members()]
        )
        for interface in props.interfaces
        if (tracking := interface.connection_tracking) is not None
    ]
    if not lines:
        return ""
    return f"MULTUS_CONNECTION_TRACKING={shlex.quote(chr(10).join(lines))}\n"


def _node_cni_configuration(props: NodeBootstrapProps) -> str:
    """Where node_cni_config.sh installs the node-local CNI configs, and after which file."""
    if not (props.node_prefix or props.host_device):
        return ""
    return (
        f"MULTUS_CNI_CONFIG_DIR={shlex.quote(CNI_CONFIG_DIR)}\n"
        f"MULTUS_RUNTIME_CNI_CONFIG={shlex.quote(RUNTIME_CNI_CONFIG)}\n"
    )


def _node_prefix_configuration(props: NodeBootstrapProps) -> str:
    if not props.node_prefix:
        return ""
    return (
        f"MULTUS_NODE_PREFIX={shlex.quote(render_node_prefix_lines(props.node_prefix))}\n"
        f"MULTUS_IPAM_DATA_DIR={shlex.quote(IPAM_DATA_DIR)}\n"
    )


def _host_device_configuration(props: NodeBootstrapProps) -> str:
    if not props.host_device:
        return ""
    return f"MULTUS_HOST_DEVICE={shlex.quote(render_host_device_lines(props.host_device))}\n"


def _dual_stack_interfaces(props: NodeBootstrapProps) -> list[str]:
    return [interface.interface_name for interface in props.interfaces if interface.ipv6]


def _dual_stack_configuration(props: NodeBootstrapProps) -> str:
    interfaces = _dual_stack_interfaces(props)
    if not interfaces:
        return ""
    return f"MULTUS_IPV6_INTERFACES={shlex.quote(' '.join(interfaces))}\n"


def script_code(props: NodeBootstrapProps) -> str:
    """The code the node runs after the data block: the bootstrap script, with the node_prefix
    library when a network uses that mode, the host-device one when a network does (each after
    the node-local CNI config library), the dual-stack one when a network is dual-stack and
    the node-profile one when the profile gives it data (so other nodes' user-data stays as it
    was), without comments, blank lines and indentation."""
    body = _bootstrap_script().split("\n", 1)[1]
    libraries = []
    if props.node_prefix or props.host_device:
        libraries.append(NODE_CNI_CONFIG_SCRIPT_NAME)
    if props.node_prefix:
        libraries.append(NODE_PREFIX_SCRIPT_NAME)
    if props.host_device:
        libraries.append(HOST_DEVICE_SCRIPT_NAME)
    if _dual_stack_interfaces(props):
        libraries.append(DUAL_STACK_SCRIPT_NAME)
    if _node_profile_variables(props):
        libraries.append(NODE_PROFILE_SCRIPT_NAME)
    if any(interface.network_card for interface in props.interfaces):
        libraries.append(NETWORK_CARD_SCRIPT_NAME)
    for library in libraries:
        # Its hooks must be defined before main runs, after the script's no-op ones (and
        # each library's after those of the ones before it, which it may extend).
        code = _code(_read(library).split("\n", 1)[1])
        body = body.replace(_MAIN_CALL, code + _MAIN_CALL)
    return _code(body)


def pack(code: str) -> str:
    """gzip + base64, reproducible (no timestamp): equal input gives equal user-data, so a
    re-synth never makes Karpenter see drift."""
    packed = base64.b64encode(gzip.compress(code.encode(), compresslevel=9, mtime=0)).decode()
    return "\n".join(textwrap.wrap(packed, 76))


def _with_configuration(script: str, props: NodeBootstrapProps) -> str:
    """The data block after the shebang, then the code packed with gzip + base64.

    EC2 caps user-data at 16 KB including Karpenter's part; packed, the code takes about a
    third of its size. AL2023 has base64 and gunzip; the code runs in this shell (eval), so it
    sees the data block. A failed unpack stops the bootstrap before anything runs.
    """
    shebang, _ = script.split("\n", 1)
    return (
        f"{shebang}\n"
        "# shellcheck disable=SC2034  # the variables below are read by the packed code\n"
        f"{render_configuration(props)}"
        f"{PACKED_SCRIPT_COMMENT}\n"
        f"multus_eni_script=$(base64 -d <<'{PACKED_SCRIPT_END}' | gunzip\n"
        f"{pack(script_code(props))}\n"
        f"{PACKED_SCRIPT_END}\n"
        ") || { echo 'multus-eni: cannot unpack the bootstrap script' >&2; exit 1; }\n"
        'eval "$multus_eni_script"\n'
    )


def _code(text: str) -> str:
    """The script without comments, blank lines and indentation (the scripts have no
    here-documents or multi-line strings, so none of it changes what bash runs; a test compares
    the parsed functions)."""
    lines = (line.lstrip(" ") for line in text.splitlines(keepends=True))
    return "".join(line for line in lines if line.strip() and not line.startswith("#"))
