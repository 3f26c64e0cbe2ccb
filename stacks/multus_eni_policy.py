"""The node role's policy for the Multus ENIs, with the reasons for its wildcard resources."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_iam as iam

from node_bootstrap.iam import multus_eni_policy_statements
from node_bootstrap.pod_ip_iam import multus_pod_ip_policy_statements
from node_bootstrap.renderer import INSTANCE_TAG_KEY, OWNER_TAG_KEY


def grant_multus_eni_management(
    stack: Stack,
    role: iam.IRole,
    *,
    cluster_name: str,
    multus_subnet_ids: Sequence[str],
    security_group_ids: Sequence[str],
    dual_stack_subnet_ids: Sequence[str] = (),
    pod_route_table_ids: Sequence[str] = (),
) -> iam.Policy:
    """The node bootstrap creates and attaches the Multus ENIs with the node's role; the
    multus-pod-ips agent (host network) assigns pod addresses to them with the same role
    (IPv6 ones only in the dual-stack subnets among them) and routes the pod-routed ranges to
    them in pod_route_table_ids (the route tables of the networks with such ranges)."""

    def ec2_arn(resource: str, resource_id: str) -> str:
        return stack.format_arn(service="ec2", resource=resource, resource_name=resource_id)

    subnet_arns = [ec2_arn("subnet", subnet_id) for subnet_id in multus_subnet_ids]
    policy = iam.Policy(
        stack,
        "MultusEniPolicy",
        roles=[role],
        statements=[
            *multus_eni_policy_statements(
                cluster_name=cluster_name,
                subnet_arns=subnet_arns,
                security_group_arns=[
                    ec2_arn("security-group", group_id) for group_id in security_group_ids
                ],
            ),
            *multus_pod_ip_policy_statements(
                cluster_name=cluster_name,
                multus_subnet_arns=subnet_arns,
                dual_stack_subnet_arns=[
                    ec2_arn("subnet", subnet_id) for subnet_id in dual_stack_subnet_ids
                ],
                pod_route_table_arns=[
                    ec2_arn("route-table", route_table_id) for route_table_id in pod_route_table_ids
                ],
            ),
        ],
    )
    arn_prefix = "arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>"
    Validations.of(policy).acknowledge(
        Acknowledgment(
            id=f"AwsSolutions::AwsSolutions-IAM5[Resource::{arn_prefix}:network-interface/*]",
            reason="ENI IDs exist only after creation: CreateNetworkInterface and its "
            f"CreateTags need the request to tag the ENI {OWNER_TAG_KEY}=<cluster> and "
            f"{INSTANCE_TAG_KEY}=<the calling instance>; attach, detach, modify and delete "
            "need both tags on the ENI, the second naming the calling instance "
            "(ec2:SourceInstanceARN), and only the bootstrap sets them; the pod IP agent's "
            "assign and unassign need the same and the ENI in a Multus subnet (ec2:Subnet).",
        ),
        Acknowledgment(
            id=f"AwsSolutions::AwsSolutions-IAM5[Resource::{arn_prefix}:instance/*]",
            reason="Attach, detach and modify on instance/*, and CreateTags of the "
            "bootstrap-failure tag (no other key), match only the calling instance: "
            "ec2:SourceInstanceARN must equal the target instance's ARN.",
        ),
        Acknowledgment(
            id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
            reason="ec2:DescribeNetworkInterfaces (a re-run after an interrupted bootstrap "
            "reads an attachment ID; the pod IP agent's reconcile) and "
            "ec2:DescribeInstanceTypes (addresses per ENI) have no resource-level "
            "permissions; in this region only (aws:RequestedRegion).",
        ),
    )
    return policy
