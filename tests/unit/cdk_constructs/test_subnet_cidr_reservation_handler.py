"""The reservation handler's whole lifecycle, with real boto3 calls answered by moto."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from botocore.exceptions import ClientError

from cdk_constructs.subnet_cidr_reservation_handler import index as handler
from tests.moto_helpers import failing_calls, moto_ec2_fixtures

REGION = "ap-northeast-1"


aws, ec2 = moto_ec2_fixtures(REGION)


@pytest.fixture
def subnet_id(ec2: Any) -> str:
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    return str(ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.4.0/24")["Subnet"]["SubnetId"])


def props(subnet_id: str, cidr: str) -> dict[str, str]:
    return {
        "ServiceToken": "arn:aws:lambda:ap-northeast-1:123456789012:function:x",
        "SubnetId": subnet_id,
        "Cidr": cidr,
        "ReservationType": "explicit",
        "Description": "test",
    }


def reservations(ec2: Any, subnet_id: str) -> list[tuple[str, str]]:
    found = ec2.get_subnet_cidr_reservations(SubnetId=subnet_id)["SubnetIpv4CidrReservations"]
    return sorted((r["SubnetCidrReservationId"], r["Cidr"]) for r in found)


def create(subnet_id: str, cidr: str) -> dict[str, Any]:
    return handler.on_event({"RequestType": "Create", "ResourceProperties": props(subnet_id, cidr)})


def test_create_reserves_the_cidr(ec2: Any, subnet_id: str) -> None:
    response = create(subnet_id, "10.0.4.32/27")
    assert response["PhysicalResourceId"].startswith("scr-")
    assert reservations(ec2, subnet_id) == [(response["PhysicalResourceId"], "10.0.4.32/27")]
    assert response["Data"] == {
        "ReservationId": response["PhysicalResourceId"],
        "Cidr": "10.0.4.32/27",
    }


def test_retried_create_adopts_the_identical_reservation(ec2: Any, subnet_id: str) -> None:
    first = create(subnet_id, "10.0.4.32/27")
    retried = create(subnet_id, "10.0.4.32/27")
    assert retried["PhysicalResourceId"] == first["PhysicalResourceId"]
    assert len(reservations(ec2, subnet_id)) == 1


def test_create_fails_on_a_conflicting_reservation(ec2: Any, subnet_id: str) -> None:
    create(subnet_id, "10.0.4.32/27")
    with pytest.raises(ec2.exceptions.ClientError):
        create(subnet_id, "10.0.4.32/28")


def update(subnet_id: str, old_id: str, old_cidr: str, new_cidr: str) -> dict[str, Any]:
    return handler.on_event(
        {
            "RequestType": "Update",
            "PhysicalResourceId": old_id,
            "ResourceProperties": props(subnet_id, new_cidr),
            "OldResourceProperties": props(subnet_id, old_cidr),
        }
    )


def delete(subnet_id: str, physical_id: str, cidr: str) -> dict[str, Any]:
    return handler.on_event(
        {
            "RequestType": "Delete",
            "PhysicalResourceId": physical_id,
            "ResourceProperties": props(subnet_id, cidr),
        }
    )


def test_update_to_a_disjoint_cidr_creates_new_and_leaves_old_for_cleanup(
    ec2: Any, subnet_id: str
) -> None:
    old_id = create(subnet_id, "10.0.4.32/27")["PhysicalResourceId"]
    new_id = update(subnet_id, old_id, "10.0.4.32/27", "10.0.4.64/27")["PhysicalResourceId"]
    assert new_id != old_id
    assert reservations(ec2, subnet_id) == sorted(
        [(old_id, "10.0.4.32/27"), (new_id, "10.0.4.64/27")]
    )
    delete(subnet_id, old_id, "10.0.4.32/27")  # CloudFormation's cleanup of the replaced one
    assert reservations(ec2, subnet_id) == [(new_id, "10.0.4.64/27")]


def test_update_to_an_overlapping_cidr_releases_the_old_one_first(ec2: Any, subnet_id: str) -> None:
    old_id = create(subnet_id, "10.0.4.32/27")["PhysicalResourceId"]
    new_id = update(subnet_id, old_id, "10.0.4.32/27", "10.0.4.0/26")["PhysicalResourceId"]
    assert reservations(ec2, subnet_id) == [(new_id, "10.0.4.0/26")]
    delete(subnet_id, old_id, "10.0.4.32/27")  # cleanup finds it gone: success
    assert reservations(ec2, subnet_id) == [(new_id, "10.0.4.0/26")]


def test_update_without_managed_changes_keeps_the_reservation(ec2: Any, subnet_id: str) -> None:
    old_id = create(subnet_id, "10.0.4.32/27")["PhysicalResourceId"]
    assert update(subnet_id, old_id, "10.0.4.32/27", "10.0.4.32/27")["PhysicalResourceId"] == old_id
    assert reservations(ec2, subnet_id) == [(old_id, "10.0.4.32/27")]


def test_delete_releases_and_tolerates_already_gone(ec2: Any, subnet_id: str) -> None:
    physical_id = create(subnet_id, "10.0.4.32/27")["PhysicalResourceId"]
    delete(subnet_id, physical_id, "10.0.4.32/27")
    assert reservations(ec2, subnet_id) == []
    delete(subnet_id, physical_id, "10.0.4.32/27")


def test_delete_of_a_create_that_never_succeeded_is_a_no_op(ec2: Any, subnet_id: str) -> None:
    create(subnet_id, "10.0.4.32/27")
    delete(subnet_id, "2f1c4e0a-request-id", "10.0.4.64/27")
    assert len(reservations(ec2, subnet_id)) == 1


@pytest.fixture
def dual_stack_subnet(ec2: Any) -> tuple[str, ipaddress.IPv6Network]:
    """A subnet with /64 number 6 of its VPC's Amazon-provided /56 (moto assigns the block)."""
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16", AmazonProvidedIpv6CidrBlock=True)["Vpc"]
    (association,) = ec2.describe_vpcs(VpcIds=[vpc["VpcId"]])["Vpcs"][0][
        "Ipv6CidrBlockAssociationSet"
    ]
    block = ipaddress.IPv6Network(association["Ipv6CidrBlock"])
    subnet_64 = ipaddress.IPv6Network((block.network_address + 6 * 2**64, 64))
    subnet = ec2.create_subnet(
        VpcId=vpc["VpcId"], CidrBlock="10.0.6.0/24", Ipv6CidrBlock=str(subnet_64)
    )["Subnet"]
    return str(subnet["SubnetId"]), subnet_64


