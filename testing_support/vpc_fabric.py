"""Which Ethernet frames the VPC would deliver between the ENIs of a Multus subnet.

The data-plane tier stands a Linux bridge in for each Multus subnet and a veth with the ENI's
MAC in for each ENI. This module turns the emulator's ENI state (a DescribeNetworkInterfaces
answer) into a model of the subnet, a decision function (`VpcFabric.delivers`) and an
nftables `bridge` table that enforces the same decisions on those bridges. Both read the
same data (`Eni.blocks`), so the unit tests of the decision function and of the rule set test
one model.

The rules and where they come from:

- Delivery only to what an ENI holds. The VPC delivers to the private IPv4 addresses assigned
  to an ENI (primary and secondary: EC2 User Guide, "Multiple IP addresses" / "Assign a
  secondary private IPv4 address", the address is the ENI's until unassigned or moved) and to
  addresses inside the IPv4 prefixes delegated to it (EC2 User Guide, "Prefix delegation for
  Amazon EC2 network interfaces": a prefix is assigned to the ENI like a range of secondary
  addresses). The DESIGN's "the VPC delivers traffic only to addresses assigned to an ENI"
  rests on these pages; the subnet's route table only has the `local` route for the VPC CIDR
  (VPC User Guide, "Route tables": local routes cover communication inside the VPC), which
  targets no single ENI.
- Source/destination check. "Each EC2 instance performs source/destination checks by
  default. This means that the instance must be the source or destination of any traffic it
  sends or receives" (VPC User Guide, "NAT instances", "Disable source/destination checks";
  EC2 API reference, ModifyNetworkInterfaceAttribute, `SourceDestCheck`). An ENI with the check
  on may send only from addresses it holds. Receiving needs no separate rule: without a route
  that targets the ENI, the VPC delivers to an ENI only its own addresses whatever its check.
- ARP. The VPC answers ARP itself: a request for an address an ENI of the subnet holds (or
  for the subnet's gateway, the VPC router at the first host: VPC User Guide, "Subnet CIDR
  blocks", the base address plus one is reserved for the VPC router) is answered, one for an
  address nobody holds goes unanswered. The model lets such requests cross the bridge and lets
  a reply through only from the MAC of the ENI that holds the sender address; every other ARP
  frame is dropped.
- No broadcast, no multicast. Amazon VPC FAQs: "Amazon VPC does not support broadcast or
  multicast" (multicast only through a Transit Gateway multicast domain, not modelled). An IPv4
  frame to the broadcast MAC, a subnet broadcast address or a multicast group matches no ENI's
  address and is dropped; so is every EtherType other than IPv4 and ARP.

- The VPC router. Traffic between subnets goes through the router at each subnet's base
  address plus one (VPC User Guide, "Route tables": the `local` route), so the same rules hold
  on that path: what an ENI sends to the router passes its source check first, and the router
  delivers to an ENI only what it holds. In the kernel the router is the network namespace of
  the bridges, the gateway address sits on each bridge device and the device's MAC is
  `Subnet.router_mac`; its frames pass the `input` and `output` hooks of the bridge family,
  not `forward`, so the table has a chain on each.
- Routes whose target is an ENI. A route of a subnet's route table may target an ENI (EC2 API
  reference, CreateRoute / ReplaceRoute, `NetworkInterfaceId`); the VPC then sends a packet
  for the route's destination to that ENI, which accepts an address it does not hold only with
  its source/dest check off ("Source/destination checks", EC2 User Guide). The model reads each
  subnet's table (DescribeRouteTables: the one associated with the subnet, else the VPC's main
  table) and delivers an IPv4 frame for a destination such a route covers to the MAC of the
  route's target, when that ENI is on the same subnet and its check is off
  (`Subnet.routed_to`). The router forwards it there (kernel_vpc.py programs the route); a
  table whose ENI routes overlap is refused (the rule set has no longest-prefix match).

What the model does not model: security groups and network ACLs (neither their rules nor the
connection tracking that lets replies back in); routes to an ENI of another subnet or AZ than
the table's own, and routes to targets other than an ENI (gateways, NAT, peering: their
packets are dropped); longest-prefix match between an ENI route and the `local` route (the
model assumes ENI routes lie outside the VPC CIDR, as the config requires of pod-routed
ranges); blackhole routes are simply absent; the real mapping
service (its latency, and the remap delay that `eni_addresses.py` models for IMDS only); that
it delivers by destination address whatever the destination MAC (the model delivers by MAC: a
peer's stale neighbour entry for an address that moved to another ENI is dropped, where the VPC
would deliver to the new holder); IPv6 and NDP: every IPv6 frame is dropped, also one for an
IPv6 address an ENI holds (the emulator's dual-stack subnets give ENIs IPv6 addresses, but the
data-plane tier has no dual-stack network yet, so no frame of its exchanges is IPv6).

The table owns every bridge of the network namespace it is loaded into: a frame whose source
MAC is no modelled ENI's is dropped (a veth that is not an ENI has no place on the fabric).
"""

