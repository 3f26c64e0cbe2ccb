"""The renderer's contracts stated exactly: the MIME envelope cloud-init and Karpenter read, the
tag keys ENIs of earlier nodes already carry, and the edges of each props rule."""

from __future__ import annotations

import base64
import email
import subprocess
from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import pytest

from config.node_bootstrap_plan import AzPlacement, MultusInterface, NodeBootstrapProps
from node_bootstrap.renderer import (
    DUAL_STACK_SCRIPT_NAME,
    MIME_BOUNDARY,
    NETWORK_CARD_SCRIPT_NAME,
    NODE_PREFIX_SCRIPT_NAME,
    SCRIPT_NAME,
    UserDataTooLarge,
    deployed_size,
    pack,
    render_configuration,
    render_user_data,
    script_code,
)
from testing_support.multus_emulator import shell_part


def props(**changes: object) -> NodeBootstrapProps:
    base = NodeBootstrapProps(
        cluster_name="telco-cluster",
        interfaces=[
            MultusInterface(
                network="multus1",
                interface_name="multus1",
                device_index=1,
                security_group_ids=["sg-1"],
            )
        ],
        placements={"us-west-2a": AzPlacement(subnet_ids=["subnet-0a1"])},
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def shell_variables(configuration: str, *names: str) -> list[str]:
    printer = "printf '%s\\0'" + "".join(f' "${name}"' for name in names)
    completed = subprocess.run(
        ["bash", "-c", f"{configuration}\n{printer}"], capture_output=True, text=True, check=True
    )
    return completed.stdout.split("\0")[:-1]


def test_the_envelope_is_a_complete_mime_multipart_document() -> None:
    # RFC 2045/2046: a MIME-Version header, the declared boundary opening each part and closing
    # the body with "--boundary--"; cloud-init runs text/x-shellscript parts.
    user_data = render_user_data(props())
    message = email.message_from_string(user_data)
    assert message["MIME-Version"] == "1.0"
    assert message.get_boundary() == MIME_BOUNDARY
    (part,) = [part for part in message.walk() if not part.is_multipart()]
    assert part.get_content_type() == "text/x-shellscript"
    assert part.get_content_charset() == "us-ascii"
    assert user_data.endswith(f"\n--{MIME_BOUNDARY}--\n")
    assert not message.defects


def test_props_that_contain_the_boundary_are_refused() -> None:
    # The boundary inside the script would end the shell part early and corrupt the user-data.
    with pytest.raises(ValueError, match="must not contain the MIME boundary"):
        render_user_data(props(cluster_name=f"x{MIME_BOUNDARY}"))


def test_tag_keys_are_the_ones_enis_of_earlier_nodes_carry() -> None:
    # eks:eks-cluster-name is the tag EKS puts on cluster resources (the IAM policy conditions on
    # it); node.k8s.amazonaws.com/no_manage makes the VPC CNI leave an ENI alone. The multus-eni/
    # ones are this app's own: renaming them would orphan ENIs that running nodes created (and
    # the failure tag is the one docs/operations.md tells operators to look for).
    values = shell_variables(
        render_configuration(props()),
        "MULTUS_CLUSTER_TAG_KEY",
        "MULTUS_OWNER_TAG_KEY",
        "MULTUS_NETWORK_TAG_KEY",
        "MULTUS_INSTANCE_TAG_KEY",
        "MULTUS_NO_MANAGE_TAG_KEY",
        "MULTUS_FAILURE_TAG_KEY",
    )
    assert values == [
        "eks:eks-cluster-name",
        "multus-eni/cluster",
        "multus-eni/network",
        "multus-eni/instance-id",
        "node.k8s.amazonaws.com/no_manage",
        "multus-eni/bootstrap-failure",
    ]


def test_the_script_code_carries_no_comments_blank_lines_or_indentation() -> None:
    # EC2 caps user-data at 16 KB including Karpenter's part.
    lines = script_code(props()).splitlines()
    assert lines, "the script code is missing"
    assert [line for line in lines if not line.strip()] == []
    assert [line for line in lines if line.startswith(" ")] == []
    assert [line for line in lines if line.startswith("#")] == []


@pytest.mark.parametrize(
    ("interface", "accepted"),
    [
        (
            MultusInterface("multus1", "a" * 15, 1, security_group_ids=["sg-1"]),
            True,
        ),  # IFNAMSIZ 16 with the NUL byte
        (MultusInterface("multus1", "a" * 16, 1, security_group_ids=["sg-1"]), False),
        (MultusInterface("multus1", "", 1, security_group_ids=["sg-1"]), False),
        (
            MultusInterface("multus1", "n_1-A", 1, security_group_ids=["sg-1"]),
            False,
        ),  # the config's rule: [a-z][a-z0-9]*
        (
            MultusInterface("multus1", "multus.1", 1, security_group_ids=["sg-1"]),
            False,
        ),  # dots clash with sysctl keys
        (
            MultusInterface("a" * 63, "multus1", 1, security_group_ids=["sg-1"]),
            True,
        ),  # DNS label: at most 63
        (MultusInterface("a" * 64, "multus1", 1, security_group_ids=["sg-1"]), False),
        (MultusInterface("m", "multus1", 1, security_group_ids=["sg-1"]), True),
        (MultusInterface("multus-", "multus1", 1, security_group_ids=["sg-1"]), False),
        (MultusInterface("-multus", "multus1", 1, security_group_ids=["sg-1"]), False),
        (MultusInterface("multus1", "multus1", 7, security_group_ids=["sg-1"]), True),
    ],
)
def test_interface_rules_at_their_edges(interface: MultusInterface, accepted: bool) -> None:
    if accepted:
        assert render_configuration(props(interfaces=[interface]))
    else:
        with pytest.raises(ValueError, match="interfaces: "):
            render_configuration(props(interfaces=[interface]))


@pytest.mark.parametrize(
    ("zone", "accepted"),
    [("us-west-2a", True), ("use1-az1", True), ("us_west", False), ("", False)],
)
def test_zone_names(zone: str, accepted: bool) -> None:
    placements = {zone: AzPlacement(subnet_ids=["subnet-0a1"])}
    if accepted:
        assert (
            f"\n{zone} subnet-0a1"
            in "\n"
            + shell_variables(
                render_configuration(props(placements=placements)), "MULTUS_PLACEMENTS"
            )[0]
        )
    else:
        with pytest.raises(ValueError, match="is not an availability zone name"):
            render_configuration(props(placements=placements))


def test_distinct_interfaces_with_consecutive_indexes_pass() -> None:
    interfaces = [
        MultusInterface("multus1", "multus1", 1, security_group_ids=["sg-1"]),
        MultusInterface("multus2", "multus2", 2, security_group_ids=["sg-1"]),
        MultusInterface("multus3", "multus3", 3, security_group_ids=["sg-1"]),
    ]
    placement = AzPlacement(subnet_ids=["s-1", "s-2", "s-3"])
    configuration = render_configuration(
        props(interfaces=interfaces, placements={"us-west-2a": placement})
    )
    (networks,) = shell_variables(configuration, "MULTUS_NETWORKS")
    assert networks.splitlines() == [
        "multus1 multus1 1 false 9001 sg-1",
        "multus2 multus2 2 false 9001 sg-1",
        "multus3 multus3 3 false 9001 sg-1",
    ]


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (MultusInterface("multus1", "multus1", 1, security_group_ids=["sg-1"]), "device_index"),
        (AzPlacement(subnet_ids=["subnet-0a1"]), "subnet_ids"),
        (props(), "cluster_name"),
    ],
)
def test_props_are_immutable_values(value: object, field: str) -> None:
    # What was validated is what gets rendered: props cannot change after construction.
    with pytest.raises(FrozenInstanceError):
        setattr(value, field, None)


