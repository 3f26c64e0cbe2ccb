"""The Multus networks: their subnets per AZ, CIDR reservations, IPv6, interface names and IP
management."""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from config.connection_tracking import ConnectionTracking
from config.interface_names import (
    eni_interface_names,
    interface_name_problem,
    reserved_interface_reason,
)
from config.model.base import (
    _K8S_NAME,
    _LINUX_IFNAME,
    EXISTING_NAMESPACES,
    StrictModel,
    net,
    unit,
)
from config.model.connection_tracking import ConnectionTrackingConfig
from config.model.network_subnets import MultusSubnetConfig, NetworkIpv6Config
from config.model.routes import MultusRouteConfig, PodRoutedRange
from config.model.security_groups import (
    ANYWHERE_IPV6,
    NetworkSecurityGroupConfig,
    SecurityGroupRuleConfig,
)
from config.network_plan import (
    HOST_DEVICE,
    IP_MANAGEMENT_MODES,
    IPVLAN,
    WHEREABOUTS,
    IpManagementMode,
    NetworkMode,
)
from config.node_prefix import check_node_prefix_settings
from config.path_mtu import MIN_MTU, VPC_MTU, path_mtu


class MultusNetworkConfig(StrictModel):
    """A secondary network: one ENI per node (ipvlan) or enis_per_node ENIs, each moved whole
    into a pod (host-device); one subnet per AZ, one NAD per AZ (and ENI slot)."""

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
    mode: NetworkMode = Field(
        default=IPVLAN,
        description="ipvlan (default): the node's one ENI of the network is shared by its pods, "
        "each with an ipvlan interface and its own address. host-device: the node attaches "
        "enis_per_node ENIs of the network and each pod gets a whole one moved into its network "
        "namespace (the host-device CNI plugin), with the ENI's primary address, for user "
        "planes that need the NIC itself, such as DPDK (docs/network.md, Whole-ENI networks).",
    )
    enis_per_node: int = Field(
        default=1,
        ge=1,
        json_schema_extra=unit("ENIs", "ENI"),
        description="host-device only: ENIs of the network on each node of a pool attaching "
        "it, so pods of the network per node; each is named <interface name><k> on the node "
        "and reached through its own NAD <network>-<az>-<k>, k = 0..enis_per_node-1.",
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
        json_schema_extra=unit("/28 prefixes", "/28 prefix"),
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
    pod_routed_ranges: list[PodRoutedRange] = Field(
        default=[],
        description="IPv4 ranges that pods of this network answer for without holding them "
        "as their own addresses, such as a UPF's UE address pool on N6: the node agent of the "
        "node where a pod asking for a range (its network annotation's cni-args "
        "podRoutedRanges) gets its address points the range's route in the network's route "
        "tables at that node's ENI, and the route follows the pod when it moves "
        "(docs/multus-pod-ips.md, Routes that follow a pod). None may cover the instance "
        "metadata service's 169.254.169.254 (the node routes the range to the pod).",
    )
    ipv6: NetworkIpv6Config | None = Field(
        default=None,
        description="Dual stack: the network's subnets get a /64 of the VPC's IPv6 block "
        "(needs vpc.ipv6) and pods an IPv6 address next to the IPv4 one (docs/network.md, "
        "Dual stack). true: dual stack with the default settings; unset or false: IPv4 only.",
    )
    mtu: int | None = Field(
        default=None,
        ge=MIN_MTU,
        le=VPC_MTU,
        json_schema_extra=unit("bytes", "byte"),
        description="The MTU of the network's ENIs and of its pods' interfaces (the NADs' "
        "ipvlan), 1280-9001. Unset: the narrowest path of its routes: 9001 inside the VPC, "
        "8500 with a transit_gateway route, 1500 with a nat_gateway route, 1446 with a "
        "vpn_gateway route (docs/network.md, MTU).",
    )

    connection_tracking: ConnectionTrackingConfig | None = Field(
        default=None,
        description="Idle timeouts of the flows the network's security group tracks, set on "
        "its ENIs at creation, for flows that idle longer than EC2's defaults: HTTP/2 "
        "connections between network functions, GTP-U and PFCP (docs/network.md, Connection "
        "tracking).",
    )

    network_card: int = Field(
        default=0,
        ge=0,
        description="The network card the network's ENIs attach to (EC2's NetworkCardIndex) "
        "on instance types with several, each with its own bandwidth and interfaces: 0 "
        "(default) is the card of the node's primary interface; with N > 0, every pool "
        "attaching the network may only launch sizes with more than N cards "
        "(docs/network.md, Network cards).",
    )

    @field_validator("ipv6", mode="before")
    @classmethod
    def _ipv6_shorthand(cls, value: object) -> object:
        # "ipv6": true is the natural way to say "dual stack with the default settings".
        if value is True:
            return {}
        return None if value is False else value

    @property
    def device_name(self) -> str:
        return self.interface_name or self.name

    @property
    def connection_tracking_plan(self) -> ConnectionTracking | None:
        return self.connection_tracking.planned() if self.connection_tracking else None

    @property
    def effective_mtu(self) -> int:
        """The MTU its interfaces get: the one set, or the narrowest of its routes' paths."""
        return self.mtu or path_mtu(route.target for route in self.routes)

    @property
    def egress_rules(self) -> list[SecurityGroupRuleConfig]:
        """The egress rules; unset on a dual-stack network: all traffic to 0.0.0.0/0 and ::/0
        (the seed's two rules)."""
        rules = self.security_group.egress
        if self.ipv6 is not None and "egress" not in self.security_group.model_fields_set:
            return [*rules, SecurityGroupRuleConfig(protocol="all", cidr=ANYWHERE_IPV6)]
        return rules

    @property
    def ip_management_mode(self) -> IpManagementMode:
        return IP_MANAGEMENT_MODES[self.ip_management]

    @property
    def host_device(self) -> bool:
        return self.mode == HOST_DEVICE

    @property
    def interface_names(self) -> list[str]:
        """The Linux names of the network's ENIs on a node (config/interface_names.py)."""
        return eni_interface_names(self.device_name, self.host_device, self.enis_per_node)

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
            self.ip_management_mode,
            self.prefixes_per_node,
            [subnet.reservation for subnet in self.subnets],
        )
        return self

    @model_validator(mode="after")
    def _host_device_settings(self) -> MultusNetworkConfig:
        # Every rule at once: a host-device network usually breaks several of them together.
        problems = self._host_device_problems() if self.host_device else self._ipvlan_problems()
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def _ipvlan_problems(self) -> list[str]:
        if self.enis_per_node == 1:
            return []
        return [
            f"enis_per_node: {self.enis_per_node} ENIs per node only serve a host-device "
            f"network (one pod per ENI); an ipvlan network's pods share its one ENI: remove "
            f'enis_per_node or set mode "{HOST_DEVICE}"'
        ]

    def _host_device_problems(self) -> list[str]:
        """The pod owns the whole ENI and its primary address: nothing hands out, reserves or
        routes further addresses on it (docs/network.md, Whole-ENI networks)."""
        problems = []
        if self.ip_management != WHEREABOUTS.name:
            problems.append(
                f"ip_management: {self.ip_management!r} hands out pod addresses from /28 "
                "prefixes on a shared ENI, but a host-device pod takes the whole ENI and its "
                "primary address; remove ip_management (or set it to "
                f'{WHEREABOUTS.name!r}) or use mode "{IPVLAN}"'
            )
        for index, subnet in enumerate(self.subnets):
            if subnet.static_range is not None or subnet.floating_addresses:
                field = "static_range" if subnet.static_range else "floating_addresses"
                problems.append(
                    f"subnets[{index}].{field}: a host-device pod has its ENI's primary "
                    "address, which EC2 picks when the node creates the ENI, so no fixed or "
                    f'floating address reaches it; remove {field} or use mode "{IPVLAN}"'
                )
        if self.pod_routed_ranges:
            problems.append(
                "pod_routed_ranges: the pod IP agent, which points their routes at a pod's "
                "node, does not run on host-device networks; the pod owns its ENI: route a "
                "range to its address (or to its ENI, a network_interface route) yourself, "
                f'and remove pod_routed_ranges, or use mode "{IPVLAN}"'
            )
        if "ipvlan_mode" in self.model_fields_set:
            problems.append(
                "ipvlan_mode: a host-device network has no ipvlan interface (the pod gets the "
                "ENI itself); remove ipvlan_mode"
            )
        if self.ipv6 is not None:
            problems.append(
                "ipv6: host-device networks are IPv4 only for now (the node's CNI config "
                "gives the pod the ENI's primary IPv4 address); remove ipv6 or use mode "
                f'"{IPVLAN}"'
            )
        named = next(
            (problem for name in self.interface_names if (problem := interface_name_problem(name))),
            None,
        )
        if named:
            field = "interface_name" if self.interface_name else "name"
            problems.append(
                f"{field}: with enis_per_node {self.enis_per_node} the ENIs are named "
                f"{', '.join(self.interface_names)} on the node (Linux takes at most 15 "
                f"characters), and {named}; set another interface_name"
            )
        return problems

    @model_validator(mode="after")
    def _static_ranges_need_whereabouts(self) -> MultusNetworkConfig:
        if self.ip_management_mode.static_addresses:
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
        if self.routes and self.ip_management_mode.node_local_config:
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
    def _pod_routed_ranges_reach_a_pod(self) -> MultusNetworkConfig:
        if not self.pod_routed_ranges:
            return self
        if not self.ip_management_mode.pod_ip_agent:
            raise ValueError(
                f"pod_routed_ranges: the pod IP agent points their routes at the pod's node, "
                f"and it does not run for ip_management {self.ip_management!r}; use "
                f"ip_management {WHEREABOUTS.name!r} or remove pod_routed_ranges"
            )
        if self.source_dest_check:
            raise ValueError(
                "pod_routed_ranges: an ENI with EC2's source/destination check drops packets "
                'to addresses it does not hold (EC2 User Guide, "Source/destination '
                'checks"), so the range would not reach its pod; set source_dest_check false '
                "or remove pod_routed_ranges"
            )
        destinations = [ipaddress.ip_network(route.destination) for route in self.routes]
        for index, cidr in enumerate(self.pod_routed_ranges):
            routed = net(cidr)
            for earlier in self.pod_routed_ranges[:index]:
                if net(earlier).overlaps(routed):
                    raise ValueError(
                        f"pod_routed_ranges[{index}]: {cidr} overlaps {earlier}; their routes "
                        "could point at different nodes, sending part of one range to the "
                        "other's pod: list disjoint ranges"
                    )
            for position, destination in enumerate(destinations):
                if destination == routed:
                    raise ValueError(
                        f"pod_routed_ranges[{index}]: {cidr} is also routes[{position}]"
                        "'s destination; a route table holds one route per destination: "
                        "keep it in one of the two lists"
                    )
                if destination.version == routed.version and destination.overlaps(routed):
                    # Both routes are in the network's route tables: the longest prefix wins,
                    # so part of one range would go to the other's target (a UE pool inside
                    # the data network's route, or a data network inside the UE pool).
                    route = self.routes[position]
                    target = route.target_id or "the NAT gateway"
                    raise ValueError(
                        f"pod_routed_ranges[{index}]: {cidr} overlaps routes[{position}]'s "
                        f"destination {route.destination} (to {target}); "
                        "both routes would be in the network's route tables, where the longest "
                        "prefix wins, so part of one range would go to the other's target "
                        "instead: keep the pod-routed range outside the network's routes (for "
                        "example a UE pool 10.45.0.0/16 beside a data network 10.200.0.0/16)"
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
            for position, route in enumerate(self.routes):
                if route.is_ipv6:
                    raise ValueError(
                        f"routes[{position}].destination: {route.destination} is IPv6, but the "
                        "network has no IPv6 addresses; set this network's ipv6 (for example "
                        '"ipv6": true) or route an IPv4 CIDR'
                    )
            return self
        if self.ip_management_mode.node_local_config:
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
        names: dict[str, int] = {}
        interfaces: dict[str, int] = {}
        for index, network in enumerate(self.networks):
            if network.name in names:
                raise ValueError(
                    f"networks[{index}].name: {network.name!r} is also networks"
                    f"[{names[network.name]}]'s name; give each network its own"
                )
            names[network.name] = index
            for interface in network.interface_names:
                if interface in interfaces:
                    first = interfaces[interface]
                    raise ValueError(
                        f"networks[{index}].interface_name: {interface!r} is also the "
                        f"interface name of networks[{first}] ({self.networks[first].name}); a "
                        "network's interface is named by interface_name, or by its name when "
                        "that is unset (a host-device network's ENIs by that name and 0, 1, "
                        "...): set interface_name so that each network has its own"
                    )
                interfaces[interface] = index
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
