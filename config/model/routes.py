"""A Multus network's routes: destinations beyond the VPC and the target each leaves by."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import (
    AfterValidator,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)

from config import patterns
from config.model.base import (
    Cidr,
    RuleCidr,
    StrictModel,
)
from config.model.security_groups import (
    ANYWHERE,
    ANYWHERE_IPV6,
    ROUTE_TARGET_IDS,
)
from config.network_plan import RouteTarget

#: The instance metadata service's addresses (EC2 User Guide, "Access instance metadata for an
#: EC2 instance": IPv4 169.254.169.254, IPv6 fd00:ec2::254 on Nitro instances). The node's
#: IMDSv2 hop limit of 1 keeps pods off them only while their packets are forwarded by the
#: node; a route of the config that covers one opens another path (issue #49).
IMDS_ADDRESSES = (
    ipaddress.IPv4Address("169.254.169.254"),
    ipaddress.IPv6Address("fd00:ec2::254"),
)


def imds_address_in(cidr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IMDS address inside `cidr` (a valid CIDR), or None."""
    network = ipaddress.ip_network(cidr)
    return next((address for address in IMDS_ADDRESSES if address in network), None)


def _pod_routed_range_clear_of_imds(cidr: str) -> str:
    # The multus-pod-ip plugin routes each range a pod asks for in the node's own namespace via
    # the pod (multus_pod_ips/cni_plugin.py): a range over 169.254.169.254 would send the
    # node's IMDS requests (the kubelet's, the pod IP agent's, their credentials) to that pod.
    address = imds_address_in(cidr)
    if address is not None:
        raise ValueError(
            f"{cidr} covers {address}, the instance metadata service's address: the node routes "
            "a pod-routed range to the pod that asks for it, so the node's own IMDS requests "
            "(the kubelet's, the pod IP agent's) would go to that pod; give a range that leaves "
            f"{address} out (for example a UE pool 10.45.0.0/16)"
        )
    return cidr


#: A pod-routed range: an IPv4 CIDR that leaves the instance metadata service out.
PodRoutedRange = Annotated[Cidr, AfterValidator(_pod_routed_range_clear_of_imds)]


class MultusRouteConfig(StrictModel):
    """A destination outside the VPC (the RAN, a data network) that a Multus network's subnets
    route to one target, and its pods over their Multus interface (docs/network.md)."""

    destination: RuleCidr = Field(
        description="CIDR outside the VPC, for example the RAN's gNB range (N3) or a data "
        "network (N6); not 0.0.0.0/0 (the default route is nat_egress), nor one that covers "
        "the instance metadata service (169.254.169.254, fd00:ec2::254). An IPv6 CIDR needs a "
        "dual-stack network (ipv6) and a transit gateway or network interface target."
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
        if destination == ANYWHERE_IPV6:
            raise ValueError(
                f"{ANYWHERE_IPV6} is the default IPv6 route, which a dual-stack network's "
                "nat_egress gives (to the VPC's egress-only internet gateway); routes name the "
                "ranges beyond the VPC, for example 2001:db8:45::/48"
            )
        # A pod gets each route on its Multus interface (the NAD's routes, via the subnet's VPC
        # router): a process that binds the Multus address would send IMDS requests out of the
        # Multus ENI, where the node's hop limit of 1 does not stop the answer.
        address = imds_address_in(destination)
        if address is not None:
            raise ValueError(
                f"{destination} covers {address}, the instance metadata service's address: "
                "the pods get this route on their Multus interface, so a pod that binds its "
                "Multus address would reach the node's IMDS, and the node role's credentials, "
                "over the Multus ENI; route only ranges that leave "
                f"{address} out (for example 10.200.0.0/16)"
            )
        return destination

    @property
    def is_ipv6(self) -> bool:
        return ":" in self.destination

    @model_validator(mode="after")
    def _ipv6_target(self) -> MultusRouteConfig:
        # botocore's EC2 model, CreateRoute: NatGatewayId is "[IPv4 traffic only]" (a NAT
        # gateway translates IPv6 only as NAT64, to 64:ff9b::/96). A virtual private gateway
        # takes the route, though only Direct Connect brings IPv6 to it (route_rules warns).
        if self.is_ipv6 and self.nat_gateway:
            raise ValueError(
                f"nat_gateway: {self.destination} is IPv6, which a NAT gateway does not route; "
                "route IPv6 to a transit_gateway_id or a network_interface_id"
            )
        return self

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