def ipv6_props(subnet_id: str, subnet_64: str, prefix_length: int, offset: int) -> dict[str, Any]:
    return {
        "ServiceToken": "arn:aws:lambda:ap-northeast-1:123456789012:function:x",
        "SubnetId": subnet_id,
        # CloudFormation hands every property over as a string.
        "Ipv6PodRange": {
            "SubnetCidr": subnet_64,
            "PrefixLength": str(prefix_length),
            "Offset": str(offset),
        },
        "ReservationType": "explicit",
        "Description": "test",
    }


def ipv6_reservations(ec2: Any, subnet_id: str) -> list[tuple[str, str]]:
    found = ec2.get_subnet_cidr_reservations(SubnetId=subnet_id)["SubnetIpv6CidrReservations"]
    return sorted((r["SubnetCidrReservationId"], r["Cidr"]) for r in found)


def test_ipv6_pod_range_is_the_configured_block_of_the_subnets_64(
    ec2: Any, dual_stack_subnet: tuple[str, ipaddress.IPv6Network]
) -> None:
    """CreateSubnetCidrReservation takes "the IPv4 or IPV6 CIDR range to reserve" (EC2 API
    reference): block 1 of /112 is the /64's addresses 0x10000-0x1ffff; the NAD reads the
    first and last address, the /64 and its router, ::1, "reserved by AWS for the VPC router"
    (VPC user guide, "Subnet CIDR blocks", subnet sizing for IPv6)."""
    subnet_id, subnet_64 = dual_stack_subnet
    event = {
        "RequestType": "Create",
        "ResourceProperties": ipv6_props(subnet_id, str(subnet_64), 112, 1),
    }
    response = handler.on_event(event)
    base = subnet_64.network_address
    expected = ipaddress.IPv6Network((base + 0x10000, 112))
    assert ipv6_reservations(ec2, subnet_id) == [(response["PhysicalResourceId"], str(expected))]
    assert response["Data"] == {
        "ReservationId": response["PhysicalResourceId"],
        "Cidr": str(expected),
        "FirstAddress": str(base + 0x10000),
        "LastAddress": str(base + 0x1FFFF),
        "SubnetCidr": str(subnet_64),
        "RouterAddress": str(base + 1),
    }
    # A retried create adopts it (EC2 answers the range in its own spelling).
    assert handler.on_event(event)["PhysicalResourceId"] == response["PhysicalResourceId"]
    assert len(ipv6_reservations(ec2, subnet_id)) == 1


