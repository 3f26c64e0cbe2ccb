"""The typed configuration: the single source of truth for every stack, construct and chart.

Defaults reproduce the seed deployment (two AZs in us-west-2, VPC 10.0.0.0/16, two Multus
networks with a /27 CIDR reservation per subnet). Every cross-field rule is checked here, before
any CDK construct exists, so that a bad value fails with the field's path instead of a jsii trace.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from config import aws_regions, instance_types, karpenter_releases, patterns
from config.cluster_access import (
    RENAMED_KEYS,
    AdminPrincipalArn,
    check_public_access_cidrs,
)
from config.coercion import number_as_version
from config.custom_resource_timing import (
    LONGEST_TEARDOWN_TIMEOUT_MINUTES,
    SERVICE_TIMEOUT_LIMIT_SECONDS,
    TEARDOWN_MARGIN_MINUTES,
)
from config.images import ImagesConfig
from config.interface_names import reserved_interface_reason
from config.logs import LogRetention, LogsConfig
from config.network_plan import (
    IP_MANAGEMENT_MODES,
    IPV6_SUBNET_PREFIX_LENGTH,
    WHEREABOUTS,
    IpManagementMode,
    NetworkPlan,
    RouteTarget,
    network_plan,
    networks_in_order,
    pool_network_plan,
)
from config.node_bootstrap_plan import (
    USER_DATA_LIMIT_BYTES,
    USER_DATA_SIZE,
    UserDataSize,
    node_bootstrap_props,
)
from config.node_labels import DEFAULT_NODE_POOL_NAME
from config.node_pool_rules import (
    label_problems,
    node_pool_requirement_problems,
    taint_problems,
)
from config.node_prefix import (
    check_node_prefix_reservations,
    check_node_prefix_settings,
    default_prefixes_per_node,
)
from config.security_group_rules import (
    PORT_FILTERED,
    PROTOCOL_NAMES,
    PortRange,
    ip_protocol,
    port_range,
)

# AWS keeps the first four addresses and the last one of every subnet for itself.
AWS_RESERVED_HEAD = 4
AWS_RESERVED_TAIL = 1

# The largest gp3 volume (EC2 API reference, EBS block device VolumeSize: gp3 1-16,384 GiB).
GP3_MAX_GIB = 16384
# Subnet and VPC CIDR blocks: AWS allows /16 (65,536 addresses) to /28 (16 addresses).
MIN_PREFIX_LENGTH, MAX_PREFIX_LENGTH = 16, 28

KubernetesVersion = Literal["1.33", "1.34", "1.35", "1.36"]
# Namespaces every cluster has; any other nad_namespace is created by the app.
EXISTING_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# IPv4 ranges a VPC cannot take (special-purpose blocks, RFC 6890).
UNUSABLE_VPC_RANGES: dict[str, ipaddress.IPv4Network] = {
    "'this network'": ipaddress.IPv4Network("0.0.0.0/8"),
    "loopback": ipaddress.IPv4Network("127.0.0.0/8"),
    "link-local, where the instance metadata service lives": ipaddress.IPv4Network(
        "169.254.0.0/16"
    ),
    "multicast": ipaddress.IPv4Network("224.0.0.0/4"),
    "reserved": ipaddress.IPv4Network("240.0.0.0/4"),
}

# CloudFormation waits at most an hour for a custom resource, whatever the Provider's own
# timeout; the teardown's ServiceTimeout is its bound plus the framework's margin.
TEARDOWN_TIMEOUT_LIMIT_MINUTES = LONGEST_TEARDOWN_TIMEOUT_MINUTES
# Between a NodeClaim's drain deadline and its instance being gone: EC2 shutdown and Karpenter's
# finalizers take a few minutes; the teardown bound must leave room for them.
NODE_TERMINATION_MARGIN_MINUTES = 10


ACCOUNT_PATTERN = patterns.ACCOUNT_ID.regex
_K8S_NAME = patterns.KUBERNETES_NAME.regex
_LINUX_IFNAME = patterns.LINUX_INTERFACE_NAME.regex
_CPU_QUANTITY = patterns.CPU_QUANTITY.regex
_MEMORY_QUANTITY = patterns.MEMORY_QUANTITY.regex
_DURATION_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def _ipv4_network(value: str) -> str:
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError as error:
        raise ValueError(
            f"{value!r} is not an IPv4 CIDR block with its host bits unset "
            f"(for example 10.0.4.0/24): {error}"
        ) from None
    return value


Cidr = Annotated[str, AfterValidator(_ipv4_network)]


def _ipv4_or_ipv6_network(value: str) -> str:
    if ":" not in value:
        return _ipv4_network(value)
    try:
        ipaddress.IPv6Network(value, strict=True)
    except ValueError as error:
        raise ValueError(
            f"{value!r} is not an IPv6 CIDR block with its host bits unset "
            f"(for example 2001:db8::/32): {error}"
        ) from None
    return value


#: A security-group rule's peer: IPv4 (10.0.0.0/16) or IPv6 (::/0).
RuleCidr = Annotated[str, AfterValidator(_ipv4_or_ipv6_network)]


def _subnet_size(value: str) -> str:
    if not MIN_PREFIX_LENGTH <= net(value).prefixlen <= MAX_PREFIX_LENGTH:
        raise ValueError(
            f"{value}: AWS subnets are /{MIN_PREFIX_LENGTH} to /{MAX_PREFIX_LENGTH} "
            f"(for example 10.0.4.0/24)"
        )
    return value


SubnetCidr = Annotated[Cidr, AfterValidator(_subnet_size)]


def _gp3_size(value: int) -> int:
    if value > GP3_MAX_GIB:
        raise ValueError(f"{value} GiB: a gp3 volume holds at most {GP3_MAX_GIB} GiB (16 TiB)")
    return value


Gp3SizeGib = Annotated[int, AfterValidator(_gp3_size)]


def _instance_type(value: str) -> str:
    if value not in instance_types.ec2_instance_types():
        raise ValueError(
            f"{value!r} is not an EC2 instance type known to the EC2 API "
            "(check the spelling, for example m6i.large)"
        )
    return value


InstanceType = Annotated[str, AfterValidator(_instance_type)]


def duration_seconds(duration: str) -> int:
    """Seconds of a Karpenter duration such as 1h30m."""
    return sum(
        int(amount) * _DURATION_UNIT_SECONDS[unit]
        for amount, unit in re.findall(r"([0-9]+)([smh])", duration)
    )


def net(cidr: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(cidr)


# Every config section rejects unknown keys (typos) and is immutable once validated.
class StrictModel(BaseModel):
    """Base of every config section: unknown keys (typos) are rejected, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # Old key -> what replaced it: an old key fails with this text instead of "extra input".
    renamed_keys: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: object) -> object:
        if isinstance(data, dict):
            for old, new in cls.renamed_keys.items():
                if old in data:
                    raise ValueError(f"{old} was replaced by {new}")
        return data


class MultusSubnetConfig(StrictModel):
    """One Multus subnet (in the AZ at the same position of `availability_zones`)."""

    cidr: SubnetCidr = Field(description="The subnet's IPv4 CIDR (/16 to /28), inside the VPC.")
    reservation: Cidr = Field(
        description="Explicit CIDR reservation kept for Multus pod addresses (Whereabouts range)."
    )
    static_range: Cidr | None = Field(
        default=None,
        description="whereabouts networks only: a CIDR inside the reservation for fixed pod "
        "addresses, which pods ask for in their network annotation (`ips`) through the "
        "<network>-<az>-static NAD; Whereabouts hands out the rest of the reservation "
        "(docs/multus-pod-ips.md, fixed addresses).",
    )

    @model_validator(mode="after")
    def _reservation_inside_usable_range(self) -> MultusSubnetConfig:
        subnet, reserved = net(self.cidr), net(self.reservation)
        first_usable = subnet.network_address + AWS_RESERVED_HEAD
        last_usable = subnet.broadcast_address - AWS_RESERVED_TAIL
        if not reserved.subnet_of(subnet):
            raise ValueError(
                f"reservation: {self.reservation} is not inside subnet {self.cidr}; pick a "
                "range inside it"
            )
        if reserved.network_address < first_usable or reserved.broadcast_address > last_usable:
            raise ValueError(
                f"reservation: {self.reservation} overlaps the addresses AWS keeps in "
                f"{self.cidr} (the first {AWS_RESERVED_HEAD} and the last one); "
                f"keep it within {first_usable}-{last_usable}"
            )
        return self

    @model_validator(mode="after")
    def _static_range_inside_reservation(self) -> MultusSubnetConfig:
        # The dynamic range is the reservation minus the static range (Whereabouts' `exclude`),
        # so a static range inside the reservation can never overlap it.
        if self.static_range is None:
            return self
        static, reserved = net(self.static_range), net(self.reservation)
        if not static.subnet_of(reserved):
            raise ValueError(
                f"static_range: {self.static_range} is not inside reservation "
                f"{self.reservation}: fixed addresses come out of the reservation (EC2 gives "
                "none of its addresses to an ENI by itself), and Whereabouts hands out the rest "
                f"of it; {_smaller_block_hint(reserved)}"
            )
        if static == reserved:
            raise ValueError(
                f"static_range: {self.static_range} is the whole reservation, which would leave "
                f"Whereabouts no dynamic address; {_smaller_block_hint(reserved)}"
            )
        return self


