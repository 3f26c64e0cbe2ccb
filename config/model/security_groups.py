"""A Multus network's security group: its rules, what may pass, from or to where."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import (
    Field,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from config import patterns
from config.model.base import (
    RuleCidr,
    StrictModel,
)
from config.network_plan import RouteTarget
from config.security_group_rules import (
    PORT_FILTERED,
    PROTOCOL_NAMES,
    PortRange,
    ip_protocol,
    port_range,
)

ANYWHERE = "0.0.0.0/0"
ANYWHERE_IPV6 = "::/0"


class SecurityGroupRuleConfig(StrictModel):
    """One rule of a Multus network's security group: what may pass, from or to where."""

    # Strict: a YAML boolean (yes/no) would otherwise arrive as protocol 1 or 0.
    protocol: StrictStr | StrictInt = Field(
        description="all, tcp, udp, icmp, sctp, or an IP protocol number (-1 = all, 132 = "
        "SCTP). EC2 filters ports only for tcp and udp; every other protocol is allowed whole."
    )
    ports: StrictInt | StrictStr | None = Field(
        default=None,
        description='tcp and udp only: one port (2152) or a range ("30000-32767"); omitted: '
        "every port.",
    )
    cidr: RuleCidr | None = Field(
        default=None,
        description="Source (ingress) or destination (egress) CIDR: IPv4, or IPv6 on a network "
        "with ipv6.",
    )
    network: str | None = Field(
        default=None,
        description="Or: the name of a Multus network, whose security group is the source or "
        "destination (its ENIs); a network may name itself (its ENIs reach each other).",
    )
    description: str | None = Field(
        default=None,
        pattern=patterns.SECURITY_GROUP_RULE_DESCRIPTION.regex,
        description="The rule's EC2 description (default: from/to the source or destination).",
    )

    @property
    def ip_protocol(self) -> str:
        return ip_protocol(self.protocol)

    @property
    def port_range(self) -> PortRange | None:
        return None if self.ports is None else port_range(self.ports)

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, protocol: str | int) -> str | int:
        ip_protocol(protocol)
        return protocol

    @field_validator("ports")
    @classmethod
    def _valid_ports(cls, ports: int | str | None) -> int | str | None:
        if ports is not None:
            port_range(ports)
        return ports

    @model_validator(mode="after")
    def _ports_only_where_filtered(self) -> SecurityGroupRuleConfig:
        if self.ports is not None and self.ip_protocol not in PORT_FILTERED:
            raise ValueError(
                f"ports: EC2 filters ports only for tcp and udp; a protocol {self.protocol!r} "
                "rule allows every port whatever range it names (EC2 API Reference, "
                f"IpPermission); omit ports (the whole protocol from this source), for example "
                f'{{"protocol": {json.dumps(self.protocol)}, {self._peer_json()}}}'
            )
        return self

    @model_validator(mode="after")
    def _one_peer(self) -> SecurityGroupRuleConfig:
        if (self.cidr is None) == (self.network is None):
            given = "both" if self.cidr is not None else "neither"
            raise ValueError(
                f"cidr / network: {given} given; a rule names exactly one source or "
                'destination: "cidr": "10.1.0.0/16" or "network": "<a multus network name>"'
            )
        return self

    @model_validator(mode="after")
    def _icmpv6_for_ipv6(self) -> SecurityGroupRuleConfig:
        # EC2 names ICMP for IPv6 icmpv6 (58); protocol icmp (1) never matches it (EC2 API
        # Reference, IpPermission, IpProtocol).
        if self.is_ipv6 and self.ip_protocol == PROTOCOL_NAMES["icmp"]:
            raise ValueError(
                f"protocol: icmp is ICMP for IPv4 and matches nothing from {self.cidr}; use 58 "
                f'(ICMPv6), for example {{"protocol": 58, {self._peer_json()}}}'
            )
        return self

    def _peer_json(self) -> str:
        if self.cidr is not None:
            return f'"cidr": "{self.cidr}"'
        return f'"network": "{self.network}"'

    @property
    def allows_everything_anywhere(self) -> bool:
        return self.ip_protocol == PROTOCOL_NAMES["all"] and self.cidr == ANYWHERE

    @property
    def allows_everything_anywhere_ipv6(self) -> bool:
        return self.ip_protocol == PROTOCOL_NAMES["all"] and self.cidr == ANYWHERE_IPV6

    @property
    def is_ipv6(self) -> bool:
        return self.cidr is not None and ":" in self.cidr

    def rule_description(self, direction: Literal["from", "to"]) -> str:
        peer = self.cidr if self.cidr is not None else f"{self.network} ENIs"
        return self.description or f"{direction} {peer}"


class NetworkSecurityGroupConfig(StrictModel):
    """The security group of one Multus network's ENIs (one group per network)."""

    ingress: list[SecurityGroupRuleConfig] | None = Field(
        default=None,
        description="What may reach the network's ENIs. Unset: all traffic from the VPC CIDR "
        "(the seed's rule); [] admits only replies to the ENIs' own traffic (groups are "
        "stateful).",
    )
    egress: list[SecurityGroupRuleConfig] = Field(
        default_factory=lambda: [SecurityGroupRuleConfig(protocol="all", cidr=ANYWHERE)],
        description="Where the network's ENIs may send (default: all traffic to 0.0.0.0/0, as "
        "in the seed, which makes any other egress rule redundant); [] lets out only replies.",
    )


#: Route targets an operator names by ID: config key -> RouteTarget.
ROUTE_TARGET_IDS: dict[str, RouteTarget] = {
    "transit_gateway_id": "transit_gateway",
    "vpn_gateway_id": "vpn_gateway",
    "network_interface_id": "network_interface",
}