from __future__ import annotations

import enum
import hashlib
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TABLE_NAME = "vpc_fabric"


class FrameKind(enum.Enum):
    """What a frame carries, as far as the fabric tells frames apart."""

    IPV4 = "ipv4"
    ARP_REQUEST = "arp-request"
    ARP_REPLY = "arp-reply"
    IPV6 = "ipv6"
    OTHER = "other"  # any other EtherType


@dataclass(frozen=True)
class Frame:
    """One frame on a subnet's bridge. For ARP, the addresses are the sender and target
    protocol addresses (`arp saddr ip` / `arp daddr ip`); for IPv4 the IP header's."""

    kind: FrameKind
    source_mac: str
    destination_mac: str
    source_ip: str = ""
    destination_ip: str = ""


@dataclass(frozen=True)
class Eni:
    """One ENI as DescribeNetworkInterfaces shows it, with the prefixes delegated to it."""

    eni_id: str
    mac: str  # lower case, as EC2 reports it
    addresses: tuple[ipaddress.IPv4Address, ...]  # primary first
    prefixes: tuple[ipaddress.IPv4Network, ...]
    source_dest_check: bool

    @property
    def blocks(self) -> tuple[ipaddress.IPv4Network, ...]:
        """Everything the VPC delivers to this ENI: each address as a /32, then the prefixes."""
        return tuple(ipaddress.IPv4Network(address) for address in self.addresses) + self.prefixes

    def holds(self, address: ipaddress.IPv4Address) -> bool:
        return any(address in block for block in self.blocks)


@dataclass(frozen=True)
class EniRoute:
    """A route of a subnet's route table whose target is an ENI."""

    destination: ipaddress.IPv4Network
    eni_id: str


