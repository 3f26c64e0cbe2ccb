"""The documented day-2 config changes (docs/operations.md), each over the default config."""

from __future__ import annotations

from typing import Any

from config import parse_config


def _networks_with(change: Any) -> list[dict[str, Any]]:
    networks: list[dict[str, Any]] = parse_config({}).model_dump(mode="json")["multus"]["networks"]
    change(networks)
    return networks


def _third_network(networks: list[dict[str, Any]]) -> None:
    networks.append(
        {
            "name": "multus3",
            "subnets": [
                {"cidr": "10.0.8.0/24", "reservation": "10.0.8.32/27"},
                {"cidr": "10.0.9.0/24", "reservation": "10.0.9.32/27"},
            ],
        }
    )


def _other_reservation(networks: list[dict[str, Any]]) -> None:
    networks[0]["subnets"][0]["reservation"] = "10.0.4.64/27"


def _third_az(networks: list[dict[str, Any]]) -> None:
    for network, cidr in zip(networks, ("10.0.10.0/24", "10.0.11.0/24"), strict=True):
        network["subnets"].append({"cidr": cidr, "reservation": cidr.replace(".0/24", ".32/27")})


def _gtp_u_only(networks: list[dict[str, Any]]) -> None:
    networks[0]["security_group"]["ingress"] = [
        {"protocol": "udp", "ports": 2152, "cidr": "10.0.0.0/16"}
    ]


def _route_to_the_ran(networks: list[dict[str, Any]]) -> None:
    networks[0]["routes"] = [
        {"destination": "10.200.0.0/16", "transit_gateway_id": "tgw-0123456789abcdef0"}
    ]


def _dual_stack_second_network(networks: list[dict[str, Any]]) -> None:
    networks[1]["ipv6"] = {}


def _moved_subnet(networks: list[dict[str, Any]]) -> None:
    networks[0]["subnets"][1] = {"cidr": "10.0.12.0/24", "reservation": "10.0.12.32/27"}


# A change is the config before it and after it (both over the defaults); most start from the
# defaults themselves.
DEFAULTS: dict[str, Any] = {}
ORIGINAL_AZS = ["us-west-2a", "us-west-2b"]
# A third AZ; the control plane stays in the AZs the cluster was created with.
THREE_AZS: dict[str, Any] = {
    "availability_zones": [*ORIGINAL_AZS, "us-west-2c"],
    "cluster": {"control_plane_availability_zones": ORIGINAL_AZS},
    "vpc": {
        "public_subnet_cidrs": ["10.0.0.0/24", "10.0.1.0/24", "10.0.8.0/24"],
        "node_subnet_cidrs": ["10.0.2.0/24", "10.0.3.0/24", "10.0.9.0/24"],
    },
    "multus": {"networks": _networks_with(_third_az)},
}
HUGEPAGES_PROFILE: dict[str, Any] = {"hugepages_2mi": 512}
DAY2_CHANGES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # from the previous minor to the default one
    "bump-kubernetes": ({"cluster": {"kubernetes_version": "1.34"}}, DEFAULTS),
    # to the default release, the newest the project knows
    "bump-karpenter": ({"karpenter": {"version": "1.14.0"}}, DEFAULTS),
    "add-network": (
        DEFAULTS,
        {
            "multus": {"networks": _networks_with(_third_network)},
            # three networks + the primary ENI: 2-vCPU sizes (3 ENIs) no longer fit
            "node_pools": [{"name": "multus", "instance_cpus": [4, 8, 16]}],
        },
    ),
    "change-reservation": (
        DEFAULTS,
        {"multus": {"networks": _networks_with(_other_reservation)}},
    ),
    "add-az": (DEFAULTS, THREE_AZS),
    # the last AZ of the list, one the control plane does not use
    "remove-az": (THREE_AZS, DEFAULTS),
    "move-multus-subnet": (DEFAULTS, {"multus": {"networks": _networks_with(_moved_subnet)}}),
    "change-security-group-rules": (
        DEFAULTS,
        {"multus": {"networks": _networks_with(_gtp_u_only)}},
    ),
    "add-route": (DEFAULTS, {"multus": {"networks": _networks_with(_route_to_the_ran)}}),
    # a control pool on multus1 beside the default pool, which keeps its name and networks
    "add-node-pool": (
        DEFAULTS,
        {"node_pools": [{"name": "multus"}, {"name": "control", "networks": ["multus1"]}]},
    ),
    # the control pool of add-node-pool removed again
    "remove-node-pool": (
        {"node_pools": [{"name": "multus"}, {"name": "control", "networks": ["multus1"]}]},
        DEFAULTS,
    ),
    "make-network-dual-stack": (
        DEFAULTS,
        {"vpc": {"ipv6": True}, "multus": {"networks": _networks_with(_dual_stack_second_network)}},
    ),
    "change-instance-sizes": (
        DEFAULTS,
        {"node_pools": [{"name": "multus", "instance_cpus": [4, 8, 16, 32]}]},
    ),
    # a pool whose node profile stops reserving hugepages (its NodeOverlay goes)
    "change-node-profile": (
        {"node_pools": [{"name": "multus", "node_profile": HUGEPAGES_PROFILE}]},
        DEFAULTS,
    ),
    "monitoring-on": (DEFAULTS, {"monitoring": {"prometheus_operator": True}}),
}

# Not a documented day-2 change (the old subnet holds the nodes' and the control plane's ENIs):
# the case of a network-side replacement that only a weak reference carries to the cluster.
NEW_NODE_SUBNET: dict[str, Any] = {
    "vpc": {"node_subnet_cidrs": ["10.0.2.0/24", "10.0.12.0/24"]},
}
