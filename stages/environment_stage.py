"""The Stage that holds one environment's stacks; `cdk deploy` and the pipeline both use it."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aspects, Environment, Stage
from constructs import Construct

from cdk_constructs.template_hygiene import RecordAcceptedLintFindings
from config import AppConfig
from stacks.cluster_stack import ClusterStack
from stacks.network_stack import NetworkStack


class EnvironmentStage(Stage):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: AppConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            env=Environment(account=config.account, region=config.region),
            **kwargs,
        )
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
        Aspects.of(self).add(RecordAcceptedLintFindings())
