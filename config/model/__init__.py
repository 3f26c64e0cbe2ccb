"""The typed configuration: the single source of truth for every stack, construct and chart.

Defaults reproduce the seed deployment (two AZs in us-west-2, VPC 10.0.0.0/16, two Multus
networks with a /27 CIDR reservation per subnet). Every cross-field rule is checked here, before
any CDK construct exists, so that a bad value fails with the field's path instead of a jsii trace.

The package splits the model by concept (base, vpc, cluster, networks, connection_tracking,
security_groups, routes, route_rules, node_pools, disruption, karpenter, monitoring,
app_config); every public model and constant is importable from config.model.
"""

from config.model.app_config import (
    AppConfig,
    ExtrasConfig,
)
from config.model.base import (
    ACCOUNT_PATTERN,
    AWS_RESERVED_HEAD,
    AWS_RESERVED_TAIL,
    EXISTING_NAMESPACES,
    GP3_MAX_GIB,
    MAX_PREFIX_LENGTH,
    MIN_PREFIX_LENGTH,
    NODE_TERMINATION_MARGIN_MINUTES,
    TEARDOWN_TIMEOUT_LIMIT_MINUTES,
    UNUSABLE_VPC_RANGES,
    Cidr,
    Gp3SizeGib,
    InstanceType,
    KubernetesVersion,
    RuleCidr,
    StrictModel,
    SubnetCidr,
    duration_seconds,
    net,
)
from config.model.cluster import (
    ClusterConfig,
    SystemNodeGroupConfig,
)
from config.model.connection_tracking import ConnectionTrackingConfig
from config.model.disruption import DisruptionBudgetConfig, DisruptionConfig
from config.model.karpenter import (
    MAX_ENIS_BY_VCPUS,
    KarpenterConfig,
)
from config.model.monitoring import MonitoringConfig
from config.model.network_subnets import MultusSubnetConfig, NetworkIpv6Config
from config.model.networks import MultusConfig, MultusNetworkConfig
from config.model.node_pools import (
    NodePoolConfig,
    NodePoolTaintConfig,
    default_node_pools,
    node_pool_migration,
)
from config.model.routes import MultusRouteConfig
from config.model.security_groups import (
    ANYWHERE,
    ANYWHERE_IPV6,
    ROUTE_TARGET_IDS,
    NetworkSecurityGroupConfig,
    SecurityGroupRuleConfig,
)
from config.model.vpc import (
    ExistingSubnetConfig,
    ExistingVpcConfig,
    VpcCidr,
    VpcConfig,
)

__all__ = [
    "ACCOUNT_PATTERN",
    "ANYWHERE",
    "ANYWHERE_IPV6",
    "AWS_RESERVED_HEAD",
    "AWS_RESERVED_TAIL",
    "EXISTING_NAMESPACES",
    "GP3_MAX_GIB",
    "MAX_ENIS_BY_VCPUS",
    "MAX_PREFIX_LENGTH",
    "MIN_PREFIX_LENGTH",
    "NODE_TERMINATION_MARGIN_MINUTES",
    "ROUTE_TARGET_IDS",
    "TEARDOWN_TIMEOUT_LIMIT_MINUTES",
    "UNUSABLE_VPC_RANGES",
    "AppConfig",
    "Cidr",
    "ClusterConfig",
    "ConnectionTrackingConfig",
    "DisruptionBudgetConfig",
    "DisruptionConfig",
    "ExistingSubnetConfig",
    "ExistingVpcConfig",
    "ExtrasConfig",
    "Gp3SizeGib",
    "InstanceType",
    "KarpenterConfig",
    "KubernetesVersion",
    "MonitoringConfig",
    "MultusConfig",
    "MultusNetworkConfig",
    "MultusRouteConfig",
    "MultusSubnetConfig",
    "NetworkIpv6Config",
    "NetworkSecurityGroupConfig",
    "NodePoolConfig",
    "NodePoolTaintConfig",
    "RuleCidr",
    "SecurityGroupRuleConfig",
    "StrictModel",
    "SubnetCidr",
    "SystemNodeGroupConfig",
    "VpcCidr",
    "VpcConfig",
    "default_node_pools",
    "duration_seconds",
    "net",
    "node_pool_migration",
]
