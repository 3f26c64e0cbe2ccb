"""The agent's configuration file and its error type."""

from __future__ import annotations

import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class AgentConfig:
    """socket_path: where the CNI plugin connects. records_dir: one JSON file per pod attachment
    (keep it on a tmpfs such as /run so a reboot forgets them). ready_marker: written once the
    agent serves requests. eni_state_dir: the node bootstrap's <interface>.eni files
    ("<instance-id> <eni-id>"). netns_root: prefix under which the host's /run/netns is visible.
    interfaces: master interface -> address ranges the agent manages on that interface's ENI
    (the Whereabouts ranges, i.e. the CIDR reservations; on a dual-stack network also the IPv6
    pod ranges reserved in its subnets' /64s). static_ranges: master interface ->
    the blocks of fixed addresses inside them (the subnets' static_range), the only addresses a
    request of a static NAD may ask for. floating_addresses: master interface -> addresses of
    its static ranges that move to the node whose pod announces them (floating.py).
    routed_ranges: master interface -> the network's pod_routed_ranges, the only ranges an ADD
    may ask to route to this node. route_tables: master interface -> the IDs of the network's
    route tables (one per subnet), where those ranges' routes are pointed at the node's ENI."""

    socket_path: str
    records_dir: str
    ready_marker: str
    eni_state_dir: str
    interfaces: dict[str, list[str]]
    static_ranges: dict[str, list[str]] = field(default_factory=dict)
    floating_addresses: dict[str, list[str]] = field(default_factory=dict)
    routed_ranges: dict[str, list[str]] = field(default_factory=dict)
    route_tables: dict[str, list[str]] = field(default_factory=dict)
    netns_root: str = ""
    reconcile_seconds: float = 60.0
    #: Addresses changed this recently are left to their in-flight request (EC2 reads are
    #: eventually consistent), not to the reconcile.
    settle_seconds: float = 30.0
    #: How long a worker waits for more requests before calling EC2.
    batch_window_seconds: float = 0.02
    add_timeout_seconds: float = 50.0
    del_timeout_seconds: float = 20.0
    #: How often IMDS is asked whether assigned addresses are on the ENI yet (IMDS reads cost
    #: no EC2 request budget).
    remap_poll_seconds: float = 0.2
    #: TCP port of the Prometheus metrics endpoint (GET /metrics) on every address of the
    #: node; 0: not served.
    metrics_port: int = 0

    @staticmethod
    def load(path: str) -> AgentConfig:
        with open(path, encoding="utf-8") as handle:
            return AgentConfig(**json.load(handle))


class AgentError(Exception):
    """A failure reported to the CNI plugin with a CNI error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
