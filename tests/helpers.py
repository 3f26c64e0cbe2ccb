"""Helpers the test modules import: upstream reference files, CloudFormation templates and
intrinsics, cdk8s tokens."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs

from cdk_constructs.eks_cluster import EksCluster, EksClusterProps
from config.eks_addons import pinned_versions
from stacks.base import ConfiguredAzStack
from testing_support.cloudformation_changes import references
from testing_support.iam_call_level import resolver
from testing_support.iam_reference import role_statements

REPO = Path(__file__).resolve().parents[1]
SHARED_REFERENCE = REPO.parent / "shared" / "reference"
#: Upstream CRDs kept in the repo because shared/reference lacks them (its README names each
#: one's source and git blob).
UPSTREAM_CRDS = REPO / "testing_support" / "upstream_crds"


def shared_reference(relative: str = "") -> Path:
    """A path under ../shared/reference (upstream CRDs, Karpenter's CloudFormation...).

    CI always has it (CI=true): there a missing file fails the test, so a moved reference
    cannot silently turn its comparisons into skips. Elsewhere the test skips and says why."""
    path = SHARED_REFERENCE / relative
    if not path.exists():
        message = f"upstream reference not found at {path}"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must provide ../shared/reference")
        pytest.skip(f"{message} (CI provides it)")
    return path


def karpenter_crd_files() -> list[Path]:
    """Every CRD of the pinned Karpenter release's karpenter-crd chart the app uses: the
    NodePool, NodeClaim and EC2NodeClass of shared/reference and the NodeOverlay kept here."""
    return [
        *sorted(shared_reference("karpenter-v1.14.1/crds").glob("*.yaml")),
        *sorted((UPSTREAM_CRDS / "karpenter-v1.14.1").glob("*.yaml")),
    ]


#: Kubernetes quantities' binary suffixes (k8s.io/apimachinery pkg/api/resource/suffix.go).
_BINARY_SUFFIXES = {"": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity_bytes(quantity: str) -> int:
    """A whole-number Kubernetes quantity with a binary suffix or none ("2Gi", "2048Mi",
    "2147483648"), in bytes; ValueError for any other form (the tests need no other)."""
    digits = quantity.rstrip("KMGTi")
    return int(digits) * _BINARY_SUFFIXES[quantity[len(digits) :]]


def unavailable_here(reason: str) -> NoReturn:
    """Skips a test whose host tool or privilege is missing, except in CI (CI=true), where
    `make test` installs what the tests need (`make dataplane-tools`): there it fails, so a
    missing package cannot silently turn the test into a skip."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI must provide it (make dataplane-tools, run as root)")
    pytest.skip(reason)


# CloudFormation templates (as dicts: Template.to_json() or a synthesized *.template.json).

# Stands in for a value CloudFormation resolves at deploy time (Ref, GetAtt, import...) inside
# text that a template assembles with Fn::Join (kubectl manifests, Helm values).
TOKEN = "TOKEN"


# What a CDK token (e.g. a role name) looks like once stringified into a cdk8s chart's props.
STRINGIFIED_TOKEN = "${Token[TOKEN.1234]}"


def resources(template: Mapping[str, Any], *types: str) -> dict[str, dict[str, Any]]:
    """Logical ID -> resource, of every resource of the given types."""
    return {key: r for key, r in template["Resources"].items() if r["Type"] in types}


def waits_for(template: Mapping[str, Any], logical_id: str) -> set[str]:
    """Every resource CloudFormation creates or updates before `logical_id`: its DependsOn and
    the resources it refers to (Ref, Fn::GetAtt, Fn::Sub), transitively."""
    found: set[str] = set()
    pending = [logical_id]
    while pending:
        resource = template["Resources"][pending.pop()]
        depends_on = resource.get("DependsOn", [])
        direct = {depends_on} if isinstance(depends_on, str) else set(depends_on)
        direct |= {
            ref[1]
            for ref in references(resource.get("Properties", {}))
            if ref[0] in ("ref", "getatt") and ref[1] in template["Resources"]
        }
        pending += sorted(direct - found)
        found |= direct
    return found


def only(template: Mapping[str, Any], resource_type: str) -> dict[str, Any]:
    """The one resource of the type (fails when there are none or several)."""
    (resource,) = resources(template, resource_type).values()
    return resource


def logical_id(template: Mapping[str, Any], resource_type: str, prefix: str) -> str:
    """The logical ID of the one resource of the type whose ID starts with `prefix`."""
    (key,) = [k for k in resources(template, resource_type) if k.startswith(prefix)]
    return key


def function_role_statements(
    templates: dict[str, dict[str, Any]], stack: str, function_prefix: str
) -> list[dict[str, Any]]:
    """The resolved IAM statements of the role of the one Lambda function in `stack` whose
    logical ID starts with `function_prefix`."""
    (function,) = [
        f
        for lid, f in resources(templates[stack], "AWS::Lambda::Function").items()
        if lid.startswith(function_prefix)
    ]
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    return role_statements(templates[stack], role_id, resolver(templates, stack, {}))


