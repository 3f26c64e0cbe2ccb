"""What a Multus network's security-group rule means to EC2: its IpProtocol and port range.

EC2 filters ports only for TCP and UDP (and types and codes for ICMP): "specifying -1 or a
protocol number other than tcp, udp, icmp, or icmpv6 allows traffic on all ports, regardless
of any port range you specify" (EC2 API Reference, IpPermission, IpProtocol). A rule with
ports is therefore accepted only for tcp and udp; SCTP (132) and every other protocol can be
allowed only as a whole, from a source.

The rules end up as aws-cdk ec2.Port objects, whose protocol is the ec2.Protocol enum
(aws-cdk-lib aws-ec2/lib/port.ts): it names the IANA-assigned protocols and lacks 13, 61 and
144-252, which therefore cannot be expressed (tests/unit/config/test_security_group_rules.py
holds this table against the enum).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Protocol names a rule may use, and the IpProtocol EC2 takes for each.
PROTOCOL_NAMES = {"all": "-1", "tcp": "tcp", "udp": "udp", "icmp": "icmp", "sctp": "132"}
#: Numbers EC2 answers with a name (IpPermission: tcp, udp, icmp, icmpv6); aws-cdk uses these.
_NAMED_NUMBERS = {1: "icmp", 6: "tcp", 17: "udp", 58: "icmpv6"}
#: Protocol numbers aws-cdk's ec2.Protocol has no member for.
PROTOCOLS_WITHOUT_CDK_PORT = frozenset({13, 61, *range(144, 253)})
#: The only IpProtocols whose port range EC2 enforces, with a port range in a rule.
PORT_FILTERED = ("tcp", "udp")
LOWEST_PORT, HIGHEST_PORT = 1, 65535


@dataclass(frozen=True)
class PortRange:
    """A rule's ports: from_port to to_port, inclusive."""

    from_port: int
    to_port: int


def ip_protocol(protocol: str | int) -> str:
    """EC2's IpProtocol for a rule's protocol: a name of PROTOCOL_NAMES or a number -1..255."""
    if isinstance(protocol, bool):
        raise ValueError(_protocol_choices(repr(protocol)))
    if isinstance(protocol, str) and not protocol.lstrip("-").isdigit():
        if protocol not in PROTOCOL_NAMES:
            raise ValueError(_protocol_choices(repr(protocol)))
        return PROTOCOL_NAMES[protocol]
    number = int(protocol)
    if not -1 <= number <= 255:
        raise ValueError(_protocol_choices(str(number)))
    if number in PROTOCOLS_WITHOUT_CDK_PORT:
        raise ValueError(
            f"protocol {number}: aws-cdk's ec2.Protocol offers no rule for it (it lists the "
            "IANA-assigned protocols: 0-143 except 13 and 61, and 253-255); pick one of those"
        )
    return _NAMED_NUMBERS.get(number, str(number))


def _protocol_choices(given: str) -> str:
    return (
        f"protocol {given} is neither a name ({', '.join(PROTOCOL_NAMES)}) nor an IP protocol "
        'number -1..255 (-1: all); for example "sctp" or 132'
    )


def port_range(ports: int | str) -> PortRange:
    """A rule's `ports`: one port (38412) or a range "from-to" ("30000-32767")."""
    text = str(ports)
    first, separator, last = text.partition("-")
    if isinstance(ports, bool) or not first.isdigit() or (separator and not last.isdigit()):
        raise ValueError(
            f'ports {ports!r} is neither a port nor a range; for example 2152 or "30000-32767"'
        )
    from_port, to_port = int(first), int(last or first)
    for port in (from_port, to_port):
        if not LOWEST_PORT <= port <= HIGHEST_PORT:
            raise ValueError(
                f"ports {ports!r}: {port} is outside {LOWEST_PORT}-{HIGHEST_PORT}; omit ports "
                "for every port"
            )
    if from_port > to_port:
        raise ValueError(
            f'ports {ports!r}: the range starts above its end; write "{to_port}-{from_port}"'
        )
    return PortRange(from_port, to_port)
