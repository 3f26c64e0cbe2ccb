"""Lambda handler behind the SubnetCidrReservation custom resource (custom_resources.Provider).

Resource properties: SubnetId, Cidr, ReservationType ("explicit" or "prefix"), Description.
The physical resource ID is the reservation ID (scr-...).

- Create: reserve the CIDR. A retried create (the first attempt succeeded but its response was
  lost) finds the identical reservation already in place and adopts it instead of failing.
- Update: reserve the new CIDR and return its ID, so CloudFormation deletes the old reservation
  during cleanup. EC2 rejects overlapping reservations in one subnet, so when the new CIDR
  overlaps the old one in the same subnet the old one is released first.
- Delete: release the reservation; one that is already gone counts as success.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import boto3
from botocore.exceptions import ClientError

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

RESERVATION_ID_PREFIX = "scr-"
MANAGED_KEYS = ("SubnetId", "Cidr", "ReservationType")


def on_event(event: dict[str, Any], _context: object = None) -> dict[str, Any]:
    request = event["RequestType"]
    props = event["ResourceProperties"]
    LOG.info("%s %s", request, {key: props.get(key) for key in MANAGED_KEYS})
    ec2 = boto3.client("ec2")
    if request == "Create":
        reservation_id = create_or_adopt(ec2, props)
    elif request == "Update":
        reservation_id = update(
            ec2, props, event["OldResourceProperties"], event["PhysicalResourceId"]
        )
    elif request == "Delete":
        reservation_id = event["PhysicalResourceId"]
        release(ec2, reservation_id)
    else:
        raise ValueError(f"unknown RequestType {request!r}")
    return {
        "PhysicalResourceId": reservation_id,
        "Data": {"ReservationId": reservation_id, "Cidr": props["Cidr"]},
    }


def create_or_adopt(ec2: Any, props: dict[str, Any]) -> str:
    existing = find_identical(ec2, props)
    if existing:
        LOG.info("adopting existing reservation %s", existing)
        return existing
    response = ec2.create_subnet_cidr_reservation(
        SubnetId=props["SubnetId"],
        Cidr=props["Cidr"],
        ReservationType=props["ReservationType"],
        Description=props.get("Description", ""),
    )
    return str(response["SubnetCidrReservation"]["SubnetCidrReservationId"])


def update(ec2: Any, props: dict[str, Any], old: dict[str, Any], old_id: str) -> str:
    if all(props.get(key) == old.get(key) for key in MANAGED_KEYS):
        return old_id
    same_subnet = props["SubnetId"] == old.get("SubnetId")
    if same_subnet and _overlap(props["Cidr"], old.get("Cidr", "")):
        release(ec2, old_id)
    return create_or_adopt(ec2, props)


def release(ec2: Any, reservation_id: str) -> None:
    if not reservation_id.startswith(RESERVATION_ID_PREFIX):
        LOG.info("%s was never created; nothing to release", reservation_id)
        return
    try:
        ec2.delete_subnet_cidr_reservation(SubnetCidrReservationId=reservation_id)
    except ClientError as error:
        if not error.response["Error"]["Code"].endswith(".NotFound"):
            raise
        LOG.info("reservation %s already gone", reservation_id)


def find_identical(ec2: Any, props: dict[str, Any]) -> str | None:
    response = ec2.get_subnet_cidr_reservations(SubnetId=props["SubnetId"])
    reservations = response.get("SubnetIpv4CidrReservations", []) + response.get(
        "SubnetIpv6CidrReservations", []
    )
    for reservation in reservations:
        if (
            reservation["Cidr"] == props["Cidr"]
            and reservation["ReservationType"] == props["ReservationType"]
        ):
            return str(reservation["SubnetCidrReservationId"])
    return None


def _overlap(cidr: str, other: str) -> bool:
    try:
        return ipaddress.ip_network(cidr).overlaps(ipaddress.ip_network(other))
    except (TypeError, ValueError):
        return False
