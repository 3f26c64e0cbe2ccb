"""A rule's protocol and ports as EC2 takes them (EC2 API Reference, IpPermission: IpProtocol is
a name, tcp, udp, icmp or icmpv6, or a number, -1 for all; ports are filtered for tcp and udp
only; ports are 16-bit) and as aws-cdk can express them (aws-cdk-lib aws-ec2/lib/port.ts,
the ec2.Protocol enum)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest
from aws_cdk import aws_ec2 as ec2

from config.security_group_rules import (
    PROTOCOL_NAMES,
    PROTOCOLS_WITHOUT_CDK_PORT,
    PortRange,
    ip_protocol,
    port_range,
)


def test_the_numbers_aws_cdk_cannot_express_are_those_its_enum_lacks() -> None:
    rendered = {
        ec2.Port(protocol=member, string_representation=member.name).to_rule_json()["ipProtocol"]
        for member in ec2.Protocol
    }
    # EC2's names for 1, 6, 17 and 58 are what aws-cdk renders those members as.
    numbers = {int(p) for p in rendered if p.lstrip("-").isdigit()} | {1, 6, 17, 58}
    assert set(range(256)) - numbers == PROTOCOLS_WITHOUT_CDK_PORT
    assert {ip_protocol(name) for name in PROTOCOL_NAMES} <= rendered


@pytest.mark.parametrize(
    ("protocol", "expected"),
    [
        ("all", "-1"),
        (-1, "-1"),
        ("sctp", "132"),
        (132, "132"),
        ("132", "132"),
        (6, "tcp"),
        (17, "udp"),
        (1, "icmp"),
        (58, "icmpv6"),
        (0, "0"),
        (12, "12"),
        (14, "14"),
        (143, "143"),
        (253, "253"),
        (255, "255"),
    ],
)
def test_protocols_ec2_and_aws_cdk_take(protocol: str | int, expected: str) -> None:
    assert ip_protocol(protocol) == expected


@pytest.mark.parametrize("protocol", [-2, 256, 13, 61, 144, 252, "gtp", "TCP", "X1", True])
def test_protocols_refused(protocol: str | int) -> None:
    with pytest.raises(ValueError, match="protocol"):
        ip_protocol(protocol)


@pytest.mark.parametrize(
    ("ports", "expected"),
    [
        (1, PortRange(1, 1)),
        (65535, PortRange(65535, 65535)),
        ("2152", PortRange(2152, 2152)),
        ("2152-2152", PortRange(2152, 2152)),
        ("1-65535", PortRange(1, 65535)),
    ],
)
def test_ports_on_both_sides_of_the_bounds(ports: int | str, expected: PortRange) -> None:
    assert port_range(ports) == expected


@pytest.mark.parametrize(
    ("ports", "message"),
    [
        (0, "0 is outside 1-65535"),
        (65536, "65536 is outside 1-65535"),
        ("0-10", "0 is outside"),
        ("2153-2152", 'write "2152-2153"'),
        ("-5", "neither a port nor a range"),
        ("5-", "neither a port nor a range"),
        ("1,2", "neither a port nor a range"),
        (True, "neither a port nor a range"),
    ],
)
def test_ports_refused(ports: int | str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        port_range(ports)


def test_a_port_range_is_an_immutable_value() -> None:
    with pytest.raises(FrozenInstanceError):
        port_range(2152).to_port = 2153  # type: ignore[misc]
