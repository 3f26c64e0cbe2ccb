"""The reservation handler's whole lifecycle, with real boto3 calls answered by moto."""

from __future__ import annotations

from typing import Any

import pytest

from cdk_constructs.subnet_cidr_reservation_handler import index as handler
from tests.moto_helpers import moto_ec2_fixtures

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