def test_changing_the_ipv6_offset_reserves_the_new_block(
    ec2: Any, dual_stack_subnet: tuple[str, ipaddress.IPv6Network]
) -> None:
    subnet_id, subnet_64 = dual_stack_subnet
    old = ipv6_props(subnet_id, str(subnet_64), 112, 1)
    old_id = handler.on_event({"RequestType": "Create", "ResourceProperties": old})[
        "PhysicalResourceId"
    ]
    new = ipv6_props(subnet_id, str(subnet_64), 112, 2)
    event = {
        "RequestType": "Update",
        "PhysicalResourceId": old_id,
        "ResourceProperties": new,
        "OldResourceProperties": old,
    }
    new_id = handler.on_event(event)["PhysicalResourceId"]
    assert new_id != old_id
    unchanged = {**event, "ResourceProperties": old}
    assert handler.on_event(unchanged)["PhysicalResourceId"] == old_id


@pytest.mark.parametrize(
    ("prefix_length", "offset", "inside"),
    [(112, 2**48 - 1, True), (112, 2**48, False), (65, 1, True), (65, 2, False)],
)
def test_ipv6_pod_range_never_leaves_the_64(prefix_length: int, offset: int, inside: bool) -> None:
    spec = {"SubnetCidr": "2001:db8:0:6::/64", "PrefixLength": prefix_length, "Offset": offset}
    if inside:
        assert ipaddress.IPv6Network(handler.ipv6_pod_range(spec)).subnet_of(
            ipaddress.IPv6Network("2001:db8:0:6::/64")
        )
    else:
        with pytest.raises(ValueError, match="outside 2001:db8:0:6::/64"):
            handler.ipv6_pod_range(spec)


# Issue #53: right after CloudFormation created the handler's role and policy, EC2 may refuse
# its calls with UnauthorizedOperation until IAM has propagated them (IAM user guide, "Changes
# that I make are not always immediately visible"); the handler waits them out, as the AMI
# release check does.
@pytest.fixture
def quick_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handler, "ACCESS_DENIED_PAUSE_SECONDS", 0.01)


@pytest.mark.parametrize("operation", ["GetSubnetCidrReservations", "CreateSubnetCidrReservation"])
def test_create_waits_while_iam_propagates_its_role(
    ec2: Any, subnet_id: str, operation: str, quick_pauses: None
) -> None:
    with failing_calls("ec2", operation, ("UnauthorizedOperation", 403), times=3) as refused:
        response = create(subnet_id, "10.0.4.32/27")
    assert refused == [operation] * 3
    assert reservations(ec2, subnet_id) == [(response["PhysicalResourceId"], "10.0.4.32/27")]


def test_delete_waits_while_iam_propagates_its_role(
    ec2: Any, subnet_id: str, quick_pauses: None
) -> None:
    reservation_id = create(subnet_id, "10.0.4.32/27")["PhysicalResourceId"]
    delete = {
        "RequestType": "Delete",
        "PhysicalResourceId": reservation_id,
        "ResourceProperties": props(subnet_id, "10.0.4.32/27"),
    }
    with failing_calls(
        "ec2", "DeleteSubnetCidrReservation", ("AccessDenied", 403), times=2
    ) as refused:
        handler.on_event(delete)
    assert len(refused) == 2
    assert reservations(ec2, subnet_id) == []


def test_a_refusal_that_outlasts_the_patience_fails_as_a_permission_problem(
    ec2: Any, subnet_id: str, quick_pauses: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handler, "ACCESS_DENIED_PATIENCE_SECONDS", 0.1)
    with (
        failing_calls("ec2", "CreateSubnetCidrReservation", ("UnauthorizedOperation", 403)),
        pytest.raises(RuntimeError, match="permission problem of this handler's own role"),
    ):
        create(subnet_id, "10.0.4.32/27")
    assert reservations(ec2, subnet_id) == []


def test_other_errors_are_not_retried(ec2: Any, subnet_id: str, quick_pauses: None) -> None:
    with (
        failing_calls(
            "ec2", "CreateSubnetCidrReservation", ("InvalidParameterValue", 400)
        ) as refused,
        pytest.raises(ClientError, match="InvalidParameterValue"),
    ):
        create(subnet_id, "10.0.4.32/27")
    assert refused == ["CreateSubnetCidrReservation"]
