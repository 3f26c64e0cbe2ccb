"""The Stage that holds one environment's stacks; `cdk deploy` and the pipeline both use it."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aspects, CrossStackReferences, Environment, ReferenceStrength, Stage
from constructs import Construct

from cdk_constructs.accepted_lint_findings import RecordAcceptedLintFindings
from cdk_constructs.removed_with_stack import RemovedWithStack
from config import AppConfig
from stacks.cluster_stack import ClusterStack
from stacks.network_stack import NetworkStack


class EnvironmentStage(Stage):
    """One deployment of the app: its network and cluster stacks for one account and region."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: AppConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            env=Environment(account=config.account, region=config.region),
            **kwargs,
        )
        # Weak references (Fn::GetStackOutput, no Export): a config change that replaces a
        # subnet or security group the cluster stack uses must not be refused as "export in
        # use"; the cluster stack, deployed right after, picks up the new IDs.
        CrossStackReferences.of(self).consume(ReferenceStrength.WEAK)
        self.config = config
        self.network = NetworkStack(
            self,
            "Network",
            config=config,
            stack_name=f"{config.name}-network",
            description=f"{config.name}: VPC, Multus subnets and CIDR reservations",
        )
        self.cluster = ClusterStack(
            self,
            "Cluster",
            config=config,
            network=self.network,
            stack_name=f"{config.name}-cluster",
            description=f"{config.name}: EKS cluster, system node group and Karpenter controller",
        )
        # Deploy order and, reversed, destroy order (weak references imply no dependency).
        self.cluster.add_stack_dependency(self.network)
        Aspects.of(self).add(RecordAcceptedLintFindings())
        Aspects.of(self).add(RemovedWithStack(config.logs.function_retention))