def test_the_shell_part_is_ascii_as_its_header_declares() -> None:
    assert shell_part(render_user_data(props())).isascii()


def test_user_data_of_exactly_12_kib_passes_and_one_byte_more_is_refused() -> None:
    # docs/node-bootstrap.md: synth refuses user-data over 12 KiB (EC2's 16 KB limit minus
    # Karpenter's part). The cluster name is in the unpacked data block: one character, one byte.
    short = deployed_size(props(cluster_name="c"))
    at_limit = "c" * (12 * 1024 - short + 1)
    assert deployed_size(props(cluster_name=at_limit)) == 12 * 1024
    assert render_user_data(props(cluster_name=at_limit))
    with pytest.raises(UserDataTooLarge, match="over the 12288 bytes"):
        render_user_data(props(cluster_name=at_limit + "c"))


def test_the_size_is_counted_with_the_longest_ids_aws_gives() -> None:
    # EC2 resource IDs carry 8 or (the long format) 17 hex digits; tokens stand for either.
    tokens = AzPlacement(subnet_ids=["${Token[TOKEN.1]}"])
    longest = AzPlacement(subnet_ids=["subnet-" + "0" * 17])
    (interface,) = props().interfaces
    token_group = replace(interface, security_group_ids=["${Token[TOKEN.2]}", "sg-1"])
    longest_group = replace(interface, security_group_ids=["sg-" + "0" * 17] * 2)
    with_tokens = props(placements={"us-west-2a": tokens}, interfaces=[token_group])
    with_longest = props(placements={"us-west-2a": longest}, interfaces=[longest_group])
    assert deployed_size(with_tokens) == len(render_user_data(with_longest).encode())


def test_the_packed_code_is_gzip_at_maximum_compression_without_a_timestamp() -> None:
    # RFC 1952 2.3.1: MTIME 0 means no time stamp (a re-synth gives the same user-data, so
    # Karpenter sees no drift); XFL 2 means maximum compression (the 12 KiB budget).
    header = base64.b64decode(pack(script_code(props())))[:10]
    assert header[:3] == b"\x1f\x8b\x08"  # gzip magic, deflate
    assert header[4:8] == b"\0\0\0\0"
    assert header[8] == 2


def test_the_packed_code_is_in_base64_lines_of_76_characters() -> None:
    # RFC 2045 6.8: base64 in lines of at most 76 characters; shorter ones only add newline
    # bytes to the budget.
    lines = pack(script_code(props())).split("\n")
    assert len(lines) > 2
    assert {len(line) for line in lines[:-1]} == {76}
    assert 0 < len(lines[-1]) <= 76


@pytest.mark.parametrize(
    "name",
    [SCRIPT_NAME, NODE_PREFIX_SCRIPT_NAME, DUAL_STACK_SCRIPT_NAME, NETWORK_CARD_SCRIPT_NAME],
)
def test_the_node_scripts_are_ascii_so_every_locale_reads_them_alike(name: str) -> None:
    assert (Path(__file__).parents[3] / "node_bootstrap" / name).read_bytes().isascii()
