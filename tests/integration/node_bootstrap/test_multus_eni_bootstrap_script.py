"""Runs the rendered user-data with bash against moto_server and a fake IMDS (dry-host mode)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from botocore.credentials import Credentials

from config import parse_config
from config.connection_tracking import ConnectionTracking
from config.network_plan import network_plan
from config.node_bootstrap_plan import READY_MARKER_PATH, node_bootstrap_props
from node_bootstrap import CLUSTER_TAG_KEY, render_user_data
from node_bootstrap.renderer import (
    INSTANCE_TAG_KEY,
    NETWORK_TAG_KEY,
    NO_MANAGE_TAG_KEY,
    OWNER_TAG_KEY,
)
from testing_support.multus_emulator import (
    DROP_CONNECTION,
    NODE_CREDENTIALS,
    BootstrapRun,
    Ec2Emulator,
    EmulatedVpc,
    Fault,
)
from tests.integration.node_bootstrap.conftest import CLUSTER

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def single_network_user_data(vpc: EmulatedVpc) -> str:
    """multus1 only: for failure paths that one network shows as well as two."""
    props = vpc.bootstrap_props(CLUSTER)
    return render_user_data(
        replace(
            props,
            interfaces=props.interfaces[:1],
            placements={
                az: replace(placement, subnet_ids=placement.subnet_ids[:1])
                for az, placement in props.placements.items()
            },
        )
    )


#: multus2 routes through a transit gateway in this module's nodes: its ENI takes 8500 bytes.
NARROW_MTU = 8500
#: multus2's flows idle longer than EC2's defaults in this module's nodes.
LONG_IDLE = ConnectionTracking(tcp_established_timeout=3600, udp_stream_timeout=180)


@pytest.fixture(scope="module")
def fresh_node(emulator: Ec2Emulator, vpc: EmulatedVpc) -> tuple[str, BootstrapRun]:
    props = vpc.bootstrap_props(CLUSTER)
    first, second = props.interfaces
    user_data = render_user_data(
        replace(
            props,
            interfaces=[first, replace(second, mtu=NARROW_MTU, connection_tracking=LONG_IDLE)],
        )
    )
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    return instance_id, emulator.run_bootstrap(user_data, instance_id)


def multus_enis(emulator: Ec2Emulator, instance_id: str) -> dict[int | None, dict[str, Any]]:
    """The instance's ENIs other than the primary, by device index (None: not attached)."""
    enis = {}
    for eni in emulator.instance_enis(instance_id):
        index = eni["Attachment"]["DeviceIndex"] if eni["Status"] == "in-use" else None
        if index != 0:
            assert index not in enis, f"two ENIs at device index {index}"
            enis[index] = eni
    return enis


def marker(run: BootstrapRun) -> Path:
    return run.root / READY_MARKER_PATH.lstrip("/")


def unmanaged_network_file(mac: str) -> str:
    """The .network file that keeps systemd-networkd off the interface with this MAC."""
    return f"[Match]\nPermanentMACAddress={mac}\n\n[Link]\nUnmanaged=yes\n"


def test_fresh_node_gets_one_eni_per_network_in_its_az(
    emulator: Ec2Emulator, vpc: EmulatedVpc, fresh_node: tuple[str, BootstrapRun]
) -> None:
    instance_id, run = fresh_node
    assert run.returncode == 0, run.output

    enis = multus_enis(emulator, instance_id)
    assert sorted(enis, key=str) == [1, 2]
    for index, network in ((1, "multus1"), (2, "multus2")):
        eni = enis[index]
        assert eni["SubnetId"] == vpc.multus_subnets[network, "us-west-2a"]
        # Each ENI carries its own network's group only (the network stack makes one per
        # network; so does the emulator's VPC), never another network's.
        assert [group["GroupId"] for group in eni["Groups"]] == [vpc.security_group_ids[network]]
        assert eni["SourceDestCheck"] is False
        assert {tag["Key"]: tag["Value"] for tag in eni["TagSet"]} == {
            CLUSTER_TAG_KEY: CLUSTER,
            OWNER_TAG_KEY: CLUSTER,  # what the node role's IAM requires on every later call
            NETWORK_TAG_KEY: network,
            INSTANCE_TAG_KEY: instance_id,
            NO_MANAGE_TAG_KEY: "true",
        }


