"""EC2's connection tracking timeouts of a network interface: the ConnectionTrackingSpecification
of CreateNetworkInterface, their limits and defaults.

Source: botocore's EC2 model (data/ec2/2016-11-15/service-2.json,
ConnectionTrackingSpecificationRequest) and the EC2 User Guide, "Connection tracking timeouts"
(security-group-connection-tracking.html). A security group tracks the flows it allows
(unless rules allow all traffic both ways); a flow idle for longer than its timeout is
forgotten, and its next packet from the side that did not open it is judged by the rules as a
new flow, so a reply that no ingress rule allows is dropped. A 5G core's flows can idle for
minutes: service-based HTTP/2 connections (TCP), GTP-U tunnels and PFCP associations (UDP).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TimeoutLimit:
    """One timeout: the EC2 member that takes it, its range in seconds and EC2's default."""

    ec2_member: str
    minimum: int
    maximum: int
    default: str


TIMEOUT_LIMITS: dict[str, TimeoutLimit] = {
    "tcp_established_timeout": TimeoutLimit(
        "TcpEstablishedTimeout",
        60,
        432_000,
        "432000 s (5 days); 350 s on Nitro v6 instance types (except P6e-GB200)",
    ),
    "udp_stream_timeout": TimeoutLimit("UdpStreamTimeout", 60, 180, "180 s"),
    "udp_timeout": TimeoutLimit("UdpTimeout", 30, 60, "30 s"),
}


@dataclass(frozen=True)
class ConnectionTracking:
    """The timeouts a network's ENIs are created with (None: EC2's default)."""

    tcp_established_timeout: int | None = None
    udp_stream_timeout: int | None = None
    udp_timeout: int | None = None

    def ec2_members(self) -> tuple[tuple[str, int], ...]:
        """(ConnectionTrackingSpecificationRequest member, seconds) of each timeout set."""
        return tuple(
            (limit.ec2_member, seconds)
            for field, limit in TIMEOUT_LIMITS.items()
            if (seconds := getattr(self, field)) is not None
        )