@dataclass(frozen=True)
class Subnet:
    """One Multus subnet: one bridge, one chain and its three sets in the rule set."""

    subnet_id: str
    cidr: ipaddress.IPv4Network
    enis: tuple[Eni, ...]  # sorted by MAC
    routes: tuple[EniRoute, ...] = ()  # the subnet's route table's routes to ENIs

    @property
    def gateway(self) -> ipaddress.IPv4Address:
        """The VPC router: the subnet's base address plus one."""
        return self.cidr.network_address + 1

    @property
    def chain(self) -> str:
        return self.subnet_id.replace("-", "_")

    @property
    def router_mac(self) -> str:
        """The VPC router's MAC on this subnet: locally administered, stable per subnet ID."""
        digest = hashlib.sha256(self.subnet_id.encode()).digest()[:5]
        return ":".join(f"{byte:02x}" for byte in (0x02, *digest))

    def eni_with_mac(self, mac: str) -> Eni | None:
        return next((eni for eni in self.enis if eni.mac == mac.lower()), None)

    def holder(self, address: ipaddress.IPv4Address) -> Eni | None:
        return next((eni for eni in self.enis if eni.holds(address)), None)

    def routed_to(self, address: ipaddress.IPv4Address) -> Eni | None:
        """The ENI the subnet's route table sends `address` to, when it is on this subnet
        with its source/dest check off: only then does it take the packet."""
        return next((eni for cidr, eni in self.delivered_routes if address in cidr), None)

    @property
    def delivered_routes(self) -> tuple[tuple[ipaddress.IPv4Network, Eni], ...]:
        """Each route's destination with its target, for the targets on this subnet with the
        check off (the routes' destinations are disjoint: `_subnet` refuses overlaps)."""
        targets = {eni.eni_id: eni for eni in self.enis if not eni.source_dest_check}
        return tuple(
            (route.destination, targets[route.eni_id])
            for route in self.routes
            if route.eni_id in targets
        )

    def sends_from(self, mac: str) -> bool:
        return mac.lower() == self.router_mac or self.eni_with_mac(mac) is not None

    def answers_arp_for(self, address: ipaddress.IPv4Address) -> bool:
        return address == self.gateway or self.holder(address) is not None

    def delivers(self, frame: Frame) -> bool:
        """The decision of this subnet's chains, rule by rule in the rule set's order."""
        if frame.source_mac.lower() == self.router_mac:
            return self._router_sends(frame)
        if frame.kind is FrameKind.ARP_REQUEST:
            return self.answers_arp_for(_address(frame.destination_ip))
        if frame.kind is FrameKind.ARP_REPLY:
            holder = self.holder(_address(frame.source_ip))
            return holder is not None and holder.mac == frame.source_mac.lower()
        sender = self.eni_with_mac(frame.source_mac)
        if frame.kind is not FrameKind.IPV4 or sender is None:
            return False
        if sender.source_dest_check and not sender.holds(_address(frame.source_ip)):
            return False
        if frame.destination_mac.lower() == self.router_mac:
            return True
        return self._held_by_receiver(frame)

    def _router_sends(self, frame: Frame) -> bool:
        """The router asks for any address and answers for its own; it forwards to an ENI only
        what that ENI holds."""
        if frame.kind is FrameKind.ARP_REQUEST:
            return True
        if frame.kind is FrameKind.ARP_REPLY:
            return _address(frame.source_ip) == self.gateway
        return frame.kind is FrameKind.IPV4 and self._held_by_receiver(frame)

    def _held_by_receiver(self, frame: Frame) -> bool:
        """The receiver holds the destination, or a route of the table sends it there."""
        receiver = self.eni_with_mac(frame.destination_mac)
        destination = _address(frame.destination_ip)
        return receiver is not None and (
            receiver.holds(destination) or self.routed_to(destination) == receiver
        )


@dataclass(frozen=True)
class VpcFabric:
    """The Multus subnets whose ENIs the data-plane tier puts on bridges."""

    subnets: tuple[Subnet, ...]  # sorted by subnet ID

    def delivers(self, frame: Frame) -> bool:
        """Whether the VPC carries the frame from its source MAC's ENI (or router) on."""
        subnet = next((s for s in self.subnets if s.sends_from(frame.source_mac)), None)
        return subnet is not None and subnet.delivers(frame)

    def nftables_ruleset(self) -> str:
        """The `bridge` table enforcing `delivers` on the subnets' bridges (`nft -f`)."""
        lines = [f"table bridge {TABLE_NAME} {{", "\tmap subnet_of_eni {"]
        lines += ["\t\ttype ether_addr : verdict"]
        lines += _elements(f"{eni.mac} : jump {s.chain}" for s in self.subnets for eni in s.enis)
        lines += ["\t}", "\tmap subnet_of_router {", "\t\ttype ether_addr : verdict"]
        lines += _elements(f"{s.router_mac} : jump {s.chain}_router" for s in self.subnets)
        lines += ["\t}"]
        for subnet in self.subnets:
            lines += _subnet_sets(subnet)
        # forward: ENI to ENI; input: ENI to the router; output: the router to an ENI.
        for hook, verdicts in (
            ("forward", "subnet_of_eni"),
            ("input", "subnet_of_eni"),
            ("output", "subnet_of_router"),
        ):
            lines += [
                f"\tchain {hook} {{",
                f"\t\ttype filter hook {hook} priority filter; policy drop;",
                f"\t\tether saddr vmap @{verdicts}",
                "\t}",
            ]
        for subnet in self.subnets:
            lines += _subnet_chains(subnet)
        return "\n".join([*lines, "}", ""])


