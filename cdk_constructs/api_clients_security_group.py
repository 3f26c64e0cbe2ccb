"""The security group of the Lambda functions that call the cluster's API from the node subnets:
aws-cdk-lib's kubectl handler and its provider framework function, and the teardown's isComplete.

Left to aws_eks_v2, a KubectlProvider with private subnets runs in the EKS-managed cluster
security group (kubectl-provider.ts: `props.cluster.clusterSecurityGroup` unless security groups
are given), and so did our teardown. EKS creates that group and deletes it, asynchronously, when
the cluster goes; ENIs that still use it then (Lambda's outlive their functions) leave it behind,
and the VPC cannot be deleted (aws/aws-cdk#18650, aws/aws-k8s-tester#416). This group belongs to
CloudFormation, which deletes it only after the functions that use it.

Rules, HTTPS only:
- egress to the EKS cluster security group, with the matching ingress on that group: EKS puts it
  on the API server's private-endpoint ENIs;
- egress to anywhere: the AWS APIs the functions call (EKS for the kubeconfig, Lambda from the
  kubectl provider framework, ECR and ECR Public for Helm charts, EC2 from the teardown) and
  CloudFormation's response URL are public endpoints, reached through the node subnets' NAT
  gateways (the VPC has no interface endpoints);
- DNS needs no rule: security groups do not filter queries to the Route 53 Resolver at VPC+2
  (Amazon VPC user guide, "Security group rules", limitation).
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

HTTPS = 443


class ApiClientsSecurityGroup(Construct):
    """The group and its rules (the API server ones once `reach_api_server` has run)."""

    def __init__(self, scope: Construct, construct_id: str, *, vpc: ec2.IVpc) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "Group",
            vpc=vpc,
            description="Lambda functions that call the EKS API server from the node subnets",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(),
            ec2.Port.tcp(HTTPS),
            "AWS APIs and CloudFormation's response URL, through the NAT gateways",
        )

    def reach_api_server(self, cluster_security_group_id: str) -> None:
        """HTTPS to the API server's ENIs, which carry the EKS cluster security group (known
        only once the cluster exists, hence a second step)."""
        ec2.CfnSecurityGroupEgress(
            self,
            "ToApiServer",
            group_id=self.security_group.security_group_id,
            ip_protocol="tcp",
            from_port=HTTPS,
            to_port=HTTPS,
            destination_security_group_id=cluster_security_group_id,
            description="Kubernetes API server (EKS cluster security group)",
        )
        ec2.CfnSecurityGroupIngress(
            self,
            "ApiServerFromClients",
            group_id=cluster_security_group_id,
            ip_protocol="tcp",
            from_port=HTTPS,
            to_port=HTTPS,
            source_security_group_id=self.security_group.security_group_id,
            description="Kubernetes API from the kubectl and teardown Lambda functions",
        )

    def precede(self, function: lambda_.Function) -> None:
        """`function` is created after the rules and deleted before them: a kubectl call or a
        teardown poll never runs while its path to the API server is missing."""
        resource = function.node.default_child
        assert resource is not None
        resource.node.add_dependency(self)
