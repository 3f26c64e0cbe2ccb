"""A Multus network's connection tracking timeouts (config/connection_tracking.py has EC2's
limits and defaults, and why a network function sets them)."""

from __future__ import annotations

from pydantic import Field, model_validator

from config.connection_tracking import TIMEOUT_LIMITS, ConnectionTracking
from config.model.base import StrictModel

_TCP = TIMEOUT_LIMITS["tcp_established_timeout"]
_UDP_STREAM = TIMEOUT_LIMITS["udp_stream_timeout"]
_UDP = TIMEOUT_LIMITS["udp_timeout"]


class ConnectionTrackingConfig(StrictModel):
    """The idle timeouts, in seconds, the network's security groups keep a tracked flow for,
    set on each of the network's ENIs when the node creates it (docs/network.md, Connection
    tracking). Unset: EC2's default."""

    tcp_established_timeout: int | None = Field(
        default=None,
        ge=_TCP.minimum,
        le=_TCP.maximum,
        description=f"Idle established TCP connections, {_TCP.minimum}-{_TCP.maximum} "
        f"(EC2's default: {_TCP.default}).",
    )
    udp_stream_timeout: int | None = Field(
        default=None,
        ge=_UDP_STREAM.minimum,
        le=_UDP_STREAM.maximum,
        description=f"Idle UDP flows that have seen more than one request and reply "
        f"(streams, such as GTP-U), {_UDP_STREAM.minimum}-{_UDP_STREAM.maximum} "
        f"(EC2's default: {_UDP_STREAM.default}).",
    )
    udp_timeout: int | None = Field(
        default=None,
        ge=_UDP.minimum,
        le=_UDP.maximum,
        description=f"Idle UDP flows with traffic one way or one request and reply, "
        f"{_UDP.minimum}-{_UDP.maximum} (EC2's default: {_UDP.default}).",
    )

    @model_validator(mode="after")
    def _some_timeout(self) -> ConnectionTrackingConfig:
        if self.planned() == ConnectionTracking():
            raise ValueError(
                "set at least one of tcp_established_timeout, udp_stream_timeout and "
                "udp_timeout, or leave connection_tracking out for EC2's defaults"
            )
        return self

    def planned(self) -> ConnectionTracking:
        return ConnectionTracking(
            tcp_established_timeout=self.tcp_established_timeout,
            udp_stream_timeout=self.udp_stream_timeout,
            udp_timeout=self.udp_timeout,
        )