def fabric_from_ec2(
    network_interfaces: Mapping[str, Any],
    subnets: Mapping[str, Any],
    delegated_prefixes: Mapping[str, Sequence[str]] | None = None,
    route_tables: Mapping[str, Any] | None = None,
) -> VpcFabric:
    """The fabric of the subnets in a DescribeSubnets answer (pass only the Multus subnets),
    with the ENIs of a DescribeNetworkInterfaces answer that are in them.

    `delegated_prefixes` (ENI ID -> prefixes) adds what the emulator keeps beside moto, which
    does not record prefixes (`Ec2Emulator.proxy.prefixes.of`); prefixes in the answer's
    `Ipv4Prefixes` count as well. `route_tables` (a DescribeRouteTables answer of the VPC)
    gives each subnet its table's routes to ENIs."""
    extra = delegated_prefixes or {}
    routes = _eni_routes(route_tables or {"RouteTables": []}, subnets)
    by_subnet: dict[str, list[Eni]] = {item["SubnetId"]: [] for item in subnets["Subnets"]}
    for item in network_interfaces["NetworkInterfaces"]:
        if item["SubnetId"] in by_subnet:
            by_subnet[item["SubnetId"]].append(
                _eni(item, extra.get(item["NetworkInterfaceId"], ()))
            )
    cidrs = {
        item["SubnetId"]: ipaddress.IPv4Network(item["CidrBlock"]) for item in subnets["Subnets"]
    }
    return VpcFabric(
        tuple(
            _subnet(subnet_id, cidrs[subnet_id], enis, routes.get(subnet_id, ()))
            for subnet_id, enis in sorted(by_subnet.items())
        )
    )


def _eni(item: Mapping[str, Any], extra_prefixes: Sequence[str]) -> Eni:
    listed = sorted(item["PrivateIpAddresses"], key=lambda entry: not entry.get("Primary"))
    prefixes = {entry["Ipv4Prefix"] for entry in item.get("Ipv4Prefixes") or ()}
    return Eni(
        eni_id=item["NetworkInterfaceId"],
        mac=item["MacAddress"].lower(),
        addresses=tuple(ipaddress.IPv4Address(entry["PrivateIpAddress"]) for entry in listed),
        prefixes=tuple(sorted(ipaddress.IPv4Network(p) for p in prefixes | set(extra_prefixes))),
        source_dest_check=bool(item["SourceDestCheck"]),
    )


def _eni_routes(
    route_tables: Mapping[str, Any], subnets: Mapping[str, Any]
) -> dict[str, tuple[EniRoute, ...]]:
    """Each subnet's routes to ENIs: those of the table associated with it, else of its VPC's
    main table (VPC User Guide, "Subnet route tables"); blackhole routes (target gone) left out."""
    explicit: dict[str, tuple[EniRoute, ...]] = {}
    main: dict[str, tuple[EniRoute, ...]] = {}
    for table in route_tables["RouteTables"]:
        routes = tuple(
            EniRoute(
                ipaddress.IPv4Network(route["DestinationCidrBlock"]), route["NetworkInterfaceId"]
            )
            for route in table.get("Routes", ())
            if route.get("NetworkInterfaceId")
            and route.get("DestinationCidrBlock")
            and route.get("State") != "blackhole"
        )
        for association in table.get("Associations", ()):
            if association.get("Main"):
                main[table.get("VpcId", "")] = routes
            elif association.get("SubnetId"):
                explicit[association["SubnetId"]] = routes
    return {
        item["SubnetId"]: explicit.get(item["SubnetId"], main.get(item.get("VpcId", ""), ()))
        for item in subnets["Subnets"]
    }


