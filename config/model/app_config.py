"""The whole config (AppConfig) and the rules that span its sections."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from datetime import date
from typing import Annotated

from pydantic import (
    AfterValidator,
    Field,
    ValidationInfo,
    model_validator,
)

from config import aws_regions, karpenter_releases, patterns
from config.cluster_access import access_warnings, endpoint_warnings
from config.custom_resource_timing import (
    SERVICE_TIMEOUT_LIMIT_SECONDS,
    TEARDOWN_MARGIN_MINUTES,
)
from config.images import ImagesConfig
from config.kubernetes_support import version_support_synth_warnings
from config.logs import LogsConfig
from config.model.base import (
    ACCOUNT_PATTERN,
    NODE_TERMINATION_MARGIN_MINUTES,
    TEARDOWN_TIMEOUT_LIMIT_MINUTES,
    StrictModel,
    duration_seconds,
    net,
)
from config.model.cluster import ClusterConfig
from config.model.karpenter import KarpenterConfig
from config.model.monitoring import MonitoringConfig
from config.model.networks import (
    MultusConfig,
    MultusNetworkConfig,
)
from config.model.node_pools import (
    NodePoolConfig,
    default_node_pools,
    node_pool_migration,
)
from config.model.route_rules import (
    check_pod_routed_ranges,
    check_route_targets,
    check_routes_of_each_pool,
    route_precondition_warnings,
    route_preconditions,
)
from config.model.security_groups import SecurityGroupRuleConfig
from config.model.vpc import VpcConfig
from config.network_cards import card_zero_enis, network_card_problems
from config.network_plan import (
    NetworkPlan,
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
from config.node_prefix import check_node_prefix_reservations
from config.pod_enis import PoolInterfaces, own_eni_problem, reserved_enis, zero_pod_problems
from config.synth_warnings import SYNTH_WARNINGS, SynthWarning, known_warning_id, warnings_of


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
    monitoring: MonitoringConfig = MonitoringConfig()
    images: ImagesConfig = ImagesConfig()
    logs: LogsConfig = LogsConfig()
    acknowledged_warnings: list[Annotated[str, AfterValidator(known_warning_id)]] = Field(
        default=[],
        description="IDs of synth's warnings that were read and decided on, which synth and "
        "`cdk deploy` then no longer print (each printed warning ends with its ID; a pipeline "
        "environment's overrides may add its own). Known IDs: "
        + "; ".join(f"{key} ({about})" for key, about in SYNTH_WARNINGS.items())
        + ".",
    )

    @model_validator(mode="before")
    @classmethod
    def _node_pool_became_node_pools(cls, data: object) -> object:
        if isinstance(data, dict) and "node_pool" in data:
            raise ValueError(node_pool_migration(data["node_pool"]))
        return data

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> AppConfig:
        # Every rule's error in one run, one line each (config/messages.py files each line
        # under its field). The first group's rules stand on the sections alone; the second's
        # read what the first guarantees (a known region, one subnet per AZ, pools that name
        # known networks), so they run only once the first group holds.
        problems = _problems(
            self._check_region,
            self._check_subnet_counts,
            self._check_pools_name_known_networks,
            self._check_nat_egress_has_gateway,
            self._check_karpenter_supports_kubernetes,
            self._check_karpenter_has_node_overlay,
            self._check_controllers_fit_system_nodes,
            self._check_teardown_fits_cloudformation,
            self._check_drain_fits_teardown,
        )
        if not problems:
            problems = _problems(
                self._check_control_plane_zones,
                self._check_subnets_fit_vpc,
                self._check_dual_stack,
                self._check_enis_fit_instances,
                lambda: self._check_user_data_fits((info.context or {}).get(USER_DATA_SIZE)),
                self._check_routes,
                lambda: check_node_prefix_reservations(
                    [(self.pool_path(pool), pool, self.pool_plan(pool)) for pool in self.node_pools]
                ),
            )
        if problems:
            raise ValueError("\n".join(problems))
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

    def synth_warnings(self, today: date) -> list[SynthWarning]:
        """Every warning synth has about this config on `today` (UTC: EKS's support dates),
        acknowledged or not (config/synth_warnings.py)."""
        return [
            *version_support_synth_warnings(self.cluster.kubernetes_version, today),
            *warnings_of("no-cluster-admins", access_warnings(self.cluster.admin_principal_arns)),
            *warnings_of(
                "endpoint-open-to-the-world", endpoint_warnings(self.cluster.public_access_cidrs)
            ),
            *warnings_of("network-without-node-pool", self.warnings),
            *route_precondition_warnings(self.multus.networks),
            *warnings_of("images-pinned-by-tag", self.images.tag_only_host_images()),
        ]

    def unacknowledged_warnings(self, today: date) -> list[SynthWarning]:
        """synth_warnings less those whose ID acknowledged_warnings lists."""
        return [w for w in self.synth_warnings(today) if not self.acknowledges(w.id)]

    def acknowledges(self, warning_id: str) -> bool:
        return warning_id in self.acknowledged_warnings

    @property
    def route_preconditions(self) -> list[str]:
        """What must exist outside the app before the network stack can create a route
        (config/model/route_rules.py)."""
        return route_preconditions(self.multus.networks)

    def _check_routes(self) -> None:
        check_route_targets(self.multus.networks, self.vpc_cidrs, self.has_nat_gateway)
        check_pod_routed_ranges(self.multus.networks, self.vpc_cidrs)
        check_routes_of_each_pool(
            self.multus.networks,
            [
                (
                    self.pool_path(pool),
                    [row.network for row in networks_in_order(self.pool_plan(pool))],
                )
                for pool in self.node_pools
            ],
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
                node_profile=pool.planned_node_profile(),
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
            networks = networks_in_order(self.pool_plan(pool))
            sizes = [(family, cpus) for family, cpus, _ in pool.allowed_sizes()]
            problems = network_card_problems(self.pool_path(pool), networks, sizes)
            if problems:
                raise ValueError("\n".join(problems))
        pools = self._pool_interfaces()
        # reservedENIs only once every pool's own ENIs fit (the pool with the most sets it).
        own = [problem for pool in pools if (problem := own_eni_problem(pool))]
        problems = own or zero_pod_problems(pools)
        if problems:
            raise ValueError("\n".join(problems))

    def _pool_interfaces(self) -> list[PoolInterfaces]:
        return [
            PoolInterfaces(
                self.pool_path(pool),
                card_zero_enis(networks_in_order(self.pool_plan(pool))),
                pool.allowed_sizes(),
            )
            for pool in self.node_pools
        ]

    @property
    def reserved_enis(self) -> int:
        """Karpenter's settings.reservedENIs, global to every NodePool: the most Multus ENIs
        any pool's nodes attach to network card 0, whose interfaces Karpenter's max pods count
        (docs/node-capacity.md says what this costs the others; config/pod_enis.py)."""
        return reserved_enis(self._pool_interfaces())

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

    @property
    def node_overlay_needed(self) -> bool:
        """Whether a pool's nodes have resources only a NodeOverlay tells Karpenter of (its
        profile's hugepages), so the controller needs the nodeOverlay feature gate."""
        return any(pool.extended_resources for pool in self.node_pools)

    def _check_karpenter_has_node_overlay(self) -> None:
        for pool in self.node_pools:
            if pool.extended_resources and not karpenter_releases.has_node_overlay(
                self.karpenter.version
            ):
                raise ValueError(
                    f"{self.pool_path(pool)}.node_profile.hugepages_2mi: Karpenter launches "
                    "nodes for pods that request hugepages only when a NodeOverlay tells it the "
                    f"nodes have them, and karpenter.version {self.karpenter.version} has none; "
                    f"use Karpenter >= {karpenter_releases.NODE_OVERLAY_SINCE}.0 or drop "
                    "hugepages_2mi"
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


def _problems(*checks: Callable[[], None]) -> list[str]:
    """The message of each check that raises ValueError, in order."""
    problems = []
    for check in checks:
        try:
            check()
        except ValueError as error:
            problems.append(str(error))
    return problems
