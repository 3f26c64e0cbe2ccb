"""The node_prefix part of the user-data: data lines, its script only when needed, and that the
renderer's stripping leaves every function bash parses unchanged."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from config.node_bootstrap_plan import AzPlacement, NodePrefixNetwork
from node_bootstrap import render_user_data
from node_bootstrap.renderer import (
    NODE_CNI_CONFIG_SCRIPT_NAME,
    NODE_PREFIX_SCRIPT_NAME,
    SCRIPT_NAME,
    deployed_size,
    render_configuration,
)
from testing_support.multus_emulator import expanded_script
from tests.unit.node_bootstrap.test_renderer import (
    SHELLCHECK,
    deployed_interfaces,
    two_network_props,
)

NODE_DIR = "node_bootstrap"


def userplane(az: str = "us-west-2a", **changes: object) -> NodePrefixNetwork:
    network = NodePrefixNetwork(
        availability_zone=az,
        interface_name="multus2",
        device_index=2,
        prefix_count=4,
        cni_network_name=f"multus2-{az}",
        subnet_cidr="10.0.8.0/21",
        reservation_cidr="10.0.10.0/23",
        ipvlan_mode="l2",
    )
    return replace(network, **changes)  # type: ignore[arg-type]


def with_node_prefix() -> str:
    props = two_network_props(node_prefix=[userplane("us-west-2a"), userplane("us-west-2b")])
    return expanded_script(render_user_data(props))


def test_node_prefix_script_only_when_a_network_uses_it() -> None:
    # expanded_script: the user-data's shell part with its packed code unpacked
    plain = expanded_script(render_user_data(two_network_props()))
    assert "MULTUS_NODE_PREFIX" not in plain
    assert "node_prefix_settings()" not in plain
    script = with_node_prefix()
    assert "node_prefix_settings()" in script
    # The overrides come after the script's no-op hooks and before main runs.
    assert script.index("node_prefix_up() { :; }") < script.index("node_prefix_up() {\n")
    assert script.rstrip().endswith('main "$@"')


def test_data_line_per_az_with_the_gateway_and_config_file() -> None:
    configuration = render_configuration(two_network_props(node_prefix=[userplane("us-west-2a")]))
    assert (
        "MULTUS_NODE_PREFIX='us-west-2a multus2 4 multus2-us-west-2a 10.0.8.0/21 10.0.10.0/23 "
        "10.0.8.1 l2 90-node-prefix-eni2.conflist'"
    ) in configuration
    assert "MULTUS_IPAM_DATA_DIR=/run/cni/node-prefix-ipam" in configuration
    # containerd's CNI config directory on the EKS AMI, which Multus (confDir) reads as well,
    # and the file the VPC CNI installs there.
    assert "MULTUS_CNI_CONFIG_DIR=/etc/cni/net.d\n" in configuration
    assert "MULTUS_RUNTIME_CNI_CONFIG=10-aws.conflist\n" in configuration


@pytest.mark.parametrize(
    ("network", "message"),
    [
        (userplane(device_index=1), "not an interface at device index 1"),
        (userplane(az="us-west-2c"), "us-west-2c has no placement"),
        (userplane(prefix_count=0), "prefix_count must be at least 1"),
        (userplane(reservation_cidr="10.0.10.0/29"), "must be a /28 or larger inside"),
        (userplane(subnet_cidr="${Token[X]}"), "subnet_cidr must be a literal IPv4 CIDR"),
    ],
)
def test_bad_node_prefix_props_are_refused(network: NodePrefixNetwork, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render_user_data(two_network_props(node_prefix=[network]))


def functions(script: str) -> str:
    """Every function as bash parses it (declare -f), the script loaded without running main."""
    body = script.rstrip().removesuffix('main "$@"')
    completed = subprocess.run(
        ["bash", "-c", f"{body}\ndeclare -f"], capture_output=True, text=True, check=True
    )
    return completed.stdout


def test_stripping_comments_and_indentation_changes_no_function() -> None:
    rendered = with_node_prefix()
    shebang = rendered.split("\n", 1)[0]
    configuration = render_configuration(
        two_network_props(node_prefix=[userplane("us-west-2a"), userplane("us-west-2b")])
    )
    with open(f"{NODE_DIR}/{SCRIPT_NAME}") as main_file:
        main_script = main_file.read().split("\n", 1)[1]
    library = "".join(
        Path(NODE_DIR, name).read_text().split("\n", 1)[1]
        for name in (NODE_CNI_CONFIG_SCRIPT_NAME, NODE_PREFIX_SCRIPT_NAME)
    )
    unstripped = main_script.replace('\nmain "$@"\n', f'\n{library}\nmain "$@"\n')
    assert functions(rendered) == functions(f"{shebang}\n{configuration}{unstripped}")


def test_shellcheck_reports_nothing_but_the_overridden_hooks(tmp_path: Path) -> None:
    # As deployed: CloudFormation has replaced the tokens with plain IDs by then.
    deployed = AzPlacement(subnet_ids=["subnet-0b1", "subnet-0b2"])
    props = two_network_props(
        interfaces=deployed_interfaces(),
        placements={"us-west-2a": deployed, "us-west-2b": deployed},
        node_prefix=[userplane("us-west-2a"), userplane("us-west-2b")],
    )
    rendered = tmp_path / "rendered.sh"
    rendered.write_text(expanded_script(render_user_data(props)))
    checks = [
        # The script's no-op hooks are replaced by the node_prefix ones before main runs.
        [SHELLCHECK, "--exclude=SC2329", str(rendered)],
        # Alone, it uses globals and helpers of the script it is put into.
        [SHELLCHECK, "--exclude=SC2154,SC2034", f"{NODE_DIR}/{NODE_PREFIX_SCRIPT_NAME}"],
    ]
    for command in checks:
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        assert (completed.returncode, completed.stdout + completed.stderr) == (0, ""), command


def test_the_size_budget_counts_the_node_prefix_part() -> None:
    # The node_prefix data lines and library are in the user-data EC2 receives.
    # As two_network_props: two subnets per AZ, two groups on the first interface, one on the
    # second.
    longest = "sg-" + "0" * 17
    placements = {
        az: AzPlacement(subnet_ids=["subnet-" + "0" * 17] * 2)
        for az in ("us-west-2a", "us-west-2b")
    }
    interfaces = [
        replace(interface, security_group_ids=[longest] * len(interface.security_group_ids))
        for interface in two_network_props().interfaces
    ]
    networks = [userplane("us-west-2a"), userplane("us-west-2b")]
    deployed = two_network_props(interfaces=interfaces, placements=placements, node_prefix=networks)
    assert deployed_size(two_network_props(node_prefix=networks)) == len(
        render_user_data(deployed).encode()
    )