def _smaller_block_hint(reservation: ipaddress.IPv4Network) -> str:
    if reservation.prefixlen == ipaddress.IPV4LENGTH:
        return "enlarge the reservation to hold both"
    upper_half = list(reservation.subnets(prefixlen_diff=1))[-1]
    return f"pick a smaller block inside it, for example {upper_half}"


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


class MultusRouteConfig(StrictModel):
    """A destination outside the VPC (the RAN, a data network) that a Multus network's subnets
    route to one target, and its pods over their Multus interface (docs/network.md)."""

    destination: Cidr = Field(
        description="IPv4 CIDR outside the VPC, for example the RAN's gNB range (N3) or a data "
        "network (N6); not 0.0.0.0/0 (the default route is nat_egress)."
    )
    transit_gateway_id: str | None = Field(
        default=None,
        pattern=patterns.TRANSIT_GATEWAY_ID.regex,
        description="Target: a transit gateway with an attachment to this VPC "
        "(docs/network.md, Routes to the RAN and data networks).",
    )
    vpn_gateway_id: str | None = Field(
        default=None,
        pattern=patterns.VPN_GATEWAY_ID.regex,
        description="Target: a virtual private gateway attached to this VPC.",
    )
    network_interface_id: str | None = Field(
        default=None,
        pattern=patterns.NETWORK_INTERFACE_ID.regex,
        description="Target: a network interface in this VPC (an appliance, a router instance).",
    )
    nat_gateway: StrictBool = Field(
        default=False,
        description="Target: true = the NAT gateway of the subnet's AZ (vpc.nat_gateways "
        "single: the one NAT gateway).",
    )
    description: str | None = Field(
        default=None,
        max_length=255,
        description="What the destination is, for readers of the config (EC2 routes carry no "
        "description).",
    )

    @field_validator("destination")
    @classmethod
    def _not_the_default_route(cls, destination: str) -> str:
        if destination == ANYWHERE:
            raise ValueError(
                f"{ANYWHERE} is the default route, which the network's nat_egress gives (to "
                "the AZ's NAT gateway); routes name the ranges beyond the VPC, for example "
                "10.200.0.0/16"
            )
        return destination

    @model_validator(mode="after")
    def _one_target(self) -> MultusRouteConfig:
        given = [key for key in ROUTE_TARGET_IDS if getattr(self, key) is not None]
        given += ["nat_gateway"] if self.nat_gateway else []
        if len(given) != 1:
            keys = ", ".join([*ROUTE_TARGET_IDS, "nat_gateway: true"])
            found = " and ".join(given) if given else "none"
            raise ValueError(
                f"a route has exactly one target ({keys}); {self.destination} has {found}"
            )
        return self

    def _target_key(self) -> str | None:
        """The key of the target named by ID (None: the NAT gateway)."""
        return next((key for key in ROUTE_TARGET_IDS if getattr(self, key) is not None), None)

    @property
    def target(self) -> RouteTarget:
        key = self._target_key()
        return "nat_gateway" if key is None else ROUTE_TARGET_IDS[key]

    @property
    def target_id(self) -> str | None:
        """The target's ID; None for nat_gateway (the network stack knows each AZ's)."""
        key = self._target_key()
        return None if key is None else str(getattr(self, key))


class NetworkIpv6Config(StrictModel):
    """A dual-stack Multus network: each subnet gets a /64 of the VPC's IPv6 block and pods an
    IPv6 address from a range of it, reserved like the IPv4 one (docs/network.md, Dual stack)."""

    pod_range_prefix_length: int = Field(
        default=112,
        ge=IPV6_SUBNET_PREFIX_LENGTH + 1,
        le=ipaddress.IPV6LENGTH,
        description="Size of the pod range inside each subnet's /64 (default /112: 65,536 "
        "addresses, more than any node count can use).",
    )
    pod_range_offset: int = Field(
        default=1,
        ge=1,
        description="Which block of that size in the /64 the pod range is (0 would hold the "
        "four addresses AWS keeps at the start of the /64, the last block its last address; "
        "the reservation's handler cuts the block out of the /64 at deploy time).",
    )

    @model_validator(mode="after")
    def _offset_inside_the_subnet(self) -> NetworkIpv6Config:
        blocks = 2 ** (self.pod_range_prefix_length - IPV6_SUBNET_PREFIX_LENGTH)
        # Block 0 holds the first four addresses AWS keeps, the last block the last one.
        highest = blocks - 2
        if highest < 1:
            raise ValueError(
                f"pod_range_prefix_length: a /{self.pod_range_prefix_length} splits the /64 in "
                f"{blocks} blocks, each holding addresses AWS keeps (the first four and the "
                f"last of the /64); use /{IPV6_SUBNET_PREFIX_LENGTH + 2} or longer, for "
                "example 112"
            )
        if self.pod_range_offset > highest:
            raise ValueError(
                f"pod_range_offset: {self.pod_range_offset} is outside the /64: it holds "
                f"{blocks} blocks of /{self.pod_range_prefix_length}, of which 1-{highest} "
                "are clear of the addresses AWS keeps; pick one of them, for example 1"
            )
        return self


