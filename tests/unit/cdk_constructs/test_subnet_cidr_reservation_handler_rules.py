"""The reservation handler's rules one by one: which property changes make a new reservation,
what the EC2 request carries, and which errors are tolerated (moto, or botocore's Stubber where
moto cannot show the detail)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from cdk_constructs.subnet_cidr_reservation_handler import index as handler
from tests.moto_helpers import moto_ec2_fixtures

REGION = "ap-northeast-1"


aws, ec2 = moto_ec2_fixtures(REGION)


def new_subnet(ec2: Any) -> str:
    """A subnet 10.0.4.0/24 in a VPC of its own (as after a VPC replacement: same CIDRs)."""
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    return str(ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.4.0/24")["Subnet"]["SubnetId"])


def props(subnet_id: str, cidr: str, reservation_type: str = "explicit") -> dict[str, str]:
    return {
        "SubnetId": subnet_id,
        "Cidr": cidr,
        "ReservationType": reservation_type,
        "Description": "Multus pod addresses",
    }


def reservations(ec2: Any, subnet_id: str) -> list[tuple[str, str, str]]:
    found = ec2.get_subnet_cidr_reservations(SubnetId=subnet_id)["SubnetIpv4CidrReservations"]
    return sorted((r["SubnetCidrReservationId"], r["Cidr"], r["ReservationType"]) for r in found)


def event(request: str, new: dict[str, str], **fields: Any) -> dict[str, Any]:
    return {"RequestType": request, "ResourceProperties": new, **fields}


def test_a_new_subnet_with_the_same_cidr_gets_a_reservation_of_its_own(ec2: Any) -> None:
    # A replaced VPC brings new subnet IDs with the same CIDRs: the reservation must follow.
    old_subnet, new_subnet_id = new_subnet(ec2), new_subnet(ec2)
    old = props(old_subnet, "10.0.4.32/27")
    old_id = handler.on_event(event("Create", old))["PhysicalResourceId"]
    new_id = handler.on_event(
        event(
            "Update",
            props(new_subnet_id, "10.0.4.32/27"),
            OldResourceProperties=old,
            PhysicalResourceId=old_id,
        )
    )["PhysicalResourceId"]
    assert reservations(ec2, new_subnet_id) == [(new_id, "10.0.4.32/27", "explicit")]
    # Another subnet: nothing overlaps, so the old one stays for CloudFormation's cleanup.
    assert reservations(ec2, old_subnet) == [(old_id, "10.0.4.32/27", "explicit")]


def test_a_changed_reservation_type_replaces_the_reservation(ec2: Any) -> None:
    subnet_id = new_subnet(ec2)
    old = props(subnet_id, "10.0.4.32/27", "explicit")
    old_id = handler.on_event(event("Create", old))["PhysicalResourceId"]
    new_id = handler.on_event(
        event(
            "Update",
            props(subnet_id, "10.0.4.32/27", "prefix"),
            OldResourceProperties=old,
            PhysicalResourceId=old_id,
        )
    )["PhysicalResourceId"]
    assert new_id != old_id
    assert reservations(ec2, subnet_id) == [(new_id, "10.0.4.32/27", "prefix")]


def test_a_reservation_of_another_type_is_not_adopted(ec2: Any) -> None:
    subnet_id = new_subnet(ec2)
    handler.on_event(event("Create", props(subnet_id, "10.0.4.32/27", "prefix")))
    with pytest.raises(ClientError, match="overlap"):
        handler.on_event(event("Create", props(subnet_id, "10.0.4.32/27", "explicit")))


def test_create_sends_every_property_to_ec2() -> None:
    ec2 = boto3.client(
        "ec2", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    wanted = props("subnet-0a1b2c3d", "10.0.4.32/27")
    with Stubber(ec2) as stub:
        stub.add_response(
            "get_subnet_cidr_reservations",
            {"SubnetIpv4CidrReservations": [], "SubnetIpv6CidrReservations": []},
            {"SubnetId": "subnet-0a1b2c3d"},
        )
        stub.add_response(
            "create_subnet_cidr_reservation",
            {"SubnetCidrReservation": {"SubnetCidrReservationId": "scr-0123456789abcdef0"}},
            wanted,  # exactly these parameters, or the stub raises
        )
        assert handler.create_or_adopt(ec2, wanted) == "scr-0123456789abcdef0"
        stub.assert_no_pending_responses()


@pytest.mark.parametrize("code", ["UnauthorizedOperation", "RequestLimitExceeded"])
def test_delete_fails_on_anything_but_not_found(code: str) -> None:
    # Only "already gone" is success; a denied or throttled delete would leak the reservation.
    ec2 = boto3.client(
        "ec2", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(ec2) as stub:
        stub.add_client_error("delete_subnet_cidr_reservation", service_error_code=code)
        with pytest.raises(ClientError, match=code):
            handler.release(ec2, "scr-0123456789abcdef0")


def test_an_unknown_request_type_is_an_error(ec2: Any) -> None:
    with pytest.raises(ValueError, match="unknown RequestType 'Replace'"):
        handler.on_event(event("Replace", props("subnet-0a1b2c3d", "10.0.4.32/27")))


def test_a_retried_create_adopts_an_ipv6_reservation_too() -> None:
    ec2 = boto3.client(
        "ec2", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    wanted = props("subnet-0a1b2c3d", "2600:1f14:abc:4200::/80")
    existing = {
        "SubnetCidrReservationId": "scr-0aaaaaaaaaaaaaaa6",
        "SubnetId": "subnet-0a1b2c3d",
        "Cidr": "2600:1f14:abc:4200::/80",
        "ReservationType": "explicit",
    }
    with Stubber(ec2) as stub:
        stub.add_response(
            "get_subnet_cidr_reservations",
            {"SubnetIpv4CidrReservations": [], "SubnetIpv6CidrReservations": [existing]},
            {"SubnetId": "subnet-0a1b2c3d"},
        )
        # No create call is stubbed: one would fail the test.
        assert handler.create_or_adopt(ec2, wanted) == "scr-0aaaaaaaaaaaaaaa6"


def test_an_old_reservation_without_a_usable_cidr_is_left_for_cleanup(ec2: Any) -> None:
    # Only a CIDR that overlaps the new one forces the early release; anything else is
    # released by CloudFormation's cleanup after the update succeeded.
    subnet_id = new_subnet(ec2)
    old_id = handler.on_event(event("Create", props(subnet_id, "10.0.4.32/27")))[
        "PhysicalResourceId"
    ]
    old_without_cidr = {k: v for k, v in props(subnet_id, "").items() if k != "Cidr"}
    new_id = handler.on_event(
        event(
            "Update",
            props(subnet_id, "10.0.4.64/27"),
            OldResourceProperties=old_without_cidr,
            PhysicalResourceId=old_id,
        )
    )["PhysicalResourceId"]
    assert reservations(ec2, subnet_id) == sorted(
        [(old_id, "10.0.4.32/27", "explicit"), (new_id, "10.0.4.64/27", "explicit")]
    )