def _subnet(
    subnet_id: str,
    cidr: ipaddress.IPv4Network,
    enis: Iterable[Eni],
    routes: tuple[EniRoute, ...] = (),
) -> Subnet:
    """Refuses what EC2 never shows and nft could not load: an address on two ENIs (or inside
    another's prefix), or outside the subnet."""
    ordered = tuple(sorted(enis, key=lambda eni: eni.mac))
    seen: list[tuple[ipaddress.IPv4Network, str]] = []
    for eni in ordered:
        for block in eni.blocks:
            if not block.subnet_of(cidr):
                raise ValueError(f"{eni.eni_id}: {block} is outside its subnet {cidr}")
            clash = next((owner for other, owner in seen if other.overlaps(block)), None)
            if clash:
                raise ValueError(f"{eni.eni_id}: {block} overlaps an address of {clash}")
            seen.append((block, eni.eni_id))
    for index, route in enumerate(routes):
        if any(route.destination.overlaps(other.destination) for other in routes[:index]):
            # A longest-prefix match the rule set, one set of (MAC . block), cannot express.
            raise ValueError(f"{subnet_id}: the ENI route to {route.destination} overlaps another")
    return Subnet(subnet_id, cidr, ordered, routes)


def _address(text: str) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(text)


def _elements(items: Iterable[str]) -> list[str]:
    listed = list(items)
    return [f"\t\telements = {{ {', '.join(listed)} }}"] if listed else []


def _subnet_sets(subnet: Subnet) -> list[str]:
    """held: (MAC, block) the VPC delivers to; answered: addresses whose ARP the VPC answers;
    source_checked: MACs of ENIs with the source/dest check on."""
    answered = [subnet.gateway, *sorted(b for eni in subnet.enis for b in eni.blocks)]
    routed = (f"{eni.mac} . {_block(cidr)}" for cidr, eni in subnet.delivered_routes)
    return [
        f"\tset {subnet.chain}_held {{",
        "\t\ttype ether_addr . ipv4_addr",
        "\t\tflags interval",
        *_elements(f"{eni.mac} . {_block(b)}" for eni in subnet.enis for b in eni.blocks),
        "\t}",
        f"\tset {subnet.chain}_answered {{",
        "\t\ttype ipv4_addr",
        "\t\tflags interval",
        *_elements(_block(ipaddress.IPv4Network(b)) for b in answered),
        "\t}",
        f"\tset {subnet.chain}_source_checked {{",
        "\t\ttype ether_addr",
        *_elements(eni.mac for eni in subnet.enis if eni.source_dest_check),
        "\t}",
        f"\tset {subnet.chain}_routed {{",
        "\t\ttype ether_addr . ipv4_addr",
        "\t\tflags interval",
        *_elements(routed),
        "\t}",
    ]


def _subnet_chains(subnet: Subnet) -> list[str]:
    name = subnet.chain
    return [
        f"\tchain {name} {{",
        f"\t\tarp operation request arp daddr ip @{name}_answered accept",
        f"\t\tarp operation reply ether saddr . arp saddr ip @{name}_held accept",
        "\t\tether type arp drop",
        f"\t\tether saddr @{name}_source_checked jump {name}_source_check",
        f"\t\tether daddr {subnet.router_mac} meta protocol ip accept",
        f"\t\tether daddr . ip daddr @{name}_held accept",
        f"\t\tether daddr . ip daddr @{name}_routed accept",
        "\t\tdrop",
        "\t}",
        f"\tchain {name}_source_check {{",
        f"\t\tether saddr . ip saddr @{name}_held return",
        "\t\tdrop",
        "\t}",
        f"\tchain {name}_router {{",
        "\t\tarp operation request accept",
        f"\t\tarp operation reply arp saddr ip {subnet.gateway} accept",
        "\t\tether type arp drop",
        f"\t\tether daddr . ip daddr @{name}_held accept",
        f"\t\tether daddr . ip daddr @{name}_routed accept",
        "\t\tdrop",
        "\t}",
    ]


def _block(block: ipaddress.IPv4Network) -> str:
    return str(block.network_address) if block.prefixlen == 32 else str(block)