class MultusNetworkConfig(StrictModel):
    """A secondary network: one ENI per node, one subnet per AZ, one NAD per AZ."""

    name: str = Field(
        pattern=_K8S_NAME,
        max_length=40,
        description="Network name: NAD names (<name>-<az>), subnet Name tags and, unless "
        "interface_name is set, the node's interface name.",
    )
    interface_name: str | None = Field(
        default=None,
        pattern=_LINUX_IFNAME,
        description="Stable Linux interface name of this network's ENI (default: the name).",
    )
    subnets: list[MultusSubnetConfig] = Field(
        min_length=1, description="One subnet per AZ, in the order of availability_zones."
    )
    ipvlan_mode: Literal["l2"] = Field(
        default="l2",
        description="ipvlan mode of this network's NADs. Only l2: in l3 and l3s the node's own "
        "routing table forwards the pods' packets, and the node gives Multus interfaces no "
        "address, route or rule (docs/network.md).",
    )
    source_dest_check: bool = Field(
        default=False,
        description="Keep EC2's source/destination check on this network's ENIs. Off (default, "
        "as in the seed) for pods that send or receive packets whose addresses are not on the "
        "ENI, such as a UPF's UE pool on N6; on for pods that only use their own addresses "
        "(docs/network.md).",
    )
    nat_egress: bool = Field(
        default=True, description="Default route to the AZ's NAT gateway (as in the seed)."
    )
    ip_management: Literal["whereabouts", "node_prefix"] = Field(
        default="whereabouts",
        description="whereabouts: pod addresses from the reservation, assigned per pod. "
        "node_prefix: each node's ENI gets /28 prefixes of the (prefix-type) reservation at "
        "boot and hands pod addresses out of them locally (docs/node-prefix-mode.md).",
    )
    prefixes_per_node: int | None = Field(
        default=None,
        ge=1,
        description="node_prefix only: /28 prefixes on each node's ENI (default: enough for "
        "the max pods of the largest size, see config/node_prefix.py).",
    )
    security_group: NetworkSecurityGroupConfig = Field(
        default_factory=NetworkSecurityGroupConfig,
        description="Rules of this network's own security group, which only its ENIs carry "
        "(docs/network.md, Security groups).",
    )
    routes: list[MultusRouteConfig] = Field(
        default=[],
        description="Ranges beyond the VPC (RAN, data networks) in the route tables of the "
        "network's subnets and, via the subnet's VPC router, in its pods over the Multus "
        "interface (docs/network.md, Routes to the RAN and data networks).",
    )
    ipv6: NetworkIpv6Config | None = Field(
        default=None,
        description="Dual stack: the network's subnets get a /64 of the VPC's IPv6 block "
        "(needs vpc.ipv6) and pods an IPv6 address next to the IPv4 one (docs/network.md, "
        "Dual stack). Unset: IPv4 only.",
    )

    @property
    def device_name(self) -> str:
        return self.interface_name or self.name

    @property
    def egress_rules(self) -> list[SecurityGroupRuleConfig]:
        """The egress rules; unset on a dual-stack network: all traffic to 0.0.0.0/0 and ::/0
        (the seed's two rules)."""
        rules = self.security_group.egress
        if self.ipv6 is not None and "egress" not in self.security_group.model_fields_set:
            return [*rules, SecurityGroupRuleConfig(protocol="all", cidr=ANYWHERE_IPV6)]
        return rules

    @property
    def mode(self) -> IpManagementMode:
        return IP_MANAGEMENT_MODES[self.ip_management]

    @field_validator("ipvlan_mode", mode="before")
    @classmethod
    def _no_host_routed_ipvlan_mode(cls, mode: object) -> object:
        # In l3/l3s the master's namespace routes the pods' packets (kernel
        # Documentation/networking/ipvlan.rst, "4.2 L3 mode"); the bootstrap leaves the master
        # without address, route or rule (node_bootstrap/multus_eni_bootstrap.sh).
        if mode in ("l3", "l3s"):
            raise ValueError(
                f"{mode} is not supported: in ipvlan {mode} the node's routing table forwards "
                "the pods' packets, and the node gives Multus interfaces no address, route or "
                'rule (docs/network.md); use "l2"'
            )
        return mode

    @model_validator(mode="after")
    def _node_prefix_settings(self) -> MultusNetworkConfig:
        check_node_prefix_settings(
            self.name,
            self.mode,
            self.prefixes_per_node,
            [subnet.reservation for subnet in self.subnets],
        )
        return self

    @model_validator(mode="after")
    def _static_ranges_need_whereabouts(self) -> MultusNetworkConfig:
        if self.mode.static_addresses:
            return self
        for index, subnet in enumerate(self.subnets):
            if subnet.static_range is not None:
                raise ValueError(
                    f"subnets[{index}].static_range: fixed addresses need ip_management "
                    f"{WHEREABOUTS.name!r}; in {self.ip_management!r} mode each node hands out "
                    "addresses of its own /28 prefixes, so an address cannot follow its pod to "
                    "another node: remove static_range or use ip_management "
                    f"{WHEREABOUTS.name!r}"
                )
        return self

    @model_validator(mode="after")
    def _routes_distinct_and_in_the_nad(self) -> MultusNetworkConfig:
        if self.routes and self.mode.node_local_config:
            raise ValueError(
                f"routes: {self.ip_management!r} networks get their pods' CNI config from the "
                "node, which carries no routes; routes need ip_management "
                f"{WHEREABOUTS.name!r} (routes in the NAD) or remove them"
            )
        destinations = [route.destination for route in self.routes]
        for index, destination in enumerate(destinations):
            if destination in destinations[:index]:
                raise ValueError(
                    f"routes[{index}].destination: {destination} is routed twice; a route table "
                    "holds one route per destination, so keep one of them"
                )
        return self

    @model_validator(mode="after")
    def _dual_stack_settings(self) -> MultusNetworkConfig:
        if self.ipv6 is None:
            group = self.security_group
            for direction, rules in (("ingress", group.ingress or []), ("egress", group.egress)):
                for position, rule in enumerate(rules):
                    if rule.is_ipv6:
                        raise ValueError(
                            f"security_group.{direction}[{position}].cidr: {rule.cidr} is "
                            "IPv6, but the network has no IPv6 addresses; set this network's "
                            'ipv6 (for example "ipv6": {}) or give an IPv4 CIDR'
                        )
            return self
        if self.mode.node_local_config:
            raise ValueError(
                f"ipv6: not available with ip_management {self.ip_management!r} yet (each node "
                "hands out IPv4 addresses of its own /28 prefixes; IPv6 prefixes are not "
                f"delegated); use ip_management {WHEREABOUTS.name!r} or remove ipv6"
            )
        for index, subnet in enumerate(self.subnets):
            if subnet.static_range is not None:
                raise ValueError(
                    f"subnets[{index}].static_range: fixed addresses are IPv4 only, and a pod "
                    "of a dual-stack network would get no IPv6 address from them; remove "
                    "static_range or ipv6"
                )
        return self

    @model_validator(mode="after")
    def _name_usable_as_interface(self) -> MultusNetworkConfig:
        if self.interface_name is None and not re.match(_LINUX_IFNAME, self.name):
            raise ValueError(
                f"name {self.name!r} cannot double as a Linux interface name "
                "(lowercase letters and digits, at most 15); set interface_name"
            )
        reason = reserved_interface_reason(self.device_name)
        if reason:
            field = "interface_name" if self.interface_name else "name"
            raise ValueError(f"{field}: {reason} (it names this network's ENI on the node)")
        return self


