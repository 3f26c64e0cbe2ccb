"""A node whose Multus bootstrap fails takes itself out of service: after logging and cleanup
it powers off (Karpenter replaces a stopped instance), and no unattached ENI stays behind. It
leaves the reason where an operator finds it once the node is off: a console line and a tag on
its instance (docs/operations.md, "A node powered itself off").
Runs the rendered user-data in dry-host mode, where the power-off and the console line show as
host commands."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from node_bootstrap import render_user_data
from node_bootstrap.renderer import FAILURE_TAG_KEY, INSTANCE_TAG_KEY
from testing_support.multus_emulator import (
    DROP_CONNECTION,
    BootstrapRun,
    Ec2Emulator,
    EmulatedVpc,
    Fault,
)
from tests.conftest import REPO
from tests.integration.node_bootstrap.conftest import CLUSTER
from tests.integration.node_bootstrap.test_multus_eni_bootstrap_script import marker

pytestmark = pytest.mark.integration

ATTACH_REFUSED = Fault("AttachmentLimitExceeded", status=400, action="AttachNetworkInterface")
#: docs/operations.md tells operators to grep the console output for it.
CONSOLE_PREFIX = "multus-eni-bootstrap-failure: "
NETWORKS = ("multus1", "multus2")
#: What every AWS service accepts in a tag value (EC2 user guide, "Tag your Amazon EC2
#: resources", tag restrictions: at most 256 Unicode characters; letters, numbers, spaces and
#: _ . : / = + - @ are allowed everywhere, EC2 itself takes any character).
PORTABLE_TAG_VALUE = re.compile(r"[A-Za-z0-9 _.:/=+@-]{0,256}")


def tagged_enis(emulator: Ec2Emulator, instance_id: str) -> list[dict[str, Any]]:
    """Every ENI the bootstrap made for this instance, attached or not."""
    return list(
        emulator.ec2.describe_network_interfaces(
            Filters=[{"Name": f"tag:{INSTANCE_TAG_KEY}", "Values": [instance_id]}]
        )["NetworkInterfaces"]
    )


def console_reasons(run: BootstrapRun) -> list[str]:
    """The reasons the run wrote to the console (in dry-host mode: a logged host command)."""
    command = f"write_console {CONSOLE_PREFIX}"
    return [line.removeprefix(command) for line in run.host_commands if line.startswith(command)]


def failure_tag(emulator: Ec2Emulator, instance_id: str) -> str | None:
    """The failure reason EC2 holds as a tag on the instance, if any."""
    tags = emulator.ec2.describe_tags(
        Filters=[
            {"Name": "resource-id", "Values": [instance_id]},
            {"Name": "key", "Values": [FAILURE_TAG_KEY]},
        ]
    )["Tags"]
    return str(tags[0]["Value"]) if tags else None


def test_the_operations_guide_names_the_tag_and_the_console_prefix() -> None:
    guide = (REPO / "docs" / "operations.md").read_text()
    section = guide.split("## A node powered itself off", 1)[1].split("\n## ", 1)[0]
    assert f"`{FAILURE_TAG_KEY}`" in section
    assert CONSOLE_PREFIX.strip() in section


def assert_failed_cleanly(emulator: Ec2Emulator, instance_id: str, run: BootstrapRun) -> None:
    """Non-zero exit, power-off requested after the cleanup, no marker, and no ENI left that
    would outlive the instance: none unattached, every attached one deleted on termination."""
    assert run.returncode != 0, run.output
    assert run.shutdown_requested, run.output
    assert run.host_commands[-1] == "systemctl --no-block poweroff"
    assert "powering off" in run.output
    assert not marker(run).exists()
    delete_on_termination = {
        call.params["Attachment.AttachmentId"]
        for call in run.actions("ModifyNetworkInterfaceAttribute")
        if call.params.get("Attachment.DeleteOnTermination") == "true" and call.status == 200
    }
    for eni in tagged_enis(emulator, instance_id):
        assert eni["Status"] == "in-use", f"{eni['NetworkInterfaceId']} left unattached"
        assert eni["Attachment"]["AttachmentId"] in delete_on_termination


def test_a_successful_run_does_not_power_off(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    run = emulator.run_bootstrap(user_data, instance_id)
    assert run.returncode == 0, run.output
    assert not run.shutdown_requested
    assert run.actions("DescribeNetworkInterfaces") == []
    assert console_reasons(run) == []
    assert run.actions("CreateTags") == []
    assert failure_tag(emulator, instance_id) is None


def interface_files(run: BootstrapRun, instance_id: str, ifname: str) -> list[Path]:
    """The files the bootstrap writes for one interface before attaching it."""
    return [
        run.root / f"etc/systemd/network/10-multus-{ifname}.link",
        run.root / f"etc/systemd/network/10-multus-{ifname}.network",
        run.root / f"etc/udev/rules.d/10-multus-{ifname}.rules",
        run.root / f"etc/eks/nodeadm/udev-net-manager/{instance_id}/{ifname}",
    ]


def test_attach_refused(emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str) -> None:
    """The refused network's ENI is deleted and its name, networkd and udev files with it
    and nodeadm's record (they would match no ENI); the attached network keeps its own."""
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    run = emulator.run_bootstrap(user_data, instance_id, faults=[ATTACH_REFUSED])
    assert_failed_cleanly(emulator, instance_id, run)
    assert len(run.actions("DeleteNetworkInterface")) == 1
    names = {"multus1", "multus2"}
    (released,) = [name for name in names if f"{name}: deleting eni-" in run.output]
    (attached,) = names - {released}
    assert [path for path in interface_files(run, instance_id, released) if path.exists()] == []
    assert all(path.exists() for path in interface_files(run, instance_id, attached))