def joined_text(value: Any) -> str:
    """Text a template assembles with Fn::Join, every other intrinsic replaced by TOKEN."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(joined_text(part) for part in parts)
    return TOKEN


def sub_notation(value: Any) -> str:
    """A template value in Fn::Sub notation (${AWS::Partition}, ${Id.Arn}), as CloudFormation
    files written by hand (Karpenter's) spell it."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return "${" + str(value["Ref"]) + "}"
    if "Fn::GetAtt" in value:
        return "${" + ".".join(value["Fn::GetAtt"]) + "}"
    separator: str
    separator, parts = value["Fn::Join"]
    return separator.join(sub_notation(part) for part in parts)


# Constructs on a bare Stack (tests/unit/cdk_constructs).

BARE_AZS = ["us-west-2a", "us-west-2b"]


def bare_stack() -> ConfiguredAzStack:
    """A Stack in a fixed account and us-west-2 that serves BARE_AZS without a lookup."""
    return ConfiguredAzStack(
        cdk.App(),
        "Bare",
        availability_zones=BARE_AZS,
        env=cdk.Environment(account="111111111111", region="us-west-2"),
    )


def bare_eks_cluster(
    stack: cdk.Stack,
    *,
    subnet_ids: list[str] | None = None,
    public_access_cidrs: list[str] | None = None,
    admin_principal_arns: list[str] | None = None,
    core_dns_tolerations: list[dict[str, str]] | None = None,
    control_plane_log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
) -> EksCluster:
    """An EksCluster ("eks-bare", Kubernetes 1.34) in imported node subnets, one per AZ."""
    ids = subnet_ids or [f"subnet-0{i}aaaaaaaaaaaaaaa" for i in range(len(BARE_AZS))]
    subnets = [
        ec2.Subnet.from_subnet_attributes(
            stack, f"Subnet{az}", subnet_id=subnet_id, availability_zone=az
        )
        for az, subnet_id in zip(BARE_AZS, ids, strict=True)
    ]
    return EksCluster(
        stack,
        "Eks",
        EksClusterProps(
            cluster_name="eks-bare",
            kubernetes_version="1.34",
            vpc_id="vpc-0123456789abcdef0",
            availability_zones=BARE_AZS,
            node_subnets=subnets,
            control_plane_subnets=subnets,
            public_access_cidrs=public_access_cidrs,
            admin_principal_arns=admin_principal_arns or [],
            core_dns_tolerations=core_dns_tolerations or [],
            addon_versions=pinned_versions("1.34", {}),
            control_plane_log_retention=control_plane_log_retention,
            keep_control_plane_logs=True,
        ),
    )


def tolerates(tolerations: list[dict[str, Any]], key: str, value: str, effect: str) -> bool:
    """Kubernetes' toleration matching for one taint (k8s.io/api core/v1 toleration.go,
    ToleratesTaint: the effect empty or equal; operator Exists with the key empty or equal, or
    Equal with key and value equal)."""
    for toleration in tolerations:
        if toleration.get("effect") not in (None, "", effect):
            continue
        if toleration.get("operator", "Equal") == "Exists":
            if toleration.get("key") in (None, "", key):
                return True
        elif toleration.get("key") == key and toleration.get("value", "") == value:
            return True
    return False


KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"  # Karpenter labels each node with its pool
# The kubelet labels every node with its OS (Kubernetes docs, "Well-Known Labels, Annotations
# and Taints": kubernetes.io/os).
KUBELET_LABELS = {"kubernetes.io/os": "linux"}


def pool_nodes(node_pool: dict[str, Any]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The labels and the initial taints of a node Karpenter starts for the pool."""
    template = node_pool["spec"]["template"]
    labels = {
        **KUBELET_LABELS,
        **template.get("metadata", {}).get("labels", {}),
        KARPENTER_NODEPOOL_LABEL: node_pool["metadata"]["name"],
    }
    spec = template["spec"]
    return labels, [*spec.get("taints", []), *spec.get("startupTaints", [])]


def seed_network(number: int, **settings: Any) -> dict[str, Any]:
    """The seed's multus<number> (number 1: multus1), one /24 per AZ of 10.0.0.0/16 (those the
    emulator's VPC has for 1 and 2), with `settings`."""
    third = 2 * number + 2
    return {
        "name": f"multus{number}",
        "subnets": [
            {"cidr": f"10.0.{third}.0/24", "reservation": f"10.0.{third}.32/27"},
            {"cidr": f"10.0.{third + 1}.0/24", "reservation": f"10.0.{third + 1}.32/27"},
        ],
        **settings,
    }