class MultusConfig(StrictModel):
    """The Multus networks and what every network shares (NAD namespace, security group)."""

    networks: list[MultusNetworkConfig] = Field(
        default_factory=lambda: [
            MultusNetworkConfig(
                name="multus1",
                subnets=[
                    MultusSubnetConfig(cidr="10.0.4.0/24", reservation="10.0.4.32/27"),
                    MultusSubnetConfig(cidr="10.0.5.0/24", reservation="10.0.5.32/27"),
                ],
            ),
            MultusNetworkConfig(
                name="multus2",
                subnets=[
                    MultusSubnetConfig(cidr="10.0.6.0/24", reservation="10.0.6.32/27"),
                    MultusSubnetConfig(cidr="10.0.7.0/24", reservation="10.0.7.32/27"),
                ],
            ),
        ],
        min_length=1,
        description="Secondary networks: one ENI per Karpenter node, one subnet, reservation "
        "and NAD per AZ (default: the seed's multus1 and multus2).",
    )
    nad_namespace: str = Field(
        default="default",
        pattern=_K8S_NAME,
        max_length=63,
        description="Namespace of the NADs; the app creates it unless Kubernetes already has it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _shared_ingress_replaced(cls, data: object) -> object:
        # One group for every network became one per network; show the old sources in the
        # new form so the migration is a copy.
        if isinstance(data, dict) and "security_group_ingress_cidrs" in data:
            cidrs = data["security_group_ingress_cidrs"]
            rules = [{"protocol": "all", "cidr": cidr} for cidr in cidrs or []]
            raise ValueError(
                "security_group_ingress_cidrs: replaced by a security group per network; "
                "remove it and give each of multus.networks "
                f'"security_group": {json.dumps({"ingress": rules})} (its egress stays all '
                "traffic anywhere unless you set it)"
            )
        return data

    @field_validator("nad_namespace")
    @classmethod
    def _not_a_reserved_namespace(cls, namespace: str) -> str:
        if namespace.startswith("kube-") and namespace not in EXISTING_NAMESPACES:
            raise ValueError(
                f"{namespace!r}: the kube- prefix is reserved for Kubernetes' own namespaces; "
                "use kube-system or a name of your own, for example multus-networks"
            )
        return namespace

    @property
    def creates_nad_namespace(self) -> bool:
        return self.nad_namespace not in EXISTING_NAMESPACES

    @model_validator(mode="after")
    def _unique_names(self) -> MultusConfig:
        for attribute in ("name", "device_name"):
            seen: set[str] = set()
            for network in self.networks:
                value = getattr(network, attribute)
                if value in seen:
                    raise ValueError(
                        f"networks: two Multus networks share the {attribute.replace('_', ' ')} "
                        f"{value!r}; give each network its own"
                    )
                seen.add(value)
        return self

    @model_validator(mode="after")
    def _one_network_per_route_destination(self) -> MultusConfig:
        # The pod IP plugin puts each route into the pod's main table via its network's
        # interface (`ip route replace`): in a pod on both networks the second would replace
        # the first.
        routed_by: dict[str, str] = {}
        for index, network in enumerate(self.networks):
            for position, route in enumerate(network.routes):
                other = routed_by.setdefault(route.destination, network.name)
                if other != network.name:
                    raise ValueError(
                        f"networks[{index}] ({network.name}).routes[{position}].destination: "
                        f"{route.destination} is routed by {other} too; a pod on both networks "
                        "could reach it over one interface only: route it in one network"
                    )
        return self

    @model_validator(mode="after")
    def _rules_name_known_networks(self) -> MultusConfig:
        names = [network.name for network in self.networks]
        for index, network in enumerate(self.networks):
            group = network.security_group
            for direction, rules in (("ingress", group.ingress or []), ("egress", group.egress)):
                for position, rule in enumerate(rules):
                    if rule.network is not None and rule.network not in names:
                        raise ValueError(
                            f"networks[{index}] ({network.name}).security_group.{direction}"
                            f"[{position}].network: {rule.network!r} is not a Multus network "
                            f"({', '.join(names)}); name one of them (the network itself "
                            "too: its ENIs reaching each other), or give a cidr"
                        )
        return self


def _usable_vpc_cidr(cidr: str) -> str:
    if not MIN_PREFIX_LENGTH <= net(cidr).prefixlen <= MAX_PREFIX_LENGTH:
        raise ValueError(f"{cidr}: a VPC's prefix must be /16 to /28 (for example 10.0.0.0/16)")
    for name, unusable in UNUSABLE_VPC_RANGES.items():
        if net(cidr).overlaps(unusable):
            raise ValueError(
                f"{cidr} overlaps {unusable} ({name}), which a VPC cannot use; take a "
                "private range (RFC 1918: 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16), "
                "for example 10.0.0.0/16"
            )
    return cidr


VpcCidr = Annotated[Cidr, AfterValidator(_usable_vpc_cidr)]


class ExistingSubnetConfig(StrictModel):
    """A subnet of the existing VPC, by ID, with its CIDR (checked against the Multus subnets;
    synth looks nothing up)."""

    id: str = Field(pattern=patterns.SUBNET_ID.regex, description="The subnet's ID.")
    cidr: SubnetCidr = Field(description="The subnet's IPv4 CIDR, as EC2 shows it.")


class ExistingVpcConfig(StrictModel):
    """A VPC the network team owns: the app only adds the Multus subnets, their route tables,
    security groups and reservations to it (docs/network.md, Your own VPC)."""

    vpc_id: str = Field(pattern=patterns.VPC_ID.regex, description="The VPC's ID.")
    cidrs: list[VpcCidr] = Field(
        min_length=1,
        description="The VPC's IPv4 CIDR blocks (primary and secondary); every subnet, the "
        "Multus subnets too, lies inside one of them.",
    )
    node_subnets: list[ExistingSubnetConfig] = Field(
        description="One node subnet per AZ, in the order of availability_zones: the nodes' "
        "primary ENIs and the cluster's ENIs; Karpenter selects them by ID."
    )
    public_subnets: list[ExistingSubnetConfig] = Field(
        default=[],
        description="Optional: one public subnet per AZ (internet-facing load balancers), in "
        "the order of availability_zones; [] when there are none.",
    )
    nat_gateway_ids: list[Annotated[str, Field(pattern=patterns.NAT_GATEWAY_ID.regex)]] = Field(
        default=[],
        description="The NAT gateway each AZ's Multus subnets route their default route to, "
        "in the order of availability_zones (repeat an ID to share one); []: none, so every "
        "network needs nat_egress false.",
    )

    @field_validator("cidrs")
    @classmethod
    def _distinct_blocks(cls, cidrs: list[str]) -> list[str]:
        for index, cidr in enumerate(cidrs):
            for other in cidrs[:index]:
                if net(cidr).overlaps(net(other)):
                    raise ValueError(
                        f"{cidr} overlaps {other}; a VPC's CIDR blocks never overlap, list "
                        "each block once as EC2 shows it"
                    )
        return cidrs

    @model_validator(mode="after")
    def _subnets_listed_once(self) -> ExistingVpcConfig:
        ids = [subnet.id for subnet in self.node_subnets + self.public_subnets]
        for subnet_id in sorted({i for i in ids if ids.count(i) > 1}):
            raise ValueError(
                f"node_subnets / public_subnets: {subnet_id} is listed more than once; give "
                "each AZ its own subnet and keep node and public subnets apart"
            )
        return self


class VpcConfig(StrictModel):
    """The VPC, its public and node subnets (Multus subnets are under multus.networks)."""

    renamed_keys = {"private_subnet_cidrs": "node_subnet_cidrs (same meaning: one per AZ)"}

    cidr: Cidr = Field(default="10.0.0.0/16", description="The VPC's IPv4 CIDR (/16 to /28).")
    public_subnet_cidrs: list[SubnetCidr] = Field(
        default=["10.0.0.0/24", "10.0.1.0/24"],
        description="One public subnet per AZ: NAT gateways, internet-facing load balancers.",
    )
    node_subnet_cidrs: list[SubnetCidr] = Field(
        default=["10.0.2.0/24", "10.0.3.0/24"],
        description="One node subnet per AZ: the nodes' primary ENIs, the cluster's ENIs, "
        "internal load balancers.",
    )
    nat_gateways: Literal["per_az", "single"] = Field(
        default="per_az",
        description="per_az: a NAT gateway in each AZ; single: one, in the first AZ (cheaper, "
        "but egress depends on that AZ).",
    )
    ipv6: bool = Field(
        default=False,
        description="Associate an Amazon-provided IPv6 block (/56) with the VPC, for the "
        "dual-stack Multus networks (multus.networks[].ipv6). Node and public subnets and the "
        "cluster stay IPv4 (docs/network.md, Dual stack).",
    )
    flow_log_retention: LogRetention = Field(
        default="ONE_YEAR",
        description="How long CloudWatch Logs keeps the VPC flow logs (incident evidence). "
        "Below ONE_YEAR the log group fails AWS Control Tower's CT.CLOUDWATCH.PR.2.",
    )

    existing: ExistingVpcConfig | None = Field(
        default=None,
        description="Deploy into a VPC the network team owns instead of creating one (IDs and "
        "CIDRs as values: synth looks nothing up); then cidr, public_subnet_cidrs, "
        "node_subnet_cidrs, nat_gateways and flow_log_retention stay unset.",
    )

    # What only a VPC the app creates has; with an existing VPC each would be silently ignored.
    NEW_VPC_FIELDS: ClassVar[tuple[str, ...]] = (
        "cidr",
        "public_subnet_cidrs",
        "node_subnet_cidrs",
        "nat_gateways",
        "flow_log_retention",
    )

    @field_validator("cidr")
    @classmethod
    def _vpc_size(cls, cidr: str) -> str:
        return _usable_vpc_cidr(cidr)

    @model_validator(mode="after")
    def _existing_alone(self) -> VpcConfig:
        if self.existing is None:
            return self
        if self.ipv6:
            raise ValueError(
                "ipv6: dual-stack Multus networks need a VPC the app creates; the app adds no "
                "IPv6 block to a VPC it does not own (docs/network.md, Dual stack): remove "
                "ipv6, or existing"
            )
        for name in self.NEW_VPC_FIELDS:
            if name in self.model_fields_set:
                raise ValueError(
                    f"{name}: describes a VPC the app creates, but existing names a VPC that "
                    f"exists; remove {name} (the existing VPC's CIDRs and subnets go under "
                    "existing)"
                )
        return self


class SystemNodeGroupConfig(StrictModel):
    """The managed node group for system pods and the Karpenter controller."""

    renamed_keys = {"disk_size_gib": "root_volume_gib (in GiB, like node_pools[].root_volume_gib)"}

    instance_types: list[InstanceType] = Field(
        default=["c5.large"], min_length=1, description="x86_64 instance types of the group."
    )
    min_size: int = Field(default=1, ge=0, description="Fewest nodes of the group.")
    desired_size: int = Field(
        default=2, ge=0, description="Nodes the group runs; at least karpenter.replicas."
    )
    max_size: int = Field(default=3, ge=1, description="Most nodes of the group.")
    root_volume_gib: Gp3SizeGib = Field(
        default=20, ge=20, description="Encrypted gp3 root volume of each system node, in GiB."
    )

    @model_validator(mode="after")
    def _x86_instance_types(self) -> SystemNodeGroupConfig:
        # The group runs the AL2023 x86_64 AMI; EKS rejects arm64 types for it, and no EKS AMI
        # runs on Mac instances (macOS on Dedicated Hosts). config/instance_types.py knows
        # the architecture of each family, whatever its name (mac2.metal is arm64).
        families = {t: instance_types.family_of(t) for t in self.instance_types}
        arm = [t for t, f in families.items() if instance_types.architecture(f) == "arm64"]
        if arm:
            raise ValueError(
                f"instance_types: {arm} are arm64; the system node group runs the "
                "AL2023 x86_64 AMI, so pick x86_64 types (for example c5.large)"
            )
        mac = [t for t, f in families.items() if instance_types.is_macos_only(f)]
        if mac:
            raise ValueError(
                f"instance_types: {mac} are Mac instances (macOS on Dedicated Hosts), which no "
                "EKS AMI runs on; pick x86_64 Linux types (for example c5.large)"
            )
        return self

    @model_validator(mode="after")
    def _sizes_ordered(self) -> SystemNodeGroupConfig:
        if not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError(
                f"need min_size <= desired_size <= max_size, got {self.min_size} / "
                f"{self.desired_size} / {self.max_size}"
            )
        return self


class ClusterConfig(StrictModel):
    """The EKS cluster: name, version, API endpoint access, admins, system node group."""

    renamed_keys = RENAMED_KEYS

    name: str | None = Field(
        default=None,
        pattern=patterns.CLUSTER_NAME.regex,
        description="EKS cluster name (default: eks-<name>, so each app name gets its own).",
    )
    kubernetes_version: Annotated[
        KubernetesVersion, BeforeValidator(number_as_version(get_args(KubernetesVersion)))
    ] = Field(default="1.34", description="Kubernetes version of the control plane and nodes.")
    public_access_cidrs: list[Cidr] | None = Field(
        default=None,
        description="None: private API endpoint only. A list: also a public endpoint that "
        "accepts only these CIDRs.",
    )
    admin_principal_arns: list[AdminPrincipalArn] = Field(
        default=[],
        description="IAM role or user ARNs given cluster-admin through access entries.",
    )
    control_plane_availability_zones: list[str] | None = Field(
        default=None,
        description="AZs of the node subnets the EKS control plane places its network "
        "interfaces in (at least two). Fixed when the cluster is created: EKS accepts new "
        "control-plane subnets only in the AZs it was created with. Unset: every entry of "
        "availability_zones; set it to those AZs before you add one to availability_zones.",
    )
    system_node_group: SystemNodeGroupConfig = SystemNodeGroupConfig()
    control_plane_log_retention: LogRetention = Field(
        default="ONE_YEAR",
        description="How long CloudWatch Logs keeps the control-plane logs (API server, audit, "
        "authenticator, controller manager, scheduler: incident evidence). Below ONE_YEAR the "
        "log group fails AWS Control Tower's CT.CLOUDWATCH.PR.2.",
    )
    teardown_timeout_minutes: int = Field(
        default=30,
        ge=10,
        description="How long `cdk destroy` waits for Karpenter's nodes and the Multus ENIs to "
        f"go before it fails listing what is left; at most {TEARDOWN_TIMEOUT_LIMIT_MINUTES}: "
        "CloudFormation waits at most an hour for a custom resource, and the Provider "
        f"framework needs {TEARDOWN_MARGIN_MINUTES:g} minutes of it.",
    )

    @field_validator("public_access_cidrs")
    @classmethod
    def _public_access(cls, cidrs: list[str] | None) -> list[str] | None:
        return check_public_access_cidrs(cidrs)

    @field_validator("admin_principal_arns")
    @classmethod
    def _distinct_admins(cls, arns: list[str]) -> list[str]:
        duplicates = sorted({arn for arn in arns if arns.count(arn) > 1})
        if duplicates:
            # EKS allows one access entry per principal.
            raise ValueError(f"{duplicates} listed more than once; list each principal once")
        return arns


class KarpenterConfig(StrictModel):
    """The Karpenter controller (Helm charts karpenter-crd and karpenter)."""

    version: str = Field(
        default="1.14.1",
        pattern=patterns.RELEASE_VERSION.regex,
        description="Karpenter release; must support cluster.kubernetes_version.",
    )
    namespace: str = Field(
        default="kube-system",
        pattern=_K8S_NAME,
        max_length=63,
        description="Namespace of the controller.",
    )
    replicas: int = Field(
        default=2,
        ge=1,
        description="Controller replicas, one per system node (at most "
        "cluster.system_node_group.desired_size).",
    )
    controller_cpu: str = Field(
        default="1",
        pattern=_CPU_QUANTITY,
        description="CPU request of each controller pod (Kubernetes quantity: 1, 500m).",
    )
    controller_memory: str = Field(
        default="1Gi",
        pattern=_MEMORY_QUANTITY,
        description="Memory request and limit of each controller pod (Kubernetes quantity: 1Gi).",
    )
    spot_service_linked_role: bool = Field(
        default=False,
        description="Create the account-wide Spot service-linked role (fails if it exists).",
    )

    @field_validator("version")
    @classmethod
    def _released(cls, version: str) -> str:
        problem = karpenter_releases.release_problem(version)
        if problem:
            raise ValueError(problem)
        return version


# Interfaces (ENIs) of the Nitro m/c/r families' sizes by vCPU count: the fewest any family in
# config/instance_types.py has at that count (a test keeps the two in step).
MAX_ENIS_BY_VCPUS: dict[int, int] = {
    2: 3,
    4: 4,
    8: 4,
    16: 8,
    32: 8,
    36: 8,
    48: 8,
    64: 15,
    72: 15,
    96: 15,
}


class NodePoolTaintConfig(StrictModel):
    """A taint on every node of the pool (NodePool spec.template.spec.taints)."""

    key: str = Field(description="Taint key (a Kubernetes label key, for example example.com/upf).")
    value: str = Field(default="", description="Taint value (a Kubernetes label value).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        default="NoSchedule", description="What the taint does to pods that do not tolerate it."
    )


class NodePoolConfig(StrictModel):
    """A Karpenter NodePool (and its EC2NodeClass and user-data); defaults are the seed's."""

    name: str = Field(
        pattern=_K8S_NAME,
        max_length=40,
        description="Name of the pool's NodePool and EC2NodeClass (unique; the seed's: "
        f"{DEFAULT_NODE_POOL_NAME}).",
    )
    networks: list[str] | None = Field(
        default=None,
        description="Names of the multus.networks its nodes attach, at device indexes from 1 "
        "in multus.networks order (omitted or null: every network; []: a plain Karpenter pool "
        'without Multus interfaces). Nodes carry the label multus.network/<network>: "true" '
        "per attached network.",
    )
    instance_categories: list[Literal["m", "c", "r"]] = Field(
        default=["m", "c", "r"],
        min_length=1,
        description="Allowed instance categories (karpenter.k8s.aws/instance-category).",
    )
    instance_cpus: list[int] = Field(
        default=[2, 4, 8, 16],
        min_length=1,
        description="Allowed vCPU counts (karpenter.k8s.aws/instance-cpu).",
    )
    instance_families: list[str] = Field(
        default=["m5", "c5", "m6i", "c6i", "r6i"],
        min_length=1,
        description="Allowed instance families (karpenter.k8s.aws/instance-family); "
        "config/instance_types.py lists the known ones.",
    )
    capacity_types: list[Literal["on-demand", "spot"]] = Field(
        default=["on-demand"],
        min_length=1,
        description="Allowed capacity types (karpenter.sh/capacity-type).",
    )
    cpu_limit: str = Field(
        default="500",
        pattern=_CPU_QUANTITY,
        description="Most CPU all NodePool nodes together may have (Kubernetes quantity).",
    )
    memory_limit: str = Field(
        default="500Gi",
        pattern=_MEMORY_QUANTITY,
        description="Most memory all NodePool nodes together may have (Mi or Gi).",
    )
    consolidate_after: str = Field(
        default="120s",
        pattern=patterns.DURATION.regex,
        description="How long a node stays empty before Karpenter removes it (s, m or h).",
    )
    ami_alias: str = Field(
        default="al2023@v20261112",
        pattern=patterns.AMI_ALIAS.regex,
        description="Pinned AL2023 release; never @latest (every release would replace nodes).",
    )
    root_volume_gib: Gp3SizeGib = Field(
        default=20, ge=20, description="Encrypted gp3 root volume of each Karpenter node, in GiB."
    )
    termination_grace_period: str = Field(
        default="15m",
        pattern=patterns.KARPENTER_DURATION.regex,
        description="Longest a node drain may wait on PodDisruptionBudgets and do-not-disrupt "
        "pods before Karpenter deletes them (drift, consolidation, teardown); must be shorter "
        "than cluster.teardown_timeout_minutes.",
    )
    labels: dict[str, str] = Field(
        default={},
        description="Labels of the pool's nodes (besides karpenter-node and the "
        "multus.network/<network> labels the app sets).",
    )
    taints: list[NodePoolTaintConfig] = Field(
        default=[], description="Taints of the pool's nodes; only pods that tolerate them land."
    )
    weight: int = Field(
        default=10,
        ge=1,
        le=100,
        description="Karpenter tries pools of higher weight first (1 to 100).",
    )

    @field_validator("networks")
    @classmethod
    def _networks_listed_once(cls, networks: list[str] | None) -> list[str] | None:
        if networks is not None and len(set(networks)) != len(networks):
            raise ValueError(f"{networks}: list each network once")
        return networks

    @model_validator(mode="after")
    def _labels_and_taints(self) -> NodePoolConfig:
        problems = label_problems(self.labels) + taint_problems(
            [(taint.key, taint.value, taint.effect) for taint in self.taints]
        )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @field_validator("instance_cpus")
    @classmethod
    def _known_sizes(cls, cpus: list[int]) -> list[int]:
        unknown = sorted(set(cpus) - set(MAX_ENIS_BY_VCPUS))
        if unknown:
            raise ValueError(
                f"{unknown}: pick vCPU counts of m/c/r sizes: {sorted(MAX_ENIS_BY_VCPUS)}"
            )
        return cpus

    @model_validator(mode="after")
    def _requirements_intersect(self) -> NodePoolConfig:
        problems = node_pool_requirement_problems(
            self.instance_categories, self.instance_families, self.instance_cpus
        )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def allowed_sizes(self) -> list[tuple[str, int, int]]:
        """(family, vCPUs, network interfaces) of every size the NodePool may launch."""
        return [
            (family, cpus, enis)
            for family in self.instance_families
            for cpus, enis in instance_types.NODE_POOL_FAMILIES[family].items()
            if cpus in self.instance_cpus
        ]

    @property
    def max_enis_of_smallest_size(self) -> int:
        return min(enis for _, _, enis in self.allowed_sizes())

    @property
    def default_prefixes_per_node(self) -> int:
        """K of a node_prefix network without prefixes_per_node on this pool's nodes."""
        return default_prefixes_per_node(self)


def default_node_pools() -> list[NodePoolConfig]:
    """The seed's single pool: every network, the seed's NodePool settings."""
    return [NodePoolConfig(name=DEFAULT_NODE_POOL_NAME)]


def node_pool_migration(old: object) -> str:
    """The message for the old node_pool key, with its settings in the new form."""
    settings = old if isinstance(old, dict) else {}
    new_form = json.dumps({"node_pools": [{"name": DEFAULT_NODE_POOL_NAME, **settings}]})
    return (
        "node_pool was replaced by node_pools, a list of pools (each with a name and the "
        "networks its nodes attach; omitted networks = all); yours in the new form: "
        f"{new_form[1:-1]}"
    )


class ExtrasConfig(StrictModel):
    """Optional add-ons from the seed, off by default."""

    sample_workloads: bool = Field(
        default=False, description="The seed's multitool deployments, one per AZ, with NADs."
    )
    node_latency: bool = Field(
        default=False, description="node-latency-for-k8s (Helm chart) to time node startup."
    )


class AppConfig(StrictModel):
    """Everything one environment (account + region) needs."""

    name: str = Field(
        default="karpenterwithmultus",
        pattern=patterns.APP_NAME.regex,
        description="Stage name and stack name prefix (<name>-network, <name>-cluster).",
    )
    account: str | None = Field(
        default=None,
        pattern=ACCOUNT_PATTERN,
        description="12-digit AWS account to deploy to (default: that of the deploying "
        "credentials).",
    )
    region: str = Field(default="us-west-2", description="AWS Region to deploy to.")
    availability_zones: list[str] = Field(
        default=["us-west-2a", "us-west-2b"],
        min_length=2,
        description="AZs of the region to use; every per-AZ list follows this order.",
    )
    vpc: VpcConfig = VpcConfig()
    multus: MultusConfig = MultusConfig()
    cluster: ClusterConfig = ClusterConfig()
    karpenter: KarpenterConfig = KarpenterConfig()
    node_pools: list[NodePoolConfig] = Field(
        default_factory=default_node_pools,
        min_length=1,
        description="Karpenter NodePools, each with its own EC2NodeClass and user-data that "
        'attaches only its networks (default: the seed\'s pool "multus" with every network).',
    )
    extras: ExtrasConfig = ExtrasConfig()
    images: ImagesConfig = ImagesConfig()
    logs: LogsConfig = LogsConfig()

    @model_validator(mode="before")
    @classmethod
    def _node_pool_became_node_pools(cls, data: object) -> object:
        if isinstance(data, dict) and "node_pool" in data:
            raise ValueError(node_pool_migration(data["node_pool"]))
        return data

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> AppConfig:
        self._check_region()
        self._check_control_plane_zones()
        self._check_subnet_counts()
        self._check_subnets_fit_vpc()
        self._check_nat_egress_has_gateway()
        self._check_karpenter_supports_kubernetes()
        self._check_dual_stack()
        self._check_pools_name_known_networks()
        self._check_enis_fit_instances()
        self._check_controllers_fit_system_nodes()
        self._check_teardown_fits_cloudformation()
        self._check_drain_fits_teardown()
        self._check_user_data_fits((info.context or {}).get(USER_DATA_SIZE))
        self._check_routes()
        check_node_prefix_reservations(
            [(self.pool_path(pool), pool, self.pool_plan(pool)) for pool in self.node_pools]
        )
        return self

    def pool_path(self, pool: NodePoolConfig) -> str:
        """Where the pool is in the config, for messages: node_pools[i] (name)."""
        return f"node_pools[{self.node_pools.index(pool)}] ({pool.name})"

    def pool_plan(self, pool: NodePoolConfig) -> NetworkPlan:
        """The pool's view of the network plan (config/network_plan.py)."""
        return pool_network_plan(self, pool)

    @property
    def warnings(self) -> list[str]:
        """What is valid but probably not meant: networks no pool attaches."""
        attached = {row.network for pool in self.node_pools for row in self.pool_plan(pool)}
        return [
            f"multus.networks[{index}] ({network.name}): no node pool attaches it, so no pod "
            "can use it; add it to the networks of a pool in node_pools"
            for index, network in enumerate(self.multus.networks)
            if network.name not in attached
        ]

    @property
    def route_preconditions(self) -> list[str]:
        """What must exist outside the app before the network stack can create a route: a
        transit gateway attached to the VPC (an available VPC attachment), a virtual private
        gateway attached to it (AWS::EC2::Route: the route table cannot use a transit gateway
        before it is attached to the VPC; GatewayId is a gateway attached to the VPC)."""
        needs = {
            "transit_gateway": "an available VPC attachment of the transit gateway",
            "vpn_gateway": "the virtual private gateway attached to it",
        }
        return [
            f"{self.route_path(index, network, position)}: {route.target_id} is used only "
            f"once the VPC has {needs[route.target]}; without it the network stack fails to "
            "create the route (with a VPC this app creates: deploy without the route, attach "
            "the gateway, then add the route)"
            for index, network in enumerate(self.multus.networks)
            for position, route in enumerate(network.routes)
            if route.target in needs
        ]

    @staticmethod
    def route_path(index: int, network: MultusNetworkConfig, position: int) -> str:
        """Where a route is in the config, for messages."""
        return f"multus.networks[{index}] ({network.name}).routes[{position}]"

    def _check_routes(self) -> None:
        vpc = [net(cidr) for cidr in self.vpc_cidrs]
        for index, network in enumerate(self.multus.networks):
            for position, route in enumerate(network.routes):
                path = self.route_path(index, network, position)
                destination = net(route.destination)
                local = [str(block) for block in vpc if block.overlaps(destination)]
                if local:
                    raise ValueError(
                        f"{path}.destination: {route.destination} overlaps the VPC CIDR "
                        f"{', '.join(local)}, which the VPC routes itself (its local route); "
                        "routes lead beyond the VPC: name the RAN's or data network's range"
                    )
                if route.nat_gateway and not self.has_nat_gateway:
                    raise ValueError(
                        f"{path}.nat_gateway: this VPC has no NAT gateway the app may route "
                        "to; name another target (transit_gateway_id, vpn_gateway_id, "
                        "network_interface_id)"
                    )

    def _check_pools_name_known_networks(self) -> None:
        names = [pool.name for pool in self.node_pools]
        for name in sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(
                f"node_pools: two pools are named {name!r}; give each pool its own name (it "
                "names its NodePool and EC2NodeClass)"
            )
        known = [network.name for network in self.multus.networks]
        for pool in self.node_pools:
            unknown = [name for name in pool.networks or () if name not in known]
            if unknown:
                raise ValueError(
                    f"{self.pool_path(pool)}.networks: {unknown} are not multus.networks; "
                    f"pick from {known}"
                )

    def _check_user_data_fits(self, deployed_size: UserDataSize | None) -> None:
        # Every node's user-data carries each AZ's Multus subnet IDs of its pool and a line per
        # node_prefix network and AZ; EC2 caps it at 16 KB. Placeholder IDs: deployed_size puts
        # the longest ones in. Without it (a caller that measures nothing: config/loader.py),
        # the renderer still refuses an oversized user-data at synth.
        if deployed_size is None:
            return
        for pool in self.node_pools:
            plan = self.pool_plan(pool)
            if not plan:
                continue
            shape = node_bootstrap_props(
                self.cluster_name,
                plan,
                subnet_id=lambda _: "subnet",
                security_group_id=lambda _: "sg",
            )
            size = deployed_size(shape)
            if size > USER_DATA_LIMIT_BYTES:
                raise ValueError(
                    f"{self.pool_path(pool)}.networks: with availability_zones, the node "
                    f"user-data would be {size} bytes, over the {USER_DATA_LIMIT_BYTES} bytes "
                    "left next to Karpenter's part within EC2's 16 KB limit; use fewer "
                    "availability zones or networks in this pool"
                )

    def multus_ingress_rules(self, network: MultusNetworkConfig) -> list[SecurityGroupRuleConfig]:
        """A network's ingress rules; unset: all traffic from the VPC CIDR (the seed's rule)."""
        if network.security_group.ingress is not None:
            return network.security_group.ingress
        return [SecurityGroupRuleConfig(protocol="all", cidr=cidr) for cidr in self.vpc_cidrs]

    @property
    def vpc_cidrs(self) -> list[str]:
        """The VPC's IPv4 CIDR blocks: those of the existing VPC, or the one the app creates."""
        existing = self.vpc.existing
        return list(existing.cidrs) if existing else [self.vpc.cidr]

    @property
    def has_nat_gateway(self) -> bool:
        """Whether each AZ has a NAT gateway the Multus subnets may route to: the app creates
        them in a new VPC; in an existing one, those of nat_gateway_ids."""
        existing = self.vpc.existing
        return existing is None or bool(existing.nat_gateway_ids)

    def _check_nat_egress_has_gateway(self) -> None:
        existing = self.vpc.existing
        zones = self.availability_zones
        if existing and existing.nat_gateway_ids and len(existing.nat_gateway_ids) != len(zones):
            raise ValueError(
                f"vpc.existing.nat_gateway_ids: {len(existing.nat_gateway_ids)} NAT gateway(s) "
                f"for {len(zones)} availability zones; give one per AZ in the order of "
                f"availability_zones {zones} (repeat an ID to share a gateway), or [] for none"
            )
        if self.has_nat_gateway:
            return
        for index, network in enumerate(self.multus.networks):
            if network.nat_egress:
                raise ValueError(
                    f"multus.networks[{index}] ({network.name}).nat_egress: the network's "
                    "default route goes to its AZ's NAT gateway, but vpc.existing."
                    "nat_gateway_ids is empty; set nat_egress false or give one NAT gateway "
                    "ID per AZ in vpc.existing.nat_gateway_ids"
                )

    def ingress_from_vpc_ipv6(self, network: MultusNetworkConfig) -> bool:
        """A dual-stack network without ingress rules also admits all traffic from the VPC's
        IPv6 block (known at deploy time), as the seed's rule does from its IPv4 CIDR."""
        return network.ipv6 is not None and network.security_group.ingress is None

    def _check_dual_stack(self) -> None:
        dual_stack = [
            (index, network)
            for index, network in enumerate(self.multus.networks)
            if network.ipv6 is not None
        ]
        if dual_stack and self.vpc.existing is not None:
            index, network = dual_stack[0]
            raise ValueError(
                f"multus.networks[{index}] ({network.name}).ipv6: dual-stack networks need a "
                "VPC the app creates (vpc.ipv6), and vpc.existing names one the app does not "
                "own; remove ipv6 from the network"
            )
        if dual_stack and not self.vpc.ipv6:
            index, network = dual_stack[0]
            raise ValueError(
                f"multus.networks[{index}] ({network.name}).ipv6: the VPC has no IPv6 block to "
                'give its subnets a /64 from; set "vpc": {"ipv6": true} or remove ipv6'
            )
        owners: dict[int, str] = {}
        for row in network_plan(self):
            if row.ipv6 is None:
                continue
            owner = owners.setdefault(row.ipv6.subnet_index, row.subnet_path)
            if owner != row.subnet_path:
                raise ValueError(
                    f"{row.subnet_path}.cidr: {row.subnet_cidr} would get /64 number "
                    f"{row.ipv6.subnet_index} of the VPC's IPv6 block, as {owner} does (a "
                    "dual-stack subnet's /64 is the third octet of its IPv4 CIDR, "
                    "docs/network.md); put the dual-stack subnets in different /24 blocks"
                )

    @property
    def cluster_name(self) -> str:
        """The EKS cluster name: cluster.name, or derived from the app name (unique per app)."""
        return self.cluster.name or f"eks-{self.name}"

    def _check_teardown_fits_cloudformation(self) -> None:
        minutes = self.cluster.teardown_timeout_minutes
        longest = TEARDOWN_TIMEOUT_LIMIT_MINUTES
        if minutes > longest:
            raise ValueError(
                f"cluster.teardown_timeout_minutes: {minutes} minutes plus the "
                f"{TEARDOWN_MARGIN_MINUTES:g} the Provider framework needs exceed the "
                "hour CloudFormation waits for a custom resource (ServiceTimeout at most "
                f"{SERVICE_TIMEOUT_LIMIT_SECONDS} s); use at most {longest}, with every "
                "node_pools[].termination_grace_period at most "
                f"{longest - NODE_TERMINATION_MARGIN_MINUTES}m (the drain must end "
                f"{NODE_TERMINATION_MARGIN_MINUTES} minutes before the teardown bound)"
            )

    def _check_drain_fits_teardown(self) -> None:
        # The teardown drains every pool at once: it must outlast the longest drain plus the
        # instance shutdown after it.
        pool = max(
            self.node_pools, key=lambda pool: duration_seconds(pool.termination_grace_period)
        )
        grace_minutes = duration_seconds(pool.termination_grace_period) / 60
        needed = grace_minutes + NODE_TERMINATION_MARGIN_MINUTES
        if needed > self.cluster.teardown_timeout_minutes:
            raise ValueError(
                f"{self.pool_path(pool)}.termination_grace_period "
                f"{pool.termination_grace_period} "
                f"plus {NODE_TERMINATION_MARGIN_MINUTES} minutes for instance shutdown exceeds "
                f"cluster.teardown_timeout_minutes ({self.cluster.teardown_timeout_minutes}); "
                "shorten the grace period or raise the teardown timeout (at most "
                f"{TEARDOWN_TIMEOUT_LIMIT_MINUTES}, the longest CloudFormation waits for)"
            )

    @property
    def default_prefixes_per_node(self) -> int:
        """K of a node_prefix network without prefixes_per_node in the network plan: the fewest
        any pool's nodes take (each pool's view has its own, config/node_prefix.py)."""
        return min(pool.default_prefixes_per_node for pool in self.node_pools)

    def _check_controllers_fit_system_nodes(self) -> None:
        # Each controller replica needs its own system node (required anti-affinity, never on
        # a Karpenter node), and nothing scales the system group beyond desired_size.
        nodes = self.cluster.system_node_group.desired_size
        if self.karpenter.replicas > nodes:
            raise ValueError(
                f"karpenter.replicas: {self.karpenter.replicas} controller replicas need as many "
                f"system nodes, but cluster.system_node_group.desired_size is {nodes}; raise "
                "desired_size (and max_size) or lower karpenter.replicas"
            )

    def _check_enis_fit_instances(self) -> None:
        for pool in self.node_pools:
            count = len(networks_in_order(self.pool_plan(pool)))
            needed = count + 1  # plus the primary interface
            available = pool.max_enis_of_smallest_size
            if needed > available:
                # Fewest interfaces; among equals, the fewest vCPUs (sizes of families tie).
                family, cpus, _ = min(pool.allowed_sizes(), key=lambda size: (size[2], size[1]))
                path = self.pool_path(pool)
                raise ValueError(
                    f"{path}.networks: {count} networks need {needed} network interfaces per "
                    f"node, but the smallest size in {path}.instance_cpus ({cpus} vCPUs) has "
                    f"{available} ({family}); drop small sizes from instance_cpus or attach "
                    "fewer networks"
                )

    @property
    def reserved_enis(self) -> int:
        """Karpenter's settings.reservedENIs, global to every NodePool: the most Multus ENIs
        any pool's nodes attach (docs/node-capacity.md says what this costs the others)."""
        return max(len(networks_in_order(self.pool_plan(pool))) for pool in self.node_pools)

    def _check_region(self) -> None:
        problem = aws_regions.region_problem(self.region)
        if problem:
            raise ValueError(f"region: {problem}")
        known = aws_regions.availability_zones(self.region)
        for az in self.availability_zones:
            if az not in known:
                raise ValueError(
                    f"availability_zones: {az!r} is not an availability zone of {self.region} "
                    f"(its zones: {', '.join(known)}; see config/aws_regions.py)"
                )
        if len(set(self.availability_zones)) != len(self.availability_zones):
            raise ValueError("availability_zones: each AZ may appear only once")

    @property
    def control_plane_zones(self) -> list[str]:
        """The AZs whose node subnets the EKS cluster uses, in availability_zones order."""
        chosen = self.cluster.control_plane_availability_zones
        return [az for az in self.availability_zones if chosen is None or az in chosen]

    def _check_control_plane_zones(self) -> None:
        # EKS keeps the control plane in the AZs it was created with (subnets may change only
        # within them) and needs subnets in at least two AZs (EKS user guide, "View Amazon EKS
        # networking requirements for VPC and subnets").
        chosen = self.cluster.control_plane_availability_zones
        if chosen is None:
            return
        field = "cluster.control_plane_availability_zones"
        missing = [az for az in chosen if az not in self.availability_zones]
        if missing:
            raise ValueError(
                f"{field}: {missing} not in availability_zones {self.availability_zones}; the "
                "control plane stays in the AZs the cluster was created with, so keep those AZs "
                "in availability_zones (removing one of them needs a new cluster)"
            )
        if len(set(chosen)) != len(chosen):
            raise ValueError(f"{field}: each AZ may appear only once")
        if len(chosen) < 2:
            raise ValueError(
                f"{field}: EKS needs control-plane subnets in at least two AZs; list the AZs "
                f"the cluster was created with, for example {self.availability_zones[:2]}"
            )

    def _vpc_subnet_counts(self) -> dict[str, int]:
        """What a per-AZ subnet list of the VPC section holds (an existing VPC's public subnets
        may also be none)."""
        existing = self.vpc.existing
        if existing is None:
            return {
                "vpc.public_subnet_cidrs": len(self.vpc.public_subnet_cidrs),
                "vpc.node_subnet_cidrs": len(self.vpc.node_subnet_cidrs),
            }
        counts = {"vpc.existing.node_subnets": len(existing.node_subnets)}
        if existing.public_subnets:
            counts["vpc.existing.public_subnets"] = len(existing.public_subnets)
        return counts

    def _check_subnet_counts(self) -> None:
        want = len(self.availability_zones)
        counted = self._vpc_subnet_counts()
        for index, network in enumerate(self.multus.networks):
            counted[f"multus.networks[{index}] ({network.name}).subnets"] = len(network.subnets)
        for field, count in counted.items():
            if count != want:
                raise ValueError(
                    f"{field}: {count} subnet(s) for {want} availability zones; give one per "
                    f"AZ, in the order of availability_zones {self.availability_zones}"
                )

    def _check_subnets_fit_vpc(self) -> None:
        blocks = [net(cidr) for cidr in self.vpc_cidrs]
        placed: list[tuple[str, ipaddress.IPv4Network]] = []
        for label, cidr in self.all_subnet_cidrs():
            subnet = net(cidr)
            if not any(subnet.subnet_of(block) for block in blocks):
                raise ValueError(
                    f"{label}: {cidr} is outside the VPC CIDR {', '.join(self.vpc_cidrs)}; "
                    "pick a range inside it"
                )
            for other_label, other in placed:
                if subnet.overlaps(other):
                    raise ValueError(
                        f"{label}: {cidr} overlaps {other_label} ({other}); give each subnet "
                        "a range of its own"
                    )
            placed.append((label, subnet))

    def _check_karpenter_supports_kubernetes(self) -> None:
        kubernetes = self.cluster.kubernetes_version
        if not karpenter_releases.supports(self.karpenter.version, kubernetes):
            raise ValueError(
                f"karpenter.version: {self.karpenter.version} does not support Kubernetes "
                f"{kubernetes}; use Karpenter >= {karpenter_releases.first_supporting(kubernetes)} "
                "or an older cluster.kubernetes_version"
            )

    def all_subnet_cidrs(self) -> list[tuple[str, str]]:
        """(config path, CIDR) of every subnet the VPC gets."""
        labelled = self._vpc_subnet_cidrs()
        for n, network in enumerate(self.multus.networks):
            labelled += [
                (f"multus.networks[{n}].subnets[{i}].cidr", s.cidr)
                for i, s in enumerate(network.subnets)
            ]
        return labelled

    def _vpc_subnet_cidrs(self) -> list[tuple[str, str]]:
        """(config path, CIDR) of the public and node subnets, given or to be created."""
        existing = self.vpc.existing
        if existing is not None:
            return [
                (f"vpc.existing.{group}[{i}].cidr", subnet.cidr)
                for group, subnets in (
                    ("public_subnets", existing.public_subnets),
                    ("node_subnets", existing.node_subnets),
                )
                for i, subnet in enumerate(subnets)
            ]
        return [
            (f"vpc.public_subnet_cidrs[{i}]", c) for i, c in enumerate(self.vpc.public_subnet_cidrs)
        ] + [(f"vpc.node_subnet_cidrs[{i}]", c) for i, c in enumerate(self.vpc.node_subnet_cidrs)]
