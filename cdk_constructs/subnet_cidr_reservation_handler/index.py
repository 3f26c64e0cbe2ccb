"""Lambda handler behind the SubnetCidrReservation custom resource (custom_resources.Provider).

Resource properties: SubnetId, Cidr, ReservationType ("explicit" or "prefix"), Description.
The physical resource ID is the reservation ID (scr-...).

An IPv6 pod range has Ipv6PodRange (SubnetCidr, PrefixLength, Offset) instead of Cidr: the
subnet's /64 is only known at deploy time, so the handler cuts the range out of it (block
Offset of size /PrefixLength) and returns it with its first and last address, the /64 and the
/64's VPC router (its ::1, which AWS reserves for it: VPC user guide, "Subnet CIDR blocks").

- Create: reserve the CIDR. A retried create (the first attempt succeeded but its response was
  lost) finds the identical reservation already in place and adopts it instead of failing.
- Update: reserve the new CIDR and return its ID, so CloudFormation deletes the old reservation
  during cleanup. EC2 rejects overlapping reservations in one subnet, so when the new CIDR
  overlaps the old one in the same subnet the old one is released first.
- Delete: release the reservation; one that is already gone counts as success.

Every EC2 call is retried while IAM still refuses it (UnauthorizedOperation right after
CloudFormation created the handler's policy), up to ACCESS_DENIED_PATIENCE_SECONDS; then it
fails as the permission problem it is.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from typing import Any

import boto3
from botocore.exceptions import ClientError

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

RESERVATION_ID_PREFIX = "scr-"
MANAGED_KEYS = ("SubnetId", "Cidr", "ReservationType")
# Within the function's 2-minute timeout, leaving time for the last attempt and the answer.
ACCESS_DENIED_PATIENCE_SECONDS = 90.0


# A role CloudFormation has just created or changed may be refused for a while: IAM is
# eventually consistent (IAM user guide, "Changes that I make are not always immediately
# visible"). EC2 says UnauthorizedOperation, IAM-style services AccessDenied(Exception). The
# AMI release check does the same for SSM (ami_release_check_handler).
PROPAGATION_CODES = frozenset({"UnauthorizedOperation", "AccessDenied", "AccessDeniedException"})
ACCESS_DENIED_PAUSE_SECONDS = 2.0


class PatientClient:
    """A boto3 client whose calls are retried while IAM refuses them, until `patience`
    seconds after the client was made; then the refusal fails as what it is, a permission
    problem of the handler's own role."""

    def __init__(
        self,
        client: Any,
        patience: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._patience = patience
        self._sleep = sleep
        self._clock = clock
        self._deadline = clock() + patience

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if not callable(method):
            return method

        def patient(*args: Any, **kwargs: Any) -> Any:
            while True:
                try:
                    return method(*args, **kwargs)
                except ClientError as error:
                    code = error.response["Error"]["Code"]
                    if code not in PROPAGATION_CODES:
                        raise
                    if self._clock() >= self._deadline:
                        raise RuntimeError(
                            f"EC2 refused {name} with {code} for {self._patience:.0f} s: a "
                            "permission problem of this handler's own role, not of the "
                            "request (IAM had time to propagate a new policy). Deploy again; "
                            "if it persists, look for a permissions boundary or SCP that "
                            "denies it."
                        ) from error
                    LOG.info("%s: %s, retrying while IAM propagates", name, code)
                    self._sleep(ACCESS_DENIED_PAUSE_SECONDS)

        return patient


def on_event(event: dict[str, Any], _context: object = None) -> dict[str, Any]:
    request = event["RequestType"]
    props = with_cidr(event["ResourceProperties"])
    LOG.info("%s %s", request, {key: props.get(key) for key in MANAGED_KEYS})
    ec2 = PatientClient(boto3.client("ec2"), ACCESS_DENIED_PATIENCE_SECONDS)
    if request == "Create":
        reservation_id = create_or_adopt(ec2, props)
    elif request == "Update":
        reservation_id = update(
            ec2, props, with_cidr(event["OldResourceProperties"]), event["PhysicalResourceId"]
        )
    elif request == "Delete":
        reservation_id = event["PhysicalResourceId"]
        release(ec2, reservation_id)
    else:
        raise ValueError(f"unknown RequestType {request!r}")
    data = {"ReservationId": reservation_id, "Cidr": props["Cidr"]}
    if "Ipv6PodRange" in props:
        pod_range = ipaddress.IPv6Network(props["Cidr"])
        subnet = ipaddress.IPv6Network(props["Ipv6PodRange"]["SubnetCidr"])
        data["FirstAddress"] = str(pod_range.network_address)
        data["LastAddress"] = str(pod_range.broadcast_address)
        data["SubnetCidr"] = subnet.compressed
        data["RouterAddress"] = str(subnet.network_address + 1)
    return {"PhysicalResourceId": reservation_id, "Data": data}


def with_cidr(props: dict[str, Any]) -> dict[str, Any]:
    """The properties with Cidr: as given, or the IPv6 pod range cut out of its /64."""
    if "Ipv6PodRange" not in props:
        return props
    return {**props, "Cidr": ipv6_pod_range(props["Ipv6PodRange"])}


def ipv6_pod_range(spec: dict[str, Any]) -> str:
    """Block Offset of size /PrefixLength inside SubnetCidr, as EC2 writes it (compressed)."""
    subnet = ipaddress.IPv6Network(spec["SubnetCidr"])
    prefix_length, offset = int(spec["PrefixLength"]), int(spec["Offset"])
    block_size = 2 ** (ipaddress.IPV6LENGTH - prefix_length)
    pod_range = ipaddress.IPv6Network((subnet.network_address + offset * block_size, prefix_length))
    if not pod_range.subnet_of(subnet):
        raise ValueError(f"block {offset} of /{prefix_length} is outside {subnet}")
    return pod_range.compressed


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
            _same_network(reservation["Cidr"], props["Cidr"])
            and reservation["ReservationType"] == props["ReservationType"]
        ):
            return str(reservation["SubnetCidrReservationId"])
    return None


def _same_network(cidr: str, other: str) -> bool:
    # EC2 may spell an IPv6 range otherwise than it was asked (RFC 5952 compressed form).
    return ipaddress.ip_network(cidr) == ipaddress.ip_network(other)


def _overlap(cidr: str, other: str) -> bool:
    try:
        return ipaddress.ip_network(cidr).overlaps(ipaddress.ip_network(other))
    except (TypeError, ValueError):
        return False