def test_a_refused_attach_leaves_ec2s_error_on_the_console_and_on_the_instance(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    """The reason is the run's first failure (not the "not ready" that follows it): the network,
    the step and EC2's error code and message. The console line and the tag are written before
    the power-off, the tag only on this instance."""
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    run = emulator.run_bootstrap(user_data, instance_id, faults=[ATTACH_REFUSED])
    assert_failed_cleanly(emulator, instance_id, run)
    (released,) = [n for n in NETWORKS if f"{n}: deleting eni-" in run.output]
    expected = (
        f"{released}: AttachNetworkInterface: AttachmentLimitExceeded: injected "
        "AttachmentLimitExceeded"
    )
    assert f"not ready: {released} failed" in run.output
    assert console_reasons(run) == [expected]
    assert failure_tag(emulator, instance_id) == expected
    (tagging,) = run.actions("CreateTags")
    assert tagging.params == {
        "Action": "CreateTags",
        "Version": "2016-11-15",
        "ResourceId.1": instance_id,
        "Tag.1.Key": FAILURE_TAG_KEY,
        "Tag.1.Value": expected,
    }
    commands = run.host_commands
    assert commands.index(f"write_console {CONSOLE_PREFIX}{expected}") < len(commands) - 1


def test_a_reason_outside_what_tags_take_is_cut_and_cleaned_for_the_tag_only(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    """Past 256 characters, and characters other services refuse in a tag value, become a
    portable tag value; the console line keeps the reason as it was."""
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    code = "Refused,(see)'why'" + "x" * 300
    refused = Fault(code, status=400, action="AttachNetworkInterface", times=2)
    run = emulator.run_bootstrap(user_data, instance_id, faults=[refused])
    assert_failed_cleanly(emulator, instance_id, run)
    (reason,) = console_reasons(run)
    assert reason in {f"{n}: AttachNetworkInterface: {code}: injected {code}" for n in NETWORKS}
    tag = failure_tag(emulator, instance_id)
    assert tag is not None
    assert len(tag) == 256
    assert PORTABLE_TAG_VALUE.fullmatch(tag), tag
    assert tag == re.sub(r"[^A-Za-z0-9 _.:/=+@-]", " ", reason)[:256]


def test_a_command_that_fails_without_a_message_of_its_own_points_to_the_log(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str, tmp_path: Path
) -> None:
    """set -e ends the run at a failed command that records no reason (here: the sysctl.d file
    is a directory); the log has its error."""
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    root = tmp_path / "node"
    (root / "etc/sysctl.d/90-multus-eni.conf").mkdir(parents=True)
    run = emulator.run_bootstrap(user_data, instance_id, root=root)
    assert_failed_cleanly(emulator, instance_id, run)
    log = root / "var/log/multus-eni-bootstrap.log"
    assert "Is a directory" in log.read_text()
    assert console_reasons(run) == [f"exit 1, see {log}"]
    assert failure_tag(emulator, instance_id) == f"exit 1  see {log}"


def test_a_rerun_reports_its_own_failure_not_the_earlier_runs(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str, tmp_path: Path
) -> None:
    """A run by hand after a failed one: the released network fails again, at another step."""
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    root = tmp_path / "node"
    root.mkdir()
    first = emulator.run_bootstrap(user_data, instance_id, root=root, faults=[ATTACH_REFUSED])
    assert "AttachNetworkInterface: AttachmentLimitExceeded" in console_reasons(first)[-1]
    no_addresses = Fault(
        "InsufficientFreeAddressesInSubnet", status=400, action="CreateNetworkInterface"
    )
    second = emulator.run_bootstrap(user_data, instance_id, root=root, faults=[no_addresses])
    assert second.returncode != 0, second.output
    reason = console_reasons(second)[-1]
    assert "CreateNetworkInterface: InsufficientFreeAddressesInSubnet" in reason, reason
    assert failure_tag(emulator, instance_id) == reason


def test_a_failing_create_tags_does_not_keep_the_node_up(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    tagging_refused = Fault("UnauthorizedOperation", status=403, action="CreateTags")
    run = emulator.run_bootstrap(user_data, instance_id, faults=[ATTACH_REFUSED, tagging_refused])
    assert_failed_cleanly(emulator, instance_id, run)
    assert [call.status for call in run.actions("CreateTags")] == [403]
    assert failure_tag(emulator, instance_id) is None
    (reason,) = console_reasons(run)
    assert "AttachNetworkInterface: AttachmentLimitExceeded" in reason


@pytest.mark.parametrize(
    "blocked",
    ["etc/systemd/network/10-multus-multus1.link", "etc/systemd/network/10-multus-multus1.network"],
    ids=["link-file", "networkd-file"],
)
def test_failure_right_after_create(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str, tmp_path: Path, blocked: str
) -> None:
    """A step between CreateNetworkInterface and the attach (writing the .link or the .network
    file) fails: the ENI is deleted and never attached."""
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    root = tmp_path / "node"
    (root / blocked).mkdir(parents=True)
    run = emulator.run_bootstrap(user_data, instance_id, root=root)
    assert_failed_cleanly(emulator, instance_id, run)
    created = [c for c in run.actions("CreateNetworkInterface") if c.status == 200]
    assert len(created) == 2
    assert "multus1: deleting eni-" in run.output
    multus1_subnet = vpc.multus_subnets["multus1", "us-west-2a"]
    multus1_enis = {
        eni["NetworkInterfaceId"]
        for eni in emulator.instance_enis(instance_id)
        if eni["SubnetId"] == multus1_subnet
    }
    assert multus1_enis == set()
    assert all(call.params["DeviceIndex"] != "1" for call in run.actions("AttachNetworkInterface"))


def test_created_eni_whose_answer_was_lost_is_found_by_its_tag_and_deleted(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    lost_answer = Fault(
        "", status=DROP_CONNECTION, action="CreateNetworkInterface", after_forward=True
    )
    run = emulator.run_bootstrap(user_data, instance_id, faults=[lost_answer, ATTACH_REFUSED])
    assert_failed_cleanly(emulator, instance_id, run)
    # Three ENIs were created (one answer lost); the lost one is deleted by the final cleanup,
    # which looks for this instance's unattached ENIs.
    (cleanup,) = [
        c for c in run.actions("DescribeNetworkInterfaces") if "Filter.1.Name" in c.params
    ]
    assert cleanup.params == {
        "Action": "DescribeNetworkInterfaces",
        "Version": "2016-11-15",
        "Filter.1.Name": f"tag:{INSTANCE_TAG_KEY}",
        "Filter.1.Value.1": instance_id,
        "Filter.2.Name": "status",
        "Filter.2.Value.1": "available",
    }
    assert len([c for c in run.actions("DeleteNetworkInterface") if c.status == 200]) == 2


def test_delete_on_termination_refused(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    refused = Fault(
        "UnauthorizedOperation",
        status=403,
        action="ModifyNetworkInterfaceAttribute",
        with_param="Attachment.DeleteOnTermination",
    )
    run = emulator.run_bootstrap(user_data, instance_id, faults=[refused])
    assert_failed_cleanly(emulator, instance_id, run)
    assert len(run.actions("DetachNetworkInterface")) == 1


def test_interface_that_never_appears(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    """Attached and configured, but the kernel never shows it: the attached ENIs go with the
    instance (DeleteOnTermination), the node powers off."""
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    run = emulator.run_bootstrap(user_data, instance_id, env={"MULTUS_WAIT_SECONDS": "0"})
    assert_failed_cleanly(emulator, instance_id, run)
    assert "no interface with MAC" in run.output
    assert len(tagged_enis(emulator, instance_id)) == 2
    (reason,) = console_reasons(run)
    assert re.fullmatch(
        r"(multus[12]): no interface with MAC [0-9a-f:]{17} appeared within 0s",
        reason,
    ), reason
    assert failure_tag(emulator, instance_id) == reason


def test_device_index_taken_by_another_eni(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    stranger = emulator.ec2.create_network_interface(SubnetId=vpc.private_subnets["us-west-2a"])
    emulator.ec2.attach_network_interface(
        NetworkInterfaceId=stranger["NetworkInterface"]["NetworkInterfaceId"],
        InstanceId=instance_id,
        DeviceIndex=1,
    )
    run = emulator.run_bootstrap(user_data, instance_id)
    assert_failed_cleanly(emulator, instance_id, run)
    # multus2 (device index 2) was attached with DeleteOnTermination before the node gave up.
    assert [c.params["SubnetId"] for c in run.actions("CreateNetworkInterface")] == [
        vpc.multus_subnets["multus2", "us-west-2a"]
    ]


def test_az_missing_from_the_placement_table_powers_off_before_any_ec2_call(
    emulator: Ec2Emulator, vpc: EmulatedVpc
) -> None:
    only_second_az = render_user_data(vpc.bootstrap_props(CLUSTER, azs=["us-west-2b"]))
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    run = emulator.run_bootstrap(only_second_az, instance_id)
    assert_failed_cleanly(emulator, instance_id, run)
    assert run.ec2_calls == []
    assert console_reasons(run) == [
        "availability zone us-west-2a is not in the Multus placement table (us-west-2b)"
    ]


def test_credentials_missing_early_in_boot_are_waited_for(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    emulator.imds.credentials_missing_for = 3
    try:
        run = emulator.run_bootstrap(user_data, instance_id)
    finally:
        emulator.imds.credentials_missing_for = 0
    assert run.returncode == 0, run.output
    assert run.output.count("IMDS has no iam/security-credentials/ yet") == 3
    assert not run.shutdown_requested


def test_credentials_that_never_come_fail_within_the_bound(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> None:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER)
    emulator.imds.credentials_missing_for = 10**6
    try:
        run = emulator.run_bootstrap(
            user_data, instance_id, env={"MULTUS_CREDENTIALS_WAIT_SECONDS": "2"}
        )
    finally:
        emulator.imds.credentials_missing_for = 0
    assert_failed_cleanly(emulator, instance_id, run)
    assert "IMDS has no instance profile credentials" in run.output
    # Without credentials the console is the only place the reason can go.
    assert console_reasons(run) == ["IMDS has no instance profile credentials"]
    assert run.ec2_calls == []
    assert run.seconds < 30


def test_single_network_variant_fails_cleanly_too(emulator: Ec2Emulator, vpc: EmulatedVpc) -> None:
    props = vpc.bootstrap_props(CLUSTER)
    one_network = render_user_data(
        replace(
            props,
            interfaces=props.interfaces[:1],
            placements={
                az: replace(p, subnet_ids=p.subnet_ids[:1]) for az, p in props.placements.items()
            },
        )
    )
    instance_id = emulator.launch_instance(vpc, "us-west-2b", CLUSTER)
    run = emulator.run_bootstrap(one_network, instance_id, faults=[ATTACH_REFUSED])
    assert_failed_cleanly(emulator, instance_id, run)
    assert tagged_enis(emulator, instance_id) == []
