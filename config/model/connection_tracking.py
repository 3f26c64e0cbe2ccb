"""A Multus network's connection tracking timeouts (config/connection_tracking.py has EC2's
limits and defaults, and why a network function sets them)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from config.connection_tracking import TIMEOUT_LIMITS, ConnectionTracking
from config.model.base import StrictModel, unit


def _timeout(field: str, flows: str) -> Any:
    limit = TIMEOUT_LIMITS[field]
    return Field(
        default=None,
        ge=limit.minimum,
        le=limit.maximum,
        json_schema_extra=unit("seconds", "second"),
        description=f"{flows}, {limit.minimum}-{limit.maximum} (EC2's default: {limit.default}).",
    )


class ConnectionTrackingConfig(StrictModel):
    """The idle timeouts, in seconds, the network's security groups keep a tracked flow for,
    set on each of the network's ENIs when the node creates it (docs/network.md, Connection
    tracking). Unset: EC2's default."""

    tcp_established_timeout: int | None = _timeout(
        "tcp_established_timeout", "Idle established TCP connections"
    )
    udp_stream_timeout: int | None = _timeout(
        "udp_stream_timeout",
        "Idle UDP flows that have seen more than one request and reply (streams, such as GTP-U)",
    )
    udp_timeout: int | None = _timeout(
        "udp_timeout", "Idle UDP flows with traffic one way or one request and reply"
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
