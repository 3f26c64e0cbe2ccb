"""Deploy-time check that a VPC the app does not create can resolve the cluster's private API
endpoint.

EKS answers for the private endpoint through a Route 53 private hosted zone it associates with
the cluster's VPC, which resolves only when the VPC has enableDnsHostnames and enableDnsSupport
on and its DHCP options use AmazonProvidedDNS (EKS user guide, "Cluster API server endpoint",
https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html). The endpoint here is
always private (cluster.public_access_cidrs only adds a public one), so nodes and the kubectl
handler need it. A VPC the app creates has both attributes on (ec2.Vpc's defaults); a given one
(vpc.existing) is the network team's: this custom resource reads it in the network stack, which
deploys before the cluster stack, and fails naming the config key and the fix.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_constructs import custom_resource_kit as kit

HANDLER_DIR = Path(__file__).parent / "vpc_dns_check_handler"
RESOURCE_TYPE = "Custom::VpcDnsCheck"
# Service Authorization Reference, Amazon EC2: DescribeVpcAttribute takes the vpc resource
# type; DescribeVpcs and DescribeDhcpOptions take none.
DESCRIBE_ANY_ACTIONS = ["ec2:DescribeVpcs", "ec2:DescribeDhcpOptions"]


class VpcDnsCheck(Construct):
    """A custom resource whose create/update fails when `vpc_id` cannot resolve the endpoint."""

    def __init__(
        self, scope: Construct, construct_id: str, *, vpc_id: str, config_field: str
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        read_attributes = iam.PolicyStatement(
            actions=["ec2:DescribeVpcAttribute"],
            resources=[stack.format_arn(service="ec2", resource="vpc", resource_name=vpc_id)],
        )
        describe = iam.PolicyStatement(
            actions=DESCRIBE_ANY_ACTIONS,
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": stack.region}},
        )
        self.resource = kit.checked_at_deploy(
            self,
            code=HANDLER_DIR,
            description="Fails the deploy when the given VPC cannot resolve the EKS private "
            "endpoint",
            statements=[read_attributes, describe],
            resource_type=RESOURCE_TYPE,
            properties={"VpcId": vpc_id, "ConfigField": config_field},
        )
        Validations.of(self).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="ec2:DescribeVpcs and ec2:DescribeDhcpOptions have no resource-level "
                "permissions; limited to this region (DescribeVpcAttribute names the VPC).",
            )
        )