def test_every_attachment_is_set_to_delete_on_termination(
    emulator: Ec2Emulator, fresh_node: tuple[str, BootstrapRun]
) -> None:
    instance_id, run = fresh_node
    attachments = {
        eni["Attachment"]["AttachmentId"] for eni in multus_enis(emulator, instance_id).values()
    }
    delete_on_termination = {
        call.params["Attachment.AttachmentId"]
        for call in run.actions("ModifyNetworkInterfaceAttribute")
        if call.params.get("Attachment.DeleteOnTermination") == "true" and call.status == 200
    }
    assert delete_on_termination == attachments


def test_happy_path_costs_four_ec2_calls_per_network_one_curl_each_and_no_aws_cli(
    fresh_node: tuple[str, BootstrapRun],
) -> None:
    _, run = fresh_node
    assert sorted(call.action for call in run.ec2_calls) == sorted(
        ["CreateNetworkInterface", "AttachNetworkInterface"] * 2
        + ["ModifyNetworkInterfaceAttribute"] * 4
    )
    assert (run.ec2_client_processes, run.aws_cli_processes) == (8, 0)


def test_ec2_calls_are_signed_with_the_instance_profile_credentials_from_imds(
    fresh_node: tuple[str, BootstrapRun],
) -> None:
    _, run = fresh_node
    # The proxy answers AuthFailure to any request botocore's signer would not have signed
    # the same way with the credentials the fake IMDS served.
    assert run.ec2_calls
    assert {call.status for call in run.ec2_calls} == {200}


def test_credentials_never_appear_on_a_command_line_or_in_the_log(
    fresh_node: tuple[str, BootstrapRun],
) -> None:
    _, run = fresh_node
    assert "--aws-sigv4 aws:amz:us-west-2:ec2" in run.process_arguments
    log = (run.root / "var/log/multus-eni-bootstrap.log").read_text()
    for secret in (NODE_CREDENTIALS.secret_key, NODE_CREDENTIALS.token):
        assert secret not in run.process_arguments
        assert secret not in log


def test_calls_signed_with_other_credentials_are_refused_and_leave_nothing(
    emulator: Ec2Emulator, vpc: EmulatedVpc, single_network_user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    emulator.proxy.signer = Credentials(
        NODE_CREDENTIALS.access_key, "another-secret", NODE_CREDENTIALS.token
    )
    try:
        run = emulator.run_bootstrap(single_network_user_data, instance_id)
    finally:
        emulator.proxy.signer = NODE_CREDENTIALS

    assert run.returncode != 0
    # The create is refused, and so are the failure tag and the search for leftovers before
    # the node powers off.
    assert [(call.action, call.status) for call in run.ec2_calls] == [
        ("CreateNetworkInterface", 403),
        ("CreateTags", 403),
        ("DescribeNetworkInterfaces", 403),
    ]
    assert run.shutdown_requested
    assert "AuthFailure: signature does not match" in run.output
    assert multus_enis(emulator, instance_id) == {}
    assert not marker(run).exists()


def test_each_interface_is_named_by_mac_before_it_is_attached(
    emulator: Ec2Emulator, fresh_node: tuple[str, BootstrapRun]
) -> None:
    """The .link also sets the MTU, the network's: nodeadm's networkd file would have set the
    VPC's (awslabs/amazon-eks-ami nodeadm/cmd/nodeadm-internal/udev/eks-managed.network.tpl,
    [Link] MTUBytes=9001), and the unmanaged .network applies no [Link] setting."""
    instance_id, run = fresh_node
    attach_times = {
        call.params["NetworkInterfaceId"]: call.received_at
        for call in run.actions("AttachNetworkInterface")
    }
    for index, eni in multus_enis(emulator, instance_id).items():
        link_file = run.root / f"etc/systemd/network/10-multus-multus{index}.link"
        assert link_file.read_text() == (
            f"[Match]\nMACAddress={eni['MacAddress']}\n\n[Link]\nName=multus{index}\n"
            f"MTUBytes={9001 if index == 1 else NARROW_MTU}\n"
        )
        assert link_file.stat().st_mtime <= attach_times[eni["NetworkInterfaceId"]]
    host_commands = (run.root / "var/lib/multus-eni/host-commands").read_text().splitlines()
    assert host_commands.count("udevadm control --reload") == 2


def test_networkd_leaves_each_interface_alone(
    emulator: Ec2Emulator, fresh_node: tuple[str, BootstrapRun]
) -> None:
    """On AL2023 EKS nodes an ENA interface that appears during user-data is handed to
    systemd-networkd: the AMI's udev rule starts udev-net-manager@<if> for it
    (awslabs/amazon-eks-ami templates/al2023/runtime/rootfs/etc/udev/rules.d/90-eks.rules),
    nodeadm's broker answers "systemd" until /run/nodeadm/init exists, which only nodeadm's run
    phase writes, after cloud-final (nodeadm/cmd/nodeadm-internal/udev/broker.go,
    internal/system/marker.go, nodeadm-run.service), and the net manager writes
    /run/systemd/network/70-eks-<if>.network (DHCP, routes, a policy table) and runs
    `networkctl reload` (udev/systemd.go, eks-managed.network.tpl, udev-net-manager@.service).
    systemd.network(5): files from /etc, /run and /usr/lib are sorted together by name and the
    first that matches applies; [Link] Unmanaged=yes means no attempt to configure the link;
    PermanentMACAddress= matches the hardware address, as nodeadm's own file does."""
    instance_id, run = fresh_node
    for index, eni in multus_enis(emulator, instance_id).items():
        name = f"10-multus-multus{index}.network"
        assert (run.root / "etc/systemd/network" / name).read_text() == unmanaged_network_file(
            eni["MacAddress"]
        )
        assert sorted([f"70-eks-multus{index}.network", name])[0] == name
    assert run.host_commands.count("networkctl reload") == 2


def test_each_eni_is_created_with_its_networks_connection_tracking_timeouts(
    emulator: Ec2Emulator, fresh_node: tuple[str, BootstrapRun]
) -> None:
    """CreateNetworkInterface takes ConnectionTrackingSpecification (botocore's EC2 model: the
    emulator refuses a parameter the action does not take); multus1 sets none and keeps
    EC2's defaults, multus2 sets two of the three."""
    instance_id, run = fresh_node
    tracking = {
        call.params["Description"]: {
            key.removeprefix("ConnectionTrackingSpecification."): value
            for key, value in call.params.items()
            if key.startswith("ConnectionTrackingSpecification.")
        }
        for call in run.actions("CreateNetworkInterface")
        if call.status == 200
    }
    assert tracking == {
        f"Multus multus1 of {instance_id}": {},
        f"Multus multus2 of {instance_id}": {
            "TcpEstablishedTimeout": "3600",
            "UdpStreamTimeout": "180",
        },
    }


NODEADM_SYSTEMD_MANAGER = "io.systemd.Network"


def interfaces_the_boot_hook_waits_for(root: Path, instance_id: str) -> set[str]:
    """nodeadm's boot hook, at every boot: each interface whose record under
    /etc/eks/nodeadm/udev-net-manager/<instance-id>/ reads (whitespace trimmed) as networkd's
    manager must reach networkctl's AdministrativeState "configured" within a minute, or the
    hook fails (awslabs/amazon-eks-ami nodeadm/cmd/nodeadm-internal/boot-book/hook.go,
    internal/util/fs_cache.go, internal/system/networking.go ensureInterfacesConfigured)."""
    records = root / "etc/eks/nodeadm/udev-net-manager" / instance_id
    return {
        record.name
        for record in records.iterdir()
        if record.read_text().strip() == NODEADM_SYSTEMD_MANAGER
    }


def test_nodeadm_records_each_interface_as_not_networkds_before_the_attach(
    emulator: Ec2Emulator, fresh_node: tuple[str, BootstrapRun]
) -> None:
    """nodeadm's udev-net-manager (started for every ENA interface by the AMI's 90-eks.rules)
    reads its record for the interface first and keeps it; without one it records
    "io.systemd.Network" during user-data (/run/nodeadm/init is written only by nodeadm's run
    phase, after cloud-final: udev/broker.go ManagerFor, determineManager). An unmanaged Multus
    interface recorded so would make the boot hook wait a minute and fail at every reboot, so
    the record must say another manager, and be there before the attach makes the device."""
    instance_id, run = fresh_node
    attach_times = {
        call.params["NetworkInterfaceId"]: call.received_at
        for call in run.actions("AttachNetworkInterface")
    }
    records = run.root / "etc/eks/nodeadm/udev-net-manager" / instance_id
    for index, eni in multus_enis(emulator, instance_id).items():
        record = records / f"multus{index}"
        assert record.read_text().strip() not in ("", NODEADM_SYSTEMD_MANAGER)
        assert record.stat().st_mtime <= attach_times[eni["NetworkInterfaceId"]]
    assert interfaces_the_boot_hook_waits_for(run.root, instance_id) == set()


def test_the_networkd_file_is_written_and_loaded_before_the_attach(
    emulator: Ec2Emulator, vpc: EmulatedVpc, single_network_user_data: str, tmp_path: Path
) -> None:
    """networkd matches a link against the files it has loaded when the link appears
    (systemd.network(5): "Networks are applied to links whenever the links appear"), so the
    file must be on disk and reloaded before AttachNetworkInterface makes the device appear."""
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    network_file = tmp_path / "etc/systemd/network/10-multus-multus1.network"
    host_command_log = tmp_path / "var/lib/multus-eni/host-commands"
    seen_at_attach: list[tuple[bool, list[str]]] = []

    def file_and_host_commands(action: str, _params: dict[str, str]) -> None:
        if action == "AttachNetworkInterface":
            seen_at_attach.append(
                (network_file.exists(), host_command_log.read_text().splitlines())
            )

    emulator.proxy.state_probe = file_and_host_commands
    try:
        run = emulator.run_bootstrap(single_network_user_data, instance_id, root=tmp_path)
    finally:
        emulator.proxy.state_probe = None

    assert run.returncode == 0, run.output
    ((file_present, host_commands),) = seen_at_attach
    assert file_present
    assert host_commands[-2:] == ["udevadm control --reload", "networkctl reload"]


def test_the_host_gives_multus_interfaces_no_address_route_or_rule(
    fresh_node: tuple[str, BootstrapRun],
) -> None:
    """What nodeadm's eks-managed.network.tpl would have given them (DHCP addresses, main-table
    routes, a policy table) must not come from us either: the only ip command is link up."""
    _, run = fresh_node
    assert sorted(c for c in run.host_commands if c.split()[0] in ("ip", "dhclient")) == [
        "ip link set dev multus1 up",
        "ip link set dev multus2 up",
    ]


def test_a_udev_rule_brings_each_interface_up_at_every_boot(
    emulator: Ec2Emulator, fresh_node: tuple[str, BootstrapRun]
) -> None:
    """Unmanaged=yes: networkd no longer brings the link up (systemd.network(5)), and cloud-init
    runs user-data once per instance, so after a reboot only this rule (udev(7): RUN on the
    add event, which coldplug replays at boot) brings the interface up. It names the interface
    as the .link renames it: udev formats RUN when it reads the rule, before
    80-net-setup-link.rules renames the device, so `$name` would be the kernel's old name
    (systemd udev-rules.c, TK_A_RUN_PROGRAM)."""
    instance_id, run = fresh_node
    for index, eni in multus_enis(emulator, instance_id).items():
        rule = run.root / f"etc/udev/rules.d/10-multus-multus{index}.rules"
        assert rule.read_text() == (
            f'ACTION=="add", SUBSYSTEM=="net", ATTR{{address}}=="{eni["MacAddress"]}", '
            f'RUN+="/usr/sbin/ip link set dev multus{index} up"\n'
        )


def test_interfaces_come_up_with_reverse_path_filter_off_and_ready_marker(
    fresh_node: tuple[str, BootstrapRun],
) -> None:
    _, run = fresh_node
    host_commands = (run.root / "var/lib/multus-eni/host-commands").read_text().splitlines()
    for name in ("multus1", "multus2"):
        assert f"ip link set dev {name} up" in host_commands
        assert f"sysctl -qw net.ipv4.conf.{name}.rp_filter=0" in host_commands
    assert "sysctl -qw net.ipv4.conf.all.rp_filter=0" in host_commands
    assert (run.root / "etc/sysctl.d/90-multus-eni.conf").read_text().splitlines() == [
        "net.ipv4.conf.all.rp_filter = 0",
        "net.ipv4.conf.multus1.rp_filter = 0",
        "net.ipv4.conf.multus2.rp_filter = 0",
    ]
    assert marker(run).read_text().splitlines() == ["multus1", "multus2"]
    log = (run.root / "var/log/multus-eni-bootstrap.log").read_text()
    assert "all 2 Multus interfaces attached and up" in log
    assert "all 2 Multus interfaces attached and up" in run.output


def test_source_dest_check_is_turned_off_only_for_networks_that_ask_for_it(
    emulator: Ec2Emulator, vpc: EmulatedVpc
) -> None:
    """EC2 API reference, ModifyNetworkInterfaceAttribute SourceDestCheck: on by default; it
    must be off where the instance forwards packets that are not its own (NAT, routing).
    multus1 keeps EC2's default (no call at all), multus2 turns it off."""
    props = vpc.bootstrap_props(CLUSTER)
    keep_on_first = replace(
        props,
        interfaces=[
            replace(props.interfaces[0], source_dest_check=True),
            replace(props.interfaces[1], source_dest_check=False),
        ],
    )
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)

    run = emulator.run_bootstrap(render_user_data(keep_on_first), instance_id)

    assert run.returncode == 0, run.output
    enis = multus_enis(emulator, instance_id)
    assert (enis[1]["SourceDestCheck"], enis[2]["SourceDestCheck"]) == (True, False)
    source_dest_calls = [
        call.params
        for call in run.actions("ModifyNetworkInterfaceAttribute")
        if "SourceDestCheck.Value" in call.params
    ]
    assert source_dest_calls == [
        {
            "Action": "ModifyNetworkInterfaceAttribute",
            "Version": "2016-11-15",
            "NetworkInterfaceId": enis[2]["NetworkInterfaceId"],
            "SourceDestCheck.Value": "false",
        }
    ]
    assert len(run.actions("ModifyNetworkInterfaceAttribute")) == 3  # + DeleteOnTermination x2


def test_rerun_on_the_same_node_makes_no_ec2_call(
    emulator: Ec2Emulator, user_data: str, fresh_node: tuple[str, BootstrapRun]
) -> None:
    instance_id, first = fresh_node
    before = multus_enis(emulator, instance_id)

    rerun = emulator.run_bootstrap(user_data, instance_id, root=first.root)

    assert rerun.returncode == 0, rerun.output
    assert (rerun.ec2_calls, rerun.ec2_client_processes) == ([], 0)
    after = multus_enis(emulator, instance_id)
    assert {i: e["NetworkInterfaceId"] for i, e in after.items()} == {
        i: e["NetworkInterfaceId"] for i, e in before.items()
    }
    assert marker(rerun).exists()


def test_rerun_after_an_interrupted_run_finishes_configuration_without_creating(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    # As if an earlier run had been killed right after attaching multus2.
    leftover = emulator.ec2.create_network_interface(
        SubnetId=vpc.multus_subnets["multus2", "us-west-2a"],
        Groups=[vpc.security_group_ids["multus2"]],
    )["NetworkInterface"]["NetworkInterfaceId"]
    attachment = emulator.ec2.attach_network_interface(
        NetworkInterfaceId=leftover, InstanceId=instance_id, DeviceIndex=2
    )["AttachmentId"]

    run = emulator.run_bootstrap(user_data, instance_id)

    assert run.returncode == 0, run.output
    assert [call.params["SubnetId"] for call in run.actions("CreateNetworkInterface")] == [
        vpc.multus_subnets["multus1", "us-west-2a"]
    ]
    assert len(run.actions("DescribeNetworkInterfaces")) == 1
    leftover_calls = [
        call.params
        for call in run.actions("ModifyNetworkInterfaceAttribute")
        if call.params["NetworkInterfaceId"] == leftover
    ]
    assert {"Attachment.AttachmentId": attachment, "Attachment.DeleteOnTermination": "true"} in [
        {key: value for key, value in params.items() if key.startswith("Attachment.")}
        for params in leftover_calls
    ]
    assert any(params.get("SourceDestCheck.Value") == "false" for params in leftover_calls)
    assert multus_enis(emulator, instance_id)[2]["NetworkInterfaceId"] == leftover
    assert marker(run).exists()


def test_device_index_taken_by_an_eni_from_another_subnet_fails_clearly(
    emulator: Ec2Emulator, vpc: EmulatedVpc, single_network_user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    stranger = emulator.ec2.create_network_interface(SubnetId=vpc.private_subnets["us-west-2a"])
    stranger_id = stranger["NetworkInterface"]["NetworkInterfaceId"]
    emulator.ec2.attach_network_interface(
        NetworkInterfaceId=stranger_id, InstanceId=instance_id, DeviceIndex=1
    )

    run = emulator.run_bootstrap(single_network_user_data, instance_id)

    assert run.returncode != 0
    assert f"multus1: device index 1 holds {stranger_id} from " in run.output
    # Only the failure tag and the search for leftovers before the node powers off.
    assert [call.action for call in run.ec2_calls] == ["CreateTags", "DescribeNetworkInterfaces"]
    assert run.shutdown_requested
    assert not marker(run).exists()


def test_node_in_the_second_az_uses_that_azs_subnets(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2b", CLUSTER)

    run = emulator.run_bootstrap(user_data, instance_id)

    assert run.returncode == 0, run.output
    subnets = {i: e["SubnetId"] for i, e in multus_enis(emulator, instance_id).items()}
    assert subnets == {
        1: vpc.multus_subnets["multus1", "us-west-2b"],
        2: vpc.multus_subnets["multus2", "us-west-2b"],
    }


@pytest.mark.parametrize(
    "fault",
    [
        Fault("RequestLimitExceeded", status=503, times=3),
        Fault("Throttling", status=400, times=3),
        Fault("InternalError", status=500, times=3),
        Fault("", status=DROP_CONNECTION, times=3),
    ],
    ids=["throttled-503", "throttled-400", "server-error", "dropped-connection"],
)
def test_throttling_and_transient_failures_are_retried_until_they_succeed(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str, fault: Fault
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)

    run = emulator.run_bootstrap(user_data, instance_id, faults=[fault])

    assert run.returncode == 0, run.output
    assert [call.status for call in run.ec2_calls].count(fault.status) == 3
    assert sorted(multus_enis(emulator, instance_id), key=str) == [1, 2]
    assert run.ec2_client_processes == len(run.ec2_calls) == 11  # one curl per attempt
    assert marker(run).exists()


def test_eni_not_yet_visible_after_create_is_retried(
    emulator: Ec2Emulator, vpc: EmulatedVpc, single_network_user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)

    run = emulator.run_bootstrap(
        single_network_user_data,
        instance_id,
        faults=[
            Fault("InvalidNetworkInterfaceID.NotFound", status=400, action="AttachNetworkInterface")
        ],
    )

    assert run.returncode == 0, run.output
    assert [call.status for call in run.actions("AttachNetworkInterface")] == [400, 200]
    assert list(multus_enis(emulator, instance_id)) == [1]


def test_failed_attach_deletes_the_new_eni_and_a_rerun_completes_the_node(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)

    failed = emulator.run_bootstrap(
        user_data,
        instance_id,
        faults=[Fault("AttachmentLimitExceeded", status=400, action="AttachNetworkInterface")],
    )

    assert failed.returncode != 0
    assert "not ready:" in failed.output
    assert "AttachmentLimitExceeded" in failed.output
    enis = multus_enis(emulator, instance_id)
    assert None not in enis, "an unattached ENI was left behind"
    assert len(enis) == 1
    assert len(failed.actions("DeleteNetworkInterface")) == 1
    assert not marker(failed).exists()

    rerun = emulator.run_bootstrap(user_data, instance_id, root=failed.root)

    assert rerun.returncode == 0, rerun.output
    assert len(rerun.actions("CreateNetworkInterface")) == 1
    assert sorted(multus_enis(emulator, instance_id), key=str) == [1, 2]


def test_failed_delete_on_termination_detaches_and_deletes_the_eni(
    emulator: Ec2Emulator, vpc: EmulatedVpc, single_network_user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)

    run = emulator.run_bootstrap(
        single_network_user_data,
        instance_id,
        faults=[
            Fault(
                "UnauthorizedOperation",
                status=403,
                action="ModifyNetworkInterfaceAttribute",
                with_param="Attachment.DeleteOnTermination",
            )
        ],
    )

    assert run.returncode != 0
    assert len(run.actions("DetachNetworkInterface")) == 1
    assert len(run.actions("DeleteNetworkInterface")) == 1
    assert multus_enis(emulator, instance_id) == {}
    assert not marker(run).exists()


def test_az_missing_from_the_placement_table_fails_clearly(
    emulator: Ec2Emulator, vpc: EmulatedVpc
) -> None:
    only_second_az = render_user_data(vpc.bootstrap_props(CLUSTER, azs=["us-west-2b"]))
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)

    run = emulator.run_bootstrap(only_second_az, instance_id)

    assert run.returncode != 0
    assert (
        "availability zone us-west-2a is not in the Multus placement table (us-west-2b)"
        in run.output
    )
    assert run.ec2_calls == []
    assert multus_enis(emulator, instance_id) == {}
    assert not marker(run).exists()


def test_user_data_from_the_network_plan_puts_each_eni_in_its_networks_group(
    emulator: Ec2Emulator, vpc: EmulatedVpc
) -> None:
    """The chain the cluster stack renders through (config -> network plan -> bootstrap props
    -> user-data), with the plan's security-group key (the network's name) mapped to the
    emulator's group of that network, as the network stack maps it to its own groups."""
    config = parse_config({})
    assert [network.name for network in config.multus.networks] == list(vpc.networks)
    props = node_bootstrap_props(
        CLUSTER,
        network_plan(config),
        subnet_id=lambda row: vpc.multus_subnets[row.network, row.availability_zone],
        security_group_id=lambda row: vpc.security_group_ids[row.security_group],
    )
    instance_id = emulator.launch_instance(vpc, "us-west-2b", CLUSTER)
    run = emulator.run_bootstrap(render_user_data(props), instance_id)
    assert run.returncode == 0, run.output
    enis = multus_enis(emulator, instance_id)
    assert {
        index: (eni["SubnetId"], [group["GroupId"] for group in eni["Groups"]])
        for index, eni in enis.items()
    } == {
        index: (vpc.multus_subnets[network, "us-west-2b"], [vpc.security_group_ids[network]])
        for index, network in enumerate(vpc.networks, start=1)
    }
    assert len(set(vpc.security_group_ids.values())) == len(vpc.networks)
