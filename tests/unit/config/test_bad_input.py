"""Bad input never deploys: every known kind of wrong configuration stops the real entry point
(app.main) with exit status 1, no traceback, and a message naming the field and the fix.

The cases run in-process through app.main with an App carrying the case's CDK context (what
`cdk synth -c ...` hands over); a few run `python app.py` in a real process to show the exit
status and the absence of a traceback end to end.

Classes (the issue's findings, then what was already rejected before it):
- accepted: synthesized with exit 0 although wrong (would fail on AWS or build something else)
- traceback: crashed with a Python traceback
- unclear: rejected, but with a message only a regex reader understands, or a misleading one
- covered: already rejected clearly; kept here so they stay that way
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

import app as app_module
from config import load_config
from tests.conftest import REPO, cdk_json_context

PIPELINE_SAMPLE: dict[str, Any] = json.loads(
    (REPO / "examples" / "pipeline-three-environments.json").read_text()
)


@dataclass(frozen=True)
class BadInput:
    """context: CDK context entries of the case (a `config` object, `-c config.x` texts,
    `config_file`); files: config files to write first (name -> bytes), named by
    `config_file`; expected: fragments of the message, the field's path first."""

    id: str
    kind: str
    context: dict[str, Any]
    expected: tuple[str, ...]
    files: dict[str, bytes] = field(default_factory=dict)


def networks(**first: Any) -> list[dict[str, Any]]:
    """The seed's two Multus networks, the first with `first` changed."""
    seed = [
        {
            "name": f"multus{n}",
            "subnets": [
                {"cidr": f"10.0.{2 * n + 2}.0/24", "reservation": f"10.0.{2 * n + 2}.32/27"},
                {"cidr": f"10.0.{2 * n + 3}.0/24", "reservation": f"10.0.{2 * n + 3}.32/27"},
            ],
        }
        for n in (1, 2)
    ]
    seed[0].update(first)
    return seed


def static_range_networks(static_range: str, **first: Any) -> list[dict[str, Any]]:
    """The seed's networks, the first one's first subnet with `static_range`."""
    seed = networks(**first)
    seed[0]["subnets"][0]["static_range"] = static_range
    return seed


def floating_networks(addresses: list[str], static_range: str | None) -> list[dict[str, Any]]:
    """The seed's networks, the first one's first subnet with these floating addresses (and
    `static_range`, unless None)."""
    seed = static_range_networks(static_range) if static_range else networks()
    seed[0]["subnets"][0]["floating_addresses"] = addresses
    return seed


def config(document: dict[str, Any]) -> dict[str, Any]:
    return {"config": document}


def pool(**settings: Any) -> dict[str, Any]:
    """The default pool ("multus", every network) with `settings` changed."""
    return config({"node_pools": [{"name": "multus", **settings}]})


def pipeline(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    document = copy.deepcopy(PIPELINE_SAMPLE)
    change(document["pipeline"])
    return config(document)


def pattern_case(
    case_id: str, path: str, value: str, example: str, kind: str = "unclear"
) -> BadInput:
    """A pattern-validated field given a wrong value through `-c`: plain words + example."""
    return BadInput(case_id, kind, {f"config.{path}": value}, (path, f"for example {example}"))


def disruption_case(
    case_id: str, disruption: dict[str, Any], example: str, where: str = ""
) -> BadInput:
    """A pattern-validated key of the default pool's disruption (`where`: below it)."""
    key = where or f".{next(iter(disruption))}"
    return BadInput(
        case_id,
        "unclear",
        pool(disruption=disruption),
        (f"node_pools[0].disruption{key}", f"for example {example}"),
    )


def pool_pattern_case(case_id: str, key: str, value: str, example: str) -> BadInput:
    """pattern_case for a key of the default pool."""
    return BadInput(
        case_id, "unclear", pool(**{key: value}), (f"node_pools[0].{key}", f"for example {example}")
    )


BUDGET = "node_pools[0].disruption.budgets[0]"


def budget(schedule: str, duration: str) -> dict[str, Any]:
    """The default pool with one budget: no disruption from each `schedule` hit for `duration`."""
    return pool(
        disruption={"budgets": [{"nodes": "0", "schedule": schedule, "duration": duration}]}
    )


ACCEPTED = [
    BadInput(
        "empty-public-access-cidrs",
        "accepted",
        {"config.cluster.public_access_cidrs": "[]"},
        ("cluster.public_access_cidrs", "leave public_access_cidrs unset (null)"),
    ),
    BadInput(
        "admin-given-as-an-sts-session",
        "accepted",
        {
            "config.cluster.admin_principal_arns": (
                '["arn:aws:sts::111122223333:assumed-role/platform-admins/alice"]'
            )
        },
        ("cluster.admin_principal_arns", "arn:aws:iam::111122223333:role/platform-admins"),
    ),
    BadInput(
        "admin-under-the-replaced-key",
        "accepted",
        {"config.cluster.admin_principal_arn": "arn:aws:iam::111122223333:role/platform-admins"},
        ("cluster", "admin_principal_arns"),
    ),
    BadInput(
        "az-letter-the-region-lacks",
        "accepted",
        {"config.availability_zones": '["us-west-2a", "us-west-2z"]'},
        ("availability_zones", "'us-west-2z'", "us-west-2a, us-west-2b, us-west-2c, us-west-2d"),
    ),
    BadInput(
        "network-named-lo",
        "accepted",
        config({"multus": {"networks": networks(name="lo")}}),
        ("multus.networks[0].name", "loopback", "for example multus1"),
    ),
    BadInput(
        "interface-name-of-the-primary-nic",
        "accepted",
        config({"multus": {"networks": networks(interface_name="ens5")}}),
        ("multus.networks[0].interface_name", "ens5 is the primary", "for example multus1"),
    ),
    BadInput(
        "interface-name-of-vpc-cni-veths",
        "accepted",
        config({"multus": {"networks": networks(name="eni1a2b")}}),
        ("multus.networks[0].name", "VPC CNI", "for example multus1"),
    ),
    # EKS keeps the control plane in the AZs it was created with, in at least two (EKS user
    # guide, "View Amazon EKS networking requirements for VPC and subnets"): a deploy that
    # drops one of them, or names one, fails at the EKS API.
    BadInput(
        "control-plane-az-dropped-from-availability-zones",
        "accepted",
        {
            "config.availability_zones": '["us-west-2a", "us-west-2c"]',
            "config.cluster.control_plane_availability_zones": '["us-west-2a", "us-west-2b"]',
        },
        (
            "cluster.control_plane_availability_zones",
            "['us-west-2b'] not in availability_zones",
            "keep those AZs in availability_zones",
        ),
    ),
    BadInput(
        "control-plane-in-one-az",
        "accepted",
        {"config.cluster.control_plane_availability_zones": '["us-west-2a"]'},
        (
            "cluster.control_plane_availability_zones",
            "at least two AZs",
            "for example ['us-west-2a', 'us-west-2b']",
        ),
    ),
    BadInput(
        "host-routed-ipvlan-mode",
        "accepted",
        config({"multus": {"networks": networks(ipvlan_mode="l3")}}),
        ("multus.networks[0].ipvlan_mode", "l3 is not supported", 'use "l2"'),
    ),
    BadInput(
        "karpenter-release-that-does-not-exist",
        "accepted",
        {"config.karpenter.version": "1.99.0"},
        ("karpenter.version", "not a Karpenter release", "for example 1.14.1"),
    ),
    BadInput(
        "nad-namespace-with-the-reserved-kube-prefix",
        "accepted",
        {"config.multus.nad_namespace": "kube-multus"},
        ("multus.nad_namespace", "reserved", "for example multus-networks"),
    ),
    BadInput(
        "nad-namespace-longer-than-a-kubernetes-name",
        "accepted",
        {"config.multus.nad_namespace": "n" * 64},
        ("multus.nad_namespace", "at most 63 characters"),
    ),
    BadInput(
        "arm64-family-in-the-amd64-node-pool",
        "accepted",
        pool(instance_families=["m6g", "m5"]),
        ("node_pools[0].instance_families", "m6g is arm64", "for example m6i"),
    ),
    BadInput(
        "family-outside-the-categories",
        "accepted",
        pool(instance_categories=["r"], instance_families=["c5", "r5"]),
        ("node_pools[0].instance_families", "c5 is in category 'c'", "add 'c' there or drop c5"),
    ),
    BadInput(
        "vcpu-count-no-listed-family-has",
        "accepted",
        pool(instance_families=["m5", "m6i"], instance_cpus=[2, 36]),
        ("node_pools[0].instance_cpus", "no size of ['m5', 'm6i'] has [36] vCPUs", "drop [36]"),
    ),
    BadInput(
        "family-without-the-listed-sizes",
        "accepted",
        pool(instance_families=["m5", "c5"], instance_cpus=[36]),
        ("node_pools[0].instance_families", "m5 has no size with [36] vCPUs", "drop m5"),
    ),
    BadInput(
        "node-pool-family-that-does-not-exist",
        "accepted",
        pool(instance_families=["m5x"]),
        ("node_pools[0].instance_families", "not an EC2 instance family", "did you mean 'm5'"),
    ),
    BadInput(
        "gp3-root-volume-over-its-maximum",
        "accepted",
        pool(root_volume_gib=20000),
        ("node_pools[0].root_volume_gib", "at most 16384 GiB"),
    ),
    BadInput(
        "gp3-system-disk-over-its-maximum",
        "accepted",
        {"config.cluster.system_node_group.root_volume_gib": "16385"},
        ("cluster.system_node_group.root_volume_gib", "at most 16384 GiB"),
    ),
    BadInput(
        "public-subnet-smaller-than-28",
        "accepted",
        {"config.vpc.public_subnet_cidrs": '["10.0.0.0/29", "10.0.1.0/24"]'},
        ("vpc.public_subnet_cidrs[0]", "/16 to /28", "for example 10.0.4.0/24"),
    ),
    BadInput(
        "multus-subnet-larger-than-16",
        "accepted",
        config(
            {
                "vpc": {"cidr": "10.0.0.0/16"},
                "multus": {
                    "networks": networks(
                        subnets=[
                            {"cidr": "10.0.0.0/15", "reservation": "10.0.4.32/27"},
                            {"cidr": "10.0.3.0/24", "reservation": "10.0.3.32/27"},
                        ]
                    )
                },
            }
        ),
        ("multus.networks[0].subnets[0].cidr", "/16 to /28"),
    ),
    BadInput(
        "vpc-in-the-link-local-range",
        "accepted",
        {"config.vpc.cidr": "169.254.0.0/16"},
        ("vpc.cidr", "link-local", "for example 10.0.0.0/16"),
    ),
    BadInput(
        "system-node-type-arm64-without-a-g",
        "accepted",
        {"config.cluster.system_node_group.instance_types": '["mac2.metal"]'},
        ("cluster.system_node_group", "mac2.metal", "x86_64", "for example c5.large"),
    ),
    BadInput(
        "system-node-type-mac-x86",
        "accepted",
        {"config.cluster.system_node_group.instance_types": '["mac1.metal"]'},
        ("cluster.system_node_group", "Mac instances", "for example c5.large"),
    ),
    BadInput(
        "pipeline-tooling-region-that-is-no-region",
        "accepted",
        pipeline(lambda p: p.update(tooling_region="us-west-9")),
        ("pipeline.tooling_region", "not an AWS Region", "did you mean us-west-2?"),
    ),
    BadInput(
        "yaml-key-given-twice",
        "accepted",
        {"config_file": "twice.yaml"},
        ("config_file", "key 'vpc' appears twice (lines 1 and 4)", "keep one and merge"),
        files={
            "twice.yaml": b"vpc:\n  cidr: 10.1.0.0/16\nname: twice\nvpc:\n  nat_gateways: single\n"
        },
    ),
    BadInput(
        "json-key-given-twice",
        "accepted",
        {"config_file": "twice.json"},
        ("config_file", "key 'name' appears twice", "keep one and merge"),
        files={"twice.json": b'{"name": "a", "name": "b"}'},
    ),
    # The shared group's key gave way to a group per network: the message shows the old
    # sources in the new form.
    BadInput(
        "shared-security-group-ingress-key",
        "accepted",
        {"config.multus.security_group_ingress_cidrs": '["10.0.4.0/22", "192.168.0.0/16"]'},
        (
            "multus: security_group_ingress_cidrs",
            "a security group per network",
            '"security_group": {"ingress": [{"protocol": "all", "cidr": "10.0.4.0/22"}, '
            '{"protocol": "all", "cidr": "192.168.0.0/16"}]}',
        ),
    ),
    # CloudFormation waits at most ServiceTimeout, 3600 s, for a custom resource (template
    # reference, AWS::CloudFormation::CustomResource); the old limit was 110 minutes.
    BadInput(
        "teardown-bound-past-cloudformations-hour",
        "accepted",
        {"config.cluster.teardown_timeout_minutes": "60"},
        (
            "cluster.teardown_timeout_minutes",
            "ServiceTimeout at most 3600 s",
            "use at most 51",
            "node_pools[].termination_grace_period at most 41m",
        ),
    ),
    # Two rules of the whole config broken at once: both are reported in one run.
    BadInput(
        "two-whole-config-rules-at-once",
        "unclear",
        config(
            {
                "cluster": {"teardown_timeout_minutes": 60},
                "node_pools": [{"name": "multus"}, {"name": "multus"}],
            }
        ),
        (
            "cluster.teardown_timeout_minutes",
            "node_pools: two pools are named 'multus'",
        ),
    ),
    BadInput(
        "drain-that-needs-a-teardown-past-the-hour",
        "accepted",
        config(
            {
                "cluster": {"teardown_timeout_minutes": 51},
                "node_pools": [
                    {"name": "multus"},
                    {"name": "slow-drain", "termination_grace_period": "45m"},
                ],
            }
        ),
        (
            "node_pools[1] (slow-drain).termination_grace_period 45m",
            "cluster.teardown_timeout_minutes (51)",
        ),
    ),
]

TRACEBACKS = [
    BadInput(
        "config-context-value-not-an-object",
        "traceback",
        {"config": "foo"},
        ("config must be a JSON object", "-c config.region=eu-central-1"),
    ),
    BadInput(
        "conflicting-dotted-overrides",
        "traceback",
        {"config.vpc.cidr": "10.0.0.0/16", "config.vpc.cidr.mask": "16"},
        ("-c config.vpc.cidr and -c config.vpc.cidr.mask conflict", "keep one of them"),
    ),
    BadInput(
        "non-utf8-yaml-file",
        "traceback",
        {"config_file": "latin1.yaml"},
        ("config_file", "not UTF-8", "save the file as UTF-8"),
        files={"latin1.yaml": "name: caf\u00e9\n".encode("latin-1")},
    ),
]

UNCLEAR = [
    BadInput(
        "unquoted-yaml-version-that-lost-its-zero",
        "unclear",
        {"config_file": "k8s.yaml"},
        ("cluster.kubernetes_version", "1.3 arrived as a number", 'in quotes, for example "'),
        files={"k8s.yaml": b"cluster:\n  kubernetes_version: 1.30\n"},
    ),
    BadInput(
        "unquoted-yaml-account",
        "unclear",
        {"config_file": "account.yaml"},
        ("account", "arrived as a number", 'in quotes, for example "123456789012"'),
        files={"account.yaml": b"account: 123456789012\n"},
    ),
    BadInput(
        "yaml-boolean-for-a-name",
        "unclear",
        {"config_file": "on.yaml"},
        ("cluster.name", "arrived as a boolean", "put it in quotes"),
        files={"on.yaml": b"cluster:\n  name: on\n"},
    ),
    BadInput(
        "index-style-key",
        "unclear",
        {"config.multus.networks[0].name": "signaling"},
        (
            "-c config.multus.networks[0].name",
            "give the whole list as JSON",
            """-c 'config.multus.networks=[{"name": "signaling", "subnets": [""",
        ),
    ),
    BadInput(
        "index-style-key-into-a-list-of-zones",
        "unclear",
        {"config.availability_zones[1]": "us-west-2c"},
        ("""-c 'config.availability_zones=["us-west-2a", "us-west-2c"]'""",),
    ),
    BadInput(
        "comma-list-for-a-list-field",
        "unclear",
        {"config.availability_zones": "us-west-2a,us-west-2b"},
        ("-c config.availability_zones", """'config.availability_zones=["us-west-2a", "us-we"""),
    ),
    BadInput(
        "plain-text-for-a-section",
        "unclear",
        {"config.vpc": "10.0.0.0/16"},
        ("-c config.vpc", "JSON object", "-c config.vpc.<key>=<value>"),
    ),
    BadInput(
        "unknown-key-close-to-a-real-one",
        "unclear",
        {"config.vpc.nat_gatways": "single"},
        ("vpc.nat_gatways", "did you mean 'nat_gateways'?"),
    ),
    BadInput(
        "unknown-top-level-key-close-to-a-real-one",
        "unclear",
        config({"clustr": {}}),
        ("clustr", "did you mean 'cluster'?"),
    ),
    BadInput(
        "empty-segment-in-a-dotted-key",
        "unclear",
        {"config.vpc..cidr": "10.0.0.0/16"},
        ("-c config.vpc..cidr", "empty key between dots", "-c config.vpc.nat_gateways=single"),
    ),
    pattern_case("account-pattern", "account", "12345", '"123456789012"'),
    pattern_case("app-name-pattern", "name", "1stack", "karpenterwithmultus"),
    pattern_case("cluster-name-pattern", "cluster.name", "eks_cluster", "eks-karpenterwithmultus"),
    pattern_case(
        "admin-principal-pattern",
        "cluster.admin_principal_arns",
        '["admin"]',
        "arn:aws:iam::123456789012:role/eks-admins",
    ),
    pattern_case("karpenter-version-pattern", "karpenter.version", "v1.14.1", "1.14.1"),
    pattern_case("karpenter-namespace-pattern", "karpenter.namespace", "Karpenter", "multus"),
    pattern_case("controller-cpu-pattern", "karpenter.controller_cpu", "1 core", "500m"),
    pattern_case("controller-memory-pattern", "karpenter.controller_memory", "1GB", "512Mi"),
    pattern_case("nad-namespace-pattern", "multus.nad_namespace", "Telco_NADs", "multus"),
    pool_pattern_case("node-pool-cpu-limit-pattern", "cpu_limit", "lots", "500m"),
    pool_pattern_case("node-pool-memory-limit-pattern", "memory_limit", "500G", "512Mi"),
    BadInput(
        "consolidate-after-moved",
        "unclear",
        pool(consolidate_after="120s"),
        ("node_pools[0]", "consolidate_after was replaced by disruption.consolidate_after"),
    ),
    disruption_case("consolidate-after-pattern", {"consolidate_after": "2 minutes"}, "120s"),
    disruption_case("expire-after-pattern", {"expire_after": "30 days"}, "720h or Never"),
    disruption_case(
        "budget-nodes-pattern", {"budgets": [{"nodes": "one"}]}, '"1" or "10%"', ".budgets[0].nodes"
    ),
    BadInput(
        "budget-schedule-one-word",
        "unclear",
        budget("daily", "1h"),
        (
            f"{BUDGET}.schedule: 'daily' is no schedule Karpenter can read: 1 field",
            "takes exactly 5: minute hour day-of-month month day-of-week",
            'for example "0 4 * * 0" (Sundays at 04:00 UTC), "0 4 * * *" (daily) or @daily',
        ),
    ),
    disruption_case(
        "budget-duration-seconds",
        {"budgets": [{"nodes": "0", "schedule": "@daily", "duration": "90s"}]},
        "22h or 1h30m",
        ".budgets[0].duration",
    ),
    BadInput(
        "budget-schedule-without-duration",
        "silent",
        pool(disruption={"budgets": [{"nodes": "0", "schedule": "0 4 * * *"}]}),
        ("node_pools[0].disruption.budgets[0]", "schedule and duration go together"),
    ),
    BadInput(
        "budget-unknown-reason",
        "unclear",
        pool(disruption={"budgets": [{"nodes": "0", "reasons": ["Expired"]}]}),
        ("node_pools[0].disruption.budgets[0].reasons[0]", "'Drifted'"),
    ),
    pool_pattern_case("ami-alias-pattern", "ami_alias", "al2023@latest", "al2023@v2026"),
    pool_pattern_case("ami-alias-foreign", "ami_alias", "bottlerocket@v1.30.0", "al2023@v2026"),
    pool_pattern_case("ami-alias-unpinned", "ami_alias", "al2023", "al2023@v2026"),
    BadInput(
        "network-name-pattern",
        "unclear",
        config({"multus": {"networks": networks(name="Multus_1")}}),
        ("multus.networks[0].name", "Kubernetes name", "for example multus-networks"),
    ),
    BadInput(
        "interface-name-pattern",
        "unclear",
        config({"multus": {"networks": networks(interface_name="multus-1")}}),
        ("multus.networks[0].interface_name", "Linux interface name", "for example multus1"),
    ),
    BadInput(
        "pipeline-name-pattern",
        "unclear",
        pipeline(lambda p: p.update(name="my pipeline")),
        ("pipeline.name", "for example karpenter-multus-pipeline"),
    ),
    BadInput(
        "pipeline-tooling-account-pattern",
        "unclear",
        pipeline(lambda p: p.update(tooling_account="1111")),
        ("pipeline.tooling_account", 'for example "123456789012"'),
    ),
    BadInput(
        "pipeline-connection-arn-pattern",
        "unclear",
        pipeline(lambda p: p["source"].update(connection_arn="my-github")),
        ("pipeline.source.connection_arn", "for example arn:aws:codeconnections:"),
    ),
    BadInput(
        "pipeline-repository-pattern",
        "unclear",
        pipeline(lambda p: p["source"].update(repository="karpenter-multus-eks")),
        ("pipeline.source.repository", "for example example-telco/karpenter-multus-eks"),
    ),
    BadInput(
        "pipeline-environment-name-pattern",
        "unclear",
        pipeline(lambda p: p["environments"][0].update(name="dev env")),
        ("pipeline.environments[0].name", "for example staging"),
    ),
    BadInput(
        "pipeline-environment-account-pattern",
        "unclear",
        pipeline(lambda p: p["environments"][0].update(account="2222")),
        ("pipeline.environments[0].account", 'for example "123456789012"'),
    ),
    BadInput(
        "image-digest-appended-to-the-tag",
        "unclear",
        config(
            {
                "images": {
                    "whereabouts": {
                        "repository": "ghcr.io/k8snetworkplumbingwg/whereabouts",
                        "tag": "v0.9.4@sha256:" + "0" * 64,
                    }
                }
            }
        ),
        ("images.whereabouts.tag", "give 'v0.9.4' here", "digest: 'sha256:" + "0" * 64),
    ),
]

COVERED = [
    BadInput(
        "az-of-another-region",
        "covered",
        {"config.availability_zones": '["us-west-2a", "us-east-1b"]'},
        ("availability_zones", "'us-east-1b' is not an availability zone of us-west-2"),
    ),
    BadInput(
        "unknown-region",
        "covered",
        {"config.region": "us-west-9"},
        ("region", "not an AWS Region", "config/aws_regions.py"),
    ),
    BadInput(
        "overlapping-subnets",
        "covered",
        {"config.vpc.node_subnet_cidrs": '["10.0.2.0/24", "10.0.4.128/25"]'},
        ("vpc.node_subnet_cidrs[1] (10.0.4.128/25)", "overlaps", "a range of its own"),
    ),
    BadInput(
        "subnet-outside-the-vpc",
        "covered",
        {"config.vpc.node_subnet_cidrs": '["10.0.2.0/24", "10.1.3.0/24"]'},
        ("vpc.node_subnet_cidrs[1]", "outside the VPC CIDR 10.0.0.0/16", "inside it"),
    ),
    BadInput(
        "reservation-over-the-addresses-aws-keeps",
        "covered",
        config(
            {
                "multus": {
                    "networks": networks(
                        subnets=[
                            {"cidr": "10.0.4.0/24", "reservation": "10.0.4.0/28"},
                            {"cidr": "10.0.5.0/24", "reservation": "10.0.5.32/27"},
                        ]
                    )
                }
            }
        ),
        ("multus.networks[0].subnets[0]", "addresses AWS keeps", "10.0.4.4-10.0.4.254"),
    ),
    BadInput(
        "pod-routed-range-inside-the-vpc",
        "covered",
        config({"multus": {"networks": networks(pod_routed_ranges=["10.0.200.0/24"])}}),
        (
            "multus.networks[0] (multus1).pod_routed_ranges[0]",
            "overlaps the VPC CIDR 10.0.0.0/16",
            "outside the VPC",
        ),
    ),
    BadInput(
        "pod-routed-ranges-overlapping",
        "covered",
        config(
            {"multus": {"networks": networks(pod_routed_ranges=["10.45.0.0/16", "10.45.8.0/24"])}}
        ),
        ("multus.networks[0].pod_routed_ranges[1]", "overlaps 10.45.0.0/16", "disjoint"),
    ),
    BadInput(
        "pod-routed-range-claimed-by-two-networks",
        "covered",
        config(
            {
                "multus": {
                    "networks": [
                        *networks(pod_routed_ranges=["10.45.0.0/16"])[:1],
                        {**networks()[1], "pod_routed_ranges": ["10.45.0.0/17"]},
                    ]
                }
            }
        ),
        ("multus.networks[1] (multus2).pod_routed_ranges[0]", "overlaps", "on one of them"),
    ),
    BadInput(
        "pod-routed-range-with-source-dest-check",
        "covered",
        config(
            {
                "multus": {
                    "networks": networks(pod_routed_ranges=["10.45.0.0/16"], source_dest_check=True)
                }
            }
        ),
        ("multus.networks[0].pod_routed_ranges", "source/destination check", "false"),
    ),
    BadInput(
        "pod-routed-range-in-node-prefix-mode",
        "covered",
        config(
            {
                "multus": {
                    "networks": networks(
                        pod_routed_ranges=["10.45.0.0/16"], ip_management="node_prefix"
                    )
                }
            }
        ),
        ("multus.networks[0].pod_routed_ranges", "does not run", "whereabouts"),
    ),
    BadInput(
        "pod-routed-range-also-a-route",
        "covered",
        config(
            {
                "multus": {
                    "networks": networks(
                        pod_routed_ranges=["10.45.0.0/16"],
                        routes=[
                            {
                                "destination": "10.45.0.0/16",
                                "transit_gateway_id": "tgw-0123456789abcdef0",
                            }
                        ],
                    )
                }
            }
        ),
        ("multus.networks[0].pod_routed_ranges[0]", "routes[0]", "one of the two lists"),
    ),
    # Issue #53: the same range was refused, one inside the other accepted.
    BadInput(
        "pod-routed-range-inside-the-networks-own-route",
        "accepted",
        config(
            {
                "multus": {
                    "networks": networks(
                        pod_routed_ranges=["10.200.45.0/24"],
                        routes=[
                            {
                                "destination": "10.200.0.0/16",
                                "transit_gateway_id": "tgw-0123456789abcdef0",
                            },
                        ],
                    )
                }
            }
        ),
        (
            "multus.networks[0].pod_routed_ranges[0]: 10.200.45.0/24 overlaps routes[0]'s "
            "destination 10.200.0.0/16 (to tgw-0123456789abcdef0)",
            "the longest prefix wins",
            "keep the pod-routed range outside the network's routes",
        ),
    ),
    BadInput(
        "route-inside-the-networks-own-pod-routed-range",
        "accepted",
        config(
            {
                "multus": {
                    "networks": networks(
                        pod_routed_ranges=["10.45.0.0/16"],
                        routes=[{"destination": "10.45.128.0/17", "nat_gateway": True}],
                    )
                }
            }
        ),
        (
            "multus.networks[0].pod_routed_ranges[0]: 10.45.0.0/16 overlaps routes[0]'s "
            "destination 10.45.128.0/17 (to the NAT gateway)",
        ),
    ),
    BadInput(
        "static-range-outside-its-reservation",
        "covered",
        config({"multus": {"networks": static_range_networks("10.0.4.128/28")}}),
        (
            "multus.networks[0].subnets[0].static_range",
            "10.0.4.128/28 is not inside reservation 10.0.4.32/27",
            "for example 10.0.4.48/28",
        ),
    ),
    BadInput(
        "static-range-over-the-reservation-and-the-dynamic-range",
        "covered",
        config({"multus": {"networks": static_range_networks("10.0.4.0/26")}}),
        (
            "multus.networks[0].subnets[0].static_range",
            "not inside reservation 10.0.4.32/27",
            "Whereabouts hands out the rest",
        ),
    ),
    BadInput(
        "static-range-is-the-whole-reservation",
        "covered",
        config({"multus": {"networks": static_range_networks("10.0.4.32/27")}}),
        (
            "multus.networks[0].subnets[0].static_range",
            "the whole reservation",
            "no dynamic address",
            "for example 10.0.4.48/28",
        ),
    ),
    BadInput(
        "static-range-not-a-cidr-block",
        "covered",
        config({"multus": {"networks": static_range_networks("10.0.4.50/28")}}),
        ("multus.networks[0].subnets[0].static_range", "host bits", "for example"),
    ),
    BadInput(
        "static-range-on-a-node-prefix-network",
        "covered",
        config(
            {
                "multus": {
                    "networks": static_range_networks("10.0.4.48/28", ip_management="node_prefix")
                }
            }
        ),
        (
            "multus.networks[0]",
            "subnets[0].static_range",
            "need ip_management 'whereabouts'",
            "cannot follow its pod",
        ),
    ),
    BadInput(
        "floating-address-without-a-static-range",
        "covered",
        config({"multus": {"networks": floating_networks(["10.0.4.60"], None)}}),
        (
            "multus.networks[0].subnets[0]",
            "floating_addresses: 10.0.4.60 needs a static_range",
            "set static_range (for example 10.0.4.48/28)",
        ),
    ),
    BadInput(
        "floating-address-outside-the-static-range",
        "covered",
        config({"multus": {"networks": floating_networks(["10.0.4.40"], "10.0.4.48/28")}}),
        (
            "multus.networks[0].subnets[0]",
            "floating_addresses[0]: 10.0.4.40 is not inside static_range 10.0.4.48/28",
            "Whereabouts could give the address to another pod",
            "pick one of 10.0.4.48-10.0.4.63",
        ),
    ),
    BadInput(
        "floating-address-listed-twice",
        "covered",
        config(
            {"multus": {"networks": floating_networks(["10.0.4.60", "10.0.4.60"], "10.0.4.48/28")}}
        ),
        ("multus.networks[0].subnets[0]", "floating_addresses[1]: 10.0.4.60 is listed twice"),
    ),
    BadInput(
        "floating-address-with-a-prefix-length",
        "covered",
        config({"multus": {"networks": floating_networks(["10.0.4.60/24"], "10.0.4.48/28")}}),
        (
            "multus.networks[0].subnets[0].floating_addresses[0]",
            "not an IPv4 address",
            "without a prefix length, for example 10.0.4.60",
        ),
    ),
    BadInput(
        "vpc-larger-than-16",
        "covered",
        {"config.vpc.cidr": "10.0.0.0/8"},
        ("vpc.cidr", "/16 to /28"),
    ),
    BadInput(
        "host-bits-set",
        "covered",
        {"config.vpc.cidr": "10.0.0.1/16"},
        ("vpc.cidr", "host bits", "for example 10.0.4.0/24"),
    ),
    BadInput(
        "subnet-count-differs-from-the-azs",
        "covered",
        {"config.availability_zones": '["us-west-2a", "us-west-2b", "us-west-2c"]'},
        ("vpc.public_subnet_cidrs", "2 subnet(s) for 3 availability zones", "give one per AZ"),
    ),
    BadInput(
        "duplicate-network-names",
        "covered",
        config({"multus": {"networks": networks(name="multus2")}}),
        ("multus.networks[1].name", "'multus2' is also networks[0]'s name", "give each network"),
    ),
    BadInput(
        "duplicate-interface-names",
        "unclear",
        config({"multus": {"networks": networks(interface_name="multus2")}}),
        (
            "multus.networks[1].interface_name",
            "'multus2' is also the interface name of networks[0] (multus1)",
            "set interface_name",
        ),
    ),
    BadInput(
        "unsupported-kubernetes-version",
        "covered",
        {"config.cluster.kubernetes_version": "1.31"},
        ("cluster.kubernetes_version", "'1.33'"),
    ),
    BadInput(
        "karpenter-too-old-for-kubernetes",
        "covered",
        {"config.cluster.kubernetes_version": "1.36", "config.karpenter.version": "1.12.2"},
        ("karpenter.version", "does not support Kubernetes 1.36", ">= 1.13.0"),
    ),
    BadInput(
        "more-networks-than-interfaces",
        "covered",
        config(
            {
                "multus": {
                    "networks": [
                        *networks(),
                        {
                            "name": "multus3",
                            "subnets": [
                                {"cidr": "10.0.8.0/24", "reservation": "10.0.8.32/27"},
                                {"cidr": "10.0.9.0/24", "reservation": "10.0.9.32/27"},
                            ],
                        },
                    ]
                }
            }
        ),
        ("node_pools[0] (multus).networks", "need 4 network interfaces", "drop small sizes"),
    ),
    BadInput(
        "vcpu-count-no-family-has",
        "covered",
        pool(instance_cpus=[3]),
        ("node_pools[0].instance_cpus", "[3]: pick vCPU counts of m/c/r sizes: [2, 4, 8"),
    ),
    BadInput(
        "unknown-instance-type",
        "covered",
        {"config.cluster.system_node_group.instance_types": '["c5.lage"]'},
        ("cluster.system_node_group.instance_types[0]", "for example m6i.large"),
    ),
    BadInput(
        "graviton-system-node",
        "covered",
        {"config.cluster.system_node_group.instance_types": '["t4g.medium"]'},
        ("cluster.system_node_group", "arm64", "for example c5.large"),
    ),
    BadInput(
        "node-group-sizes-out-of-order",
        "covered",
        {"config.cluster.system_node_group.min_size": "3"},
        ("cluster.system_node_group", "min_size <= desired_size <= max_size"),
    ),
    BadInput(
        "more-controllers-than-system-nodes",
        "covered",
        {"config.karpenter.replicas": "3"},
        ("karpenter.replicas", "raise desired_size"),
    ),
    BadInput(
        "unknown-choice",
        "covered",
        {"config.vpc.nat_gateways": "two"},
        ("vpc.nat_gateways", "'per_az' or 'single'"),
    ),
    BadInput(
        "config-file-that-is-a-list",
        "covered",
        {"config_file": "list.yaml"},
        ("config_file", "mapping at the top level"),
        files={"list.yaml": b"- region: us-west-2\n"},
    ),
    BadInput(
        "missing-config-file",
        "covered",
        {"config_file": "nope.json"},
        ("config_file", "no such file"),
    ),
    BadInput(
        "duplicate-pipeline-environment-names",
        "covered",
        pipeline(lambda p: p["environments"][2].update(name="staging")),
        ("pipeline.environments", "names must be unique"),
    ),
    BadInput(
        "environment-azs-of-another-region",
        "covered",
        pipeline(
            lambda p: p["environments"][1].update(availability_zones=["us-west-2a", "us-west-2b"])
        ),
        ("pipeline.environments[1] (staging)", "availability_zones", "ap-northeast-1a"),
    ),
]

# Issue #23: node_pools replaced node_pool; each new key's wrong values.
NODE_POOLS = [
    BadInput(
        "replace-not-ready-after-in-words",
        "node-pools",
        config({"node_pools": [{"name": "multus", "replace_not_ready_after": "15 minutes"}]}),
        (
            "node_pools[0].replace_not_ready_after: '15 minutes' is not a duration",
            "or Never; for example 20m or Never",
        ),
    ),
    BadInput(
        "network-card-on-a-pool-of-single-card-sizes",
        "node-pools",
        config({"multus": {"networks": networks(network_card=1)}}),
        (
            "node_pools[0] (multus).networks: multus1 is on network_card 1",
            "multus.networks[0] (multus1).network_card",
            "have no network card 1",
            "allow only sizes with 2 or more cards",
            "with instance_cpus [128, 384] (c6in.32xlarge",
            "or set multus.networks[0] (multus1).network_card to 0",
        ),
    ),
    BadInput(
        "network-card-not-a-card-index",
        "node-pools",
        config({"multus": {"networks": networks(network_card=-1)}}),
        ("multus.networks[0].network_card: -1 is below what this field takes: at least 0",),
    ),
    BadInput(
        "old-node-pool-key-shows-the-new-form",
        "node-pools",
        config({"node_pool": {"instance_cpus": [4, 8]}}),
        (
            "node_pool was replaced by node_pools",
            '"node_pools": [{"name": "multus", "instance_cpus": [4, 8]}]',
        ),
    ),
    BadInput(
        "old-node-pool-override-shows-the-new-form",
        "node-pools",
        {"config.node_pool.instance_cpus": "[4, 8]"},
        ('"node_pools": [{"name": "multus", "instance_cpus": [4, 8]}]',),
    ),
    BadInput(
        "pool-without-a-name",
        "node-pools",
        config({"node_pools": [{"networks": ["multus1"]}]}),
        ("node_pools[0].name", "Field required"),
    ),
    BadInput(
        "pool-attaching-an-unknown-network",
        "node-pools",
        pool(networks=["multus1", "multus3"]),
        ("node_pools[0] (multus).networks", "['multus3'] are not multus.networks", "multus2"),
    ),
    BadInput(
        "pool-listing-a-network-twice",
        "node-pools",
        pool(networks=["multus1", "multus1"]),
        ("node_pools[0].networks", "list each network once"),
    ),
    BadInput(
        "two-pools-with-one-name",
        "node-pools",
        config({"node_pools": [{"name": "multus"}, {"name": "multus", "networks": []}]}),
        ("node_pools", "two pools are named 'multus'", "give each pool its own name"),
    ),
    BadInput(
        "pool-name-not-a-kubernetes-name",
        "node-pools",
        config({"node_pools": [{"name": "UPF_pool"}]}),
        ("node_pools[0].name", "Kubernetes name", "for example multus-networks"),
    ),
    BadInput(
        "pool-label-key-not-a-kubernetes-key",
        "node-pools",
        pool(labels={"network function": "upf"}),
        ("node_pools[0].labels", "'network function' is not a Kubernetes label key"),
    ),
    BadInput(
        "pool-label-value-too-long",
        "node-pools",
        pool(labels={"example.com/role": "u" * 64}),
        ("node_pools[0].labels", "a label value is at most 63"),
    ),
    BadInput(
        "pool-label-the-app-sets-per-network",
        "node-pools",
        pool(labels={"multus.network/multus1": "false"}),
        ("node_pools[0].labels", "is set by this app", "pick a key of your own"),
    ),
    BadInput(
        "pool-label-the-app-sets-on-every-node",
        "node-pools",
        pool(labels={"karpenter-node": "false"}),
        ("node_pools[0].labels", "'karpenter-node' is set by this app"),
    ),
    BadInput(
        "pool-label-in-karpenters-domain",
        "node-pools",
        pool(labels={"karpenter.sh/nodepool": "other"}),
        ("node_pools[0].labels", "is set by Karpenter"),
    ),
    BadInput(
        "pool-taint-the-app-sets",
        "node-pools",
        pool(taints=[{"key": "multus/not-ready", "value": "true"}]),
        ("node_pools[0].taints[0]", "the startup taint this app puts on Multus nodes"),
    ),
    BadInput(
        "pool-taint-key-not-a-kubernetes-key",
        "node-pools",
        pool(taints=[{"key": "-upf"}]),
        ("node_pools[0].taints[0]", "'-upf' is not a Kubernetes taint key"),
    ),
    BadInput(
        "pool-taint-listed-twice",
        "node-pools",
        pool(taints=[{"key": "example.com/upf"}, {"key": "example.com/upf", "value": "x"}]),
        ("node_pools[0].taints[1]", "example.com/upf:NoSchedule is listed twice"),
    ),
    BadInput(
        "pool-taint-effect-unknown",
        "node-pools",
        pool(taints=[{"key": "example.com/upf", "effect": "NoExec"}]),
        ("node_pools[0].taints[0].effect", "'NoSchedule', 'PreferNoSchedule' or 'NoExecute'"),
    ),
    BadInput(
        "pool-weight-above-karpenters-maximum",
        "node-pools",
        pool(weight=101),
        ("node_pools[0].weight: 101 is above what this field takes: 1 to 100",),
    ),
    BadInput(
        "no-pool-at-all",
        "node-pools",
        config({"node_pools": []}),
        ("node_pools", "at least 1 item"),
    ),
]


# Issue #38: node_pools[].node_profile (tests/unit/config/test_node_profile.py has every rule).
PROFILE = "node_pools[0].node_profile"
NODE_PROFILE = [
    BadInput(
        "node-profile-static-without-reserved-cpus",
        "covered",
        pool(node_profile={"cpu_manager": "static"}),
        (f"{PROFILE}.reserved_cpus", "cpu_manager static needs", 'for example "0-1"'),
    ),
    BadInput(
        "node-profile-reserved-cpus-syntax",
        "covered",
        pool(node_profile={"cpu_manager": "static", "reserved_cpus": "0..1"}),
        (f"{PROFILE}.reserved_cpus", "not a Linux CPU list", 'for example "0-1"'),
    ),
    BadInput(
        "node-profile-reserved-cpus-leave-none",
        "covered",
        pool(node_profile={"cpu_manager": "static", "reserved_cpus": "0-1"}),
        (f"{PROFILE}.reserved_cpus", "m5.large has CPUs 0-1", "reserve fewer"),
    ),
    BadInput(
        "node-profile-reserved-cpus-count-zero",
        "covered",
        pool(node_profile={"cpu_manager": "static", "reserved_cpus": 0}),
        (f"{PROFILE}.reserved_cpus", "reserve at least 1 CPU"),
    ),
    BadInput(
        "node-profile-reserved-cpus-count-leaves-none",
        "covered",
        pool(node_profile={"cpu_manager": "static", "reserved_cpus": 2}),
        (f"{PROFILE}.reserved_cpus", "2 CPUs are all of", "m5.large (2 vCPUs)", "reserve fewer"),
    ),
    BadInput(
        "node-profile-irqs-without-static",
        "covered",
        pool(node_profile={"irqs_on_reserved_cpus": True, "hugepages_2mi": 8}),
        (f"{PROFILE}.irqs_on_reserved_cpus", "set cpu_manager to static"),
    ),
    BadInput(
        "node-profile-memory-manager-unknown",
        "covered",
        pool(node_profile={"memory_manager": "Static"}),
        (f"{PROFILE}.memory_manager", "'static'"),
    ),
    BadInput(
        "node-profile-full-pcpus-only-without-static",
        "covered",
        pool(node_profile={"full_pcpus_only": True}),
        (f"{PROFILE}.full_pcpus_only", "set cpu_manager to static"),
    ),
    BadInput(
        "node-profile-scope-without-topology-manager",
        "covered",
        pool(node_profile={"topology_manager_scope": "pod"}),
        (f"{PROFILE}.topology_manager_scope", "set topology_manager"),
    ),
    BadInput(
        "node-profile-topology-manager-unknown",
        "covered",
        pool(node_profile={"topology_manager": "numa"}),
        (f"{PROFILE}.topology_manager", "'single-numa-node'"),
    ),
    BadInput(
        "node-profile-hugepages-leave-no-memory",
        "covered",
        pool(node_profile={"hugepages_2mi": 2048}),
        (f"{PROFILE}.hugepages_2mi", "c5.large (4096 MiB)", "ask for at most 1024 pages"),
    ),
    BadInput(
        "node-profile-hugepages-without-node-overlay",
        "covered",
        config(
            {
                "cluster": {"kubernetes_version": "1.33"},
                "karpenter": {"version": "1.6.8"},
                "node_pools": [{"name": "multus", "node_profile": {"hugepages_2mi": 512}}],
            }
        ),
        (
            "node_pools[0] (multus).node_profile.hugepages_2mi",
            "karpenter.version 1.6.8 has none",
            "use Karpenter >= 1.7.0",
        ),
    ),
    BadInput(
        "node-profile-1gi-hugepages",
        "covered",
        pool(node_profile={"hugepages_1gi": 2}),
        (PROFILE, "hugepages_1gi: 1 GiB pages", "use hugepages_2mi"),
    ),
    BadInput(
        "node-profile-sysctl-not-allowed",
        "covered",
        pool(node_profile={"sysctls": {"kernel.sysrq": 1}}),
        (f"{PROFILE}.sysctls", "'kernel.sysrq' is not", "allowed: net.core.rmem_default"),
    ),
    # Issue #53: was "Input should be a valid integer", without the form a setting takes.
    BadInput(
        "node-profile-sysctl-of-several-values",
        "unclear",
        pool(node_profile={"sysctls": {"net.ipv4.tcp_rmem": "4096 87380 6291456"}}),
        (
            f"{PROFILE}.sysctls: net.ipv4.tcp_rmem = '4096 87380 6291456': 3 numbers in one value",
            "each take one whole number, written without quotes",
            "such as net.ipv4.tcp_rmem (min default max), are not among the allowed keys",
            "net.core.rmem_max",
        ),
    ),
    BadInput(
        "node-profile-sysctl-number-in-quotes",
        "unclear",
        pool(node_profile={"sysctls": {"net.core.rmem_max": "16777216"}}),
        (
            f"{PROFILE}.sysctls: net.core.rmem_max = '16777216': a number in quotes",
            "write it without quotes: net.core.rmem_max: 16777216",
        ),
    ),
]


def ingress(**rule: Any) -> dict[str, Any]:
    """A config whose first Multus network admits only `rule`."""
    return config({"multus": {"networks": networks(security_group={"ingress": [rule]})}})


RULE = "multus.networks[0].security_group.ingress[0]"
# Security-group rules of a network (EC2 API Reference, IpPermission: ports are filtered only
# for tcp and udp, ICMP takes types and codes; -1 is every protocol).
SECURITY_GROUP_RULES = [
    BadInput(
        "port-on-protocol-all",
        "covered",
        ingress(protocol=-1, ports=80, cidr="10.0.0.0/16"),
        (f"{RULE}.ports", "only for tcp and udp", '{"protocol": -1, "cidr": "10.0.0.0/16"}'),
    ),
    BadInput(
        "port-on-icmp",
        "covered",
        ingress(protocol="icmp", ports=8, cidr="10.0.0.0/16"),
        (f"{RULE}.ports", "only for tcp and udp", '{"protocol": "icmp", "cidr": "10.0.0.0/16"}'),
    ),
    BadInput(
        "port-on-sctp-which-ec2-does-not-filter",
        "covered",
        ingress(protocol="sctp", ports=38412, cidr="10.100.0.0/16"),
        (
            f"{RULE}.ports",
            "allows every port whatever range it names",
            '{"protocol": "sctp", "cidr": "10.100.0.0/16"}',
        ),
    ),
    BadInput(
        "port-zero",
        "covered",
        ingress(protocol="udp", ports=0, cidr="10.0.0.0/16"),
        (f"{RULE}.ports", "0 is outside 1-65535", "omit ports for every port"),
    ),
    BadInput(
        "port-above-65535",
        "covered",
        ingress(protocol="tcp", ports="1000-65536", cidr="10.0.0.0/16"),
        (f"{RULE}.ports", "65536 is outside 1-65535"),
    ),
    BadInput(
        "port-range-reversed",
        "covered",
        ingress(protocol="udp", ports="2153-2152", cidr="10.0.0.0/16"),
        (f"{RULE}.ports", 'write "2152-2153"'),
    ),
    BadInput(
        "port-range-not-a-range",
        "covered",
        ingress(protocol="udp", ports="2152:2153", cidr="10.0.0.0/16"),
        (f"{RULE}.ports", 'for example 2152 or "30000-32767"'),
    ),
    BadInput(
        "rule-naming-an-unknown-network",
        "covered",
        ingress(protocol="udp", ports=2152, network="n3"),
        (
            "multus.networks[0] (multus1).security_group.ingress[0].network",
            "'n3' is not a Multus network (multus1, multus2)",
            "the network itself",
            "give a cidr",
        ),
    ),
    BadInput(
        "rule-with-an-invalid-cidr",
        "covered",
        ingress(protocol="udp", cidr="10.0.0.1/16"),
        (f"{RULE}.cidr", "host bits", "for example 10.0.4.0/24"),
    ),
    BadInput(
        "rule-with-an-unknown-protocol-name",
        "covered",
        ingress(protocol="gtp", cidr="10.0.0.0/16"),
        (f"{RULE}.protocol", "'gtp' is neither a name", 'for example "sctp" or 132'),
    ),
    BadInput(
        "rule-with-a-protocol-number-out-of-range",
        "covered",
        ingress(protocol=256, cidr="10.0.0.0/16"),
        (f"{RULE}.protocol", "256", "-1..255"),
    ),
    BadInput(
        "rule-with-a-protocol-aws-cdk-cannot-express",
        "covered",
        ingress(protocol=150, cidr="10.0.0.0/16"),
        (f"{RULE}.protocol", "protocol 150", "0-143 except 13 and 61, and 253-255"),
    ),
    BadInput(
        "rule-protocol-as-a-yaml-boolean",
        "covered",
        ingress(protocol=True, cidr="10.0.0.0/16"),
        (f"{RULE}.protocol", "arrived as a boolean"),
    ),
    BadInput(
        "rule-with-cidr-and-network",
        "covered",
        ingress(protocol="all", cidr="10.0.0.0/16", network="multus2"),
        (RULE, "cidr / network: both given", '"network": "<a multus network name>"'),
    ),
    BadInput(
        "rule-with-neither-cidr-nor-network",
        "covered",
        ingress(protocol="all"),
        (RULE, "cidr / network: neither given"),
    ),
    BadInput(
        "rule-description-ec2-refuses",
        "covered",
        ingress(protocol="all", cidr="10.0.0.0/16", description="from the RAN <gNB>"),
        (f"{RULE}.description",),
    ),
]


def existing_vpc(**changes: Any) -> dict[str, Any]:
    """The seed's networks in an existing VPC 10.0.0.0/16 whose node subnets are the seed's,
    with NAT gateways; `changes` replace keys of vpc.existing (a `vpc` key: of vpc itself)."""
    vpc_changes = changes.pop("vpc", {})
    existing = {
        "vpc_id": "vpc-0123456789abcdef0",
        "cidrs": ["10.0.0.0/16"],
        "node_subnets": [
            {"id": "subnet-0123456789abcdef1", "cidr": "10.0.2.0/24"},
            {"id": "subnet-0123456789abcdef2", "cidr": "10.0.3.0/24"},
        ],
        "nat_gateway_ids": ["nat-0123456789abcdef1", "nat-0123456789abcdef2"],
        **changes,
    }
    return config({"vpc": {"existing": existing, **vpc_changes}})


SUBNET_ONE = {"id": "subnet-0123456789abcdef1", "cidr": "10.0.2.0/24"}
# Issue #26: a VPC the network team owns (vpc.existing); IDs as EC2 writes them (vpc-, subnet-,
# nat- and 8 or 17 lowercase hex digits: EC2 user guide, "Resource IDs").
EXISTING_VPC = [
    BadInput(
        "existing-vpc-with-a-new-vpc-cidr",
        "existing-vpc",
        existing_vpc(vpc={"cidr": "10.0.0.0/16"}),
        ("vpc.cidr", "describes a VPC the app creates", "remove cidr"),
    ),
    BadInput(
        "existing-vpc-with-new-vpc-node-subnets",
        "existing-vpc",
        existing_vpc(vpc={"node_subnet_cidrs": ["10.0.2.0/24", "10.0.3.0/24"]}),
        ("vpc.node_subnet_cidrs", "remove node_subnet_cidrs", "go under existing"),
    ),
    BadInput(
        "existing-vpc-with-nat-gateways-setting",
        "existing-vpc",
        existing_vpc(vpc={"nat_gateways": "single"}),
        ("vpc.nat_gateways", "remove nat_gateways"),
    ),
    BadInput(
        "existing-vpc-with-flow-log-retention",
        "existing-vpc",
        existing_vpc(vpc={"flow_log_retention": "ONE_YEAR"}),
        ("vpc.flow_log_retention", "remove flow_log_retention"),
    ),
    BadInput(
        "existing-vpc-id-of-16-hex-digits",
        "existing-vpc",
        existing_vpc(vpc_id="vpc-0123456789abcdef"),
        ("vpc.existing.vpc_id", "vpc- and 8 or 17 lowercase hex digits", "vpc-0123456789abcdef0"),
    ),
    BadInput(
        "existing-subnet-id-in-upper-case",
        "existing-vpc",
        existing_vpc(
            node_subnets=[{"id": "subnet-0123456789ABCDEF1", "cidr": "10.0.2.0/24"}, SUBNET_ONE]
        ),
        ("vpc.existing.node_subnets[0].id", "subnet- and 8 or 17 lowercase hex digits"),
    ),
    BadInput(
        "existing-nat-gateway-id-of-another-type",
        "existing-vpc",
        existing_vpc(nat_gateway_ids=["igw-0123456789abcdef1", "nat-0123456789abcdef2"]),
        ("vpc.existing.nat_gateway_ids[0]", "nat- and 8 or 17 lowercase hex digits"),
    ),
    BadInput(
        "existing-vpc-without-cidrs",
        "existing-vpc",
        existing_vpc(cidrs=[]),
        ("vpc.existing.cidrs", "at least 1"),
    ),
    BadInput(
        "existing-vpc-cidr-not-a-cidr",
        "existing-vpc",
        existing_vpc(cidrs=["10.0.0.0/33"]),
        ("vpc.existing.cidrs[0]", "not an IPv4 CIDR block"),
    ),
    BadInput(
        "existing-vpc-cidrs-overlapping",
        "existing-vpc",
        existing_vpc(cidrs=["10.0.0.0/16", "10.0.128.0/17"]),
        ("vpc.existing.cidrs", "10.0.128.0/17 overlaps 10.0.0.0/16"),
    ),
    BadInput(
        "existing-vpc-one-node-subnet-for-two-zones",
        "existing-vpc",
        existing_vpc(node_subnets=[SUBNET_ONE]),
        ("vpc.existing.node_subnets", "1 subnet(s) for 2 availability zones", "one per AZ"),
    ),
    BadInput(
        "existing-vpc-one-public-subnet-for-two-zones",
        "existing-vpc",
        existing_vpc(public_subnets=[{"id": "subnet-0123456789abcdef3", "cidr": "10.0.0.0/24"}]),
        ("vpc.existing.public_subnets", "1 subnet(s) for 2 availability zones"),
    ),
    BadInput(
        "existing-vpc-one-nat-gateway-for-two-zones",
        "existing-vpc",
        existing_vpc(nat_gateway_ids=["nat-0123456789abcdef1"]),
        ("vpc.existing.nat_gateway_ids", "1 NAT gateway(s) for 2", "repeat an ID to share"),
    ),
    BadInput(
        "existing-vpc-node-subnet-listed-twice",
        "existing-vpc",
        existing_vpc(node_subnets=[SUBNET_ONE, {**SUBNET_ONE, "cidr": "10.0.3.0/24"}]),
        ("vpc.existing", "subnet-0123456789abcdef1 is listed more than once"),
    ),
    BadInput(
        "existing-node-subnet-outside-the-vpc-cidrs",
        "existing-vpc",
        existing_vpc(
            node_subnets=[SUBNET_ONE, {"id": "subnet-0123456789abcdef2", "cidr": "10.1.3.0/24"}]
        ),
        ("vpc.existing.node_subnets[1].cidr", "outside the VPC CIDR 10.0.0.0/16", "inside it"),
    ),
    BadInput(
        "existing-node-subnet-overlapping-a-multus-subnet",
        "existing-vpc",
        existing_vpc(
            node_subnets=[SUBNET_ONE, {"id": "subnet-0123456789abcdef2", "cidr": "10.0.4.0/23"}]
        ),
        (
            "multus.networks[0].subnets[0].cidr",
            "overlaps vpc.existing.node_subnets[1].cidr (10.0.4.0/23)",
            "a range of its own",
        ),
    ),
    BadInput(
        "existing-node-subnets-overlapping-each-other",
        "existing-vpc",
        existing_vpc(
            node_subnets=[SUBNET_ONE, {"id": "subnet-0123456789abcdef2", "cidr": "10.0.2.128/25"}]
        ),
        ("vpc.existing.node_subnets[1].cidr", "overlaps vpc.existing.node_subnets[0].cidr"),
    ),
    BadInput(
        "existing-multus-subnet-outside-the-vpc-cidrs",
        "existing-vpc",
        existing_vpc(cidrs=["10.0.0.0/22"]),
        ("multus.networks[0].subnets[0].cidr", "10.0.4.0/24 is outside the VPC CIDR 10.0.0.0/22"),
    ),
    BadInput(
        "existing-vpc-nat-egress-without-nat-gateways",
        "existing-vpc",
        existing_vpc(nat_gateway_ids=[]),
        (
            "multus.networks[0] (multus1).nat_egress",
            "nat_gateway_ids is empty",
            "set nat_egress false or give one NAT gateway ID per AZ",
        ),
    ),
]


def routes(*route: dict[str, Any], **first: Any) -> dict[str, Any]:
    """A config whose first Multus network routes `route` (and has `first` changed)."""
    return config({"multus": {"networks": networks(routes=list(route), **first)}})


def dual_stack_routes(*route: dict[str, Any]) -> dict[str, Any]:
    """A config whose first Multus network is dual-stack and routes `route`."""
    return config(
        {"vpc": {"ipv6": True}, "multus": {"networks": networks(routes=list(route), ipv6=True)}}
    )


TGW = "tgw-0123456789abcdef0"
ROUTE = "multus.networks[0].routes[0]"
# Issue #26: multus.networks[].routes (EC2 CreateRoute: one destination, exactly one target;
# EC2 resource IDs: the type's prefix and 8 or 17 hex digits).
ROUTES = [
    BadInput(
        "route-destination-not-a-cidr",
        "routes",
        routes({"destination": "10.200.0.0/33", "transit_gateway_id": TGW}),
        (f"{ROUTE}.destination", "is not an IPv4 CIDR block", "for example 10.0.4.0/24"),
    ),
    BadInput(
        "route-destination-ipv6-on-an-ipv4-network",
        "routes",
        routes({"destination": "2001:db8::/32", "transit_gateway_id": TGW}),
        (
            "multus.networks[0]",
            "routes[0].destination: 2001:db8::/32 is IPv6, but the network has no IPv6",
            '"ipv6": true',
        ),
    ),
    BadInput(
        "route-ipv6-destination-to-the-nat-gateway",
        "routes",
        dual_stack_routes({"destination": "2001:db8::/32", "nat_gateway": True}),
        (
            ROUTE,
            "nat_gateway: 2001:db8::/32 is IPv6",
            "transit_gateway_id or a network_interface_id",
        ),
    ),
    BadInput(
        "route-destination-is-the-default-ipv6-route",
        "routes",
        dual_stack_routes({"destination": "::/0", "transit_gateway_id": TGW}),
        (f"{ROUTE}.destination", "is the default IPv6 route", "egress-only internet gateway"),
    ),
    BadInput(
        "route-destination-is-the-default-ipv6-route-spelled-otherwise",
        "routes",
        dual_stack_routes({"destination": "0:0::/0", "transit_gateway_id": TGW}),
        (f"{ROUTE}.destination", "::/0 is the default IPv6 route"),
    ),
    BadInput(
        "overlapping-ipv6-routes-in-one-pool",
        "routes",
        config(
            {
                "vpc": {"ipv6": True},
                "multus": {
                    "networks": [
                        {
                            **network,
                            "ipv6": True,
                            "routes": [{"destination": cidr, "transit_gateway_id": TGW}],
                        }
                        for network, cidr in zip(
                            networks(), ("2001:db8::/32", "2001:db8:45::/48"), strict=True
                        )
                    ]
                },
            }
        ),
        (
            "node_pools[0] (multus)",
            "the overlapping 2001:db8::/32 and 2001:db8:45::/48",
            "route the range on one of them",
        ),
    ),
    BadInput(
        "route-destination-with-host-bits",
        "routes",
        routes({"destination": "10.200.0.1/16", "transit_gateway_id": TGW}),
        (f"{ROUTE}.destination", "host bits"),
    ),
    BadInput(
        "route-destination-is-the-default-route",
        "routes",
        routes({"destination": "0.0.0.0/0", "transit_gateway_id": TGW}),
        (f"{ROUTE}.destination", "is the default route", "nat_egress"),
    ),
    # Issue #49: a route or a pod-routed range that covers the instance metadata service's
    # address (IMDS_ADDRESSES) synthesized; only the default route itself was refused.
    BadInput(
        "route-destination-covers-imds-link-local",
        "accepted",
        routes({"destination": "169.254.0.0/16", "transit_gateway_id": TGW}),
        (
            f"{ROUTE}.destination",
            "169.254.0.0/16 covers 169.254.169.254, the instance metadata service's address",
            "route only ranges that leave 169.254.169.254 out",
        ),
    ),
    BadInput(
        "route-destination-covers-imds-half-the-space",
        "accepted",
        routes({"destination": "128.0.0.0/1", "nat_gateway": True}),
        (f"{ROUTE}.destination", "128.0.0.0/1 covers 169.254.169.254", "leave 169.254.169.254"),
    ),
    BadInput(
        "route-destination-is-imds-itself",
        "accepted",
        routes({"destination": "169.254.169.254/32", "network_interface_id": "eni-01234567"}),
        (f"{ROUTE}.destination", "169.254.169.254/32 covers 169.254.169.254"),
    ),
    BadInput(
        "ipv6-route-destination-covers-imds",
        "accepted",
        dual_stack_routes({"destination": "fd00::/8", "transit_gateway_id": TGW}),
        (f"{ROUTE}.destination", "fd00::/8 covers fd00:ec2::254", "leave fd00:ec2::254 out"),
    ),
    BadInput(
        "pod-routed-range-covers-imds",
        "accepted",
        config({"multus": {"networks": networks(pod_routed_ranges=["169.254.0.0/16"])}}),
        (
            "multus.networks[0].pod_routed_ranges[0]",
            "169.254.0.0/16 covers 169.254.169.254",
            "the node's own IMDS requests",
            "leaves 169.254.169.254 out",
        ),
    ),
    BadInput(
        "imds-covered-by-routes-and-ranges-all-at-once",
        "accepted",
        config(
            {
                "multus": {
                    "networks": [
                        {
                            **networks()[0],
                            "routes": [
                                {"destination": "10.200.0.0/16", "transit_gateway_id": TGW},
                                {"destination": "128.0.0.0/1", "transit_gateway_id": TGW},
                            ],
                            "pod_routed_ranges": ["10.45.0.0/16", "169.254.169.0/24"],
                        },
                        {**networks()[1], "pod_routed_ranges": ["128.0.0.0/2"]},
                    ]
                }
            }
        ),
        (
            "multus.networks[0].routes[1].destination: 128.0.0.0/1 covers 169.254.169.254",
            "multus.networks[0].pod_routed_ranges[1]: 169.254.169.0/24 covers 169.254.169.254",
            "multus.networks[1].pod_routed_ranges[0]: 128.0.0.0/2 covers 169.254.169.254",
        ),
    ),
    BadInput(
        "route-destination-inside-the-vpc",
        "routes",
        routes({"destination": "10.0.128.0/17", "transit_gateway_id": TGW}),
        (
            "multus.networks[0] (multus1).routes[0].destination",
            "overlaps the VPC CIDR 10.0.0.0/16",
            "RAN's or data network's range",
        ),
    ),
    # A summary route around the VPC passes (test_valid_edges.py); the VPC's own block does not.
    BadInput(
        "route-destination-is-the-vpc-cidr",
        "routes",
        routes({"destination": "10.0.0.0/16", "transit_gateway_id": TGW}),
        (
            "multus.networks[0] (multus1).routes[0].destination",
            "overlaps the VPC CIDR 10.0.0.0/16",
            "or a summary around the VPC",
        ),
    ),
    BadInput(
        "summary-route-around-the-networks-own-ue-pool",
        "routes",
        routes(
            {"destination": "10.0.0.0/8", "transit_gateway_id": TGW},
            pod_routed_ranges=["10.45.0.0/16"],
        ),
        (
            "multus.networks[0].pod_routed_ranges[0]: 10.45.0.0/16 overlaps routes[0]'s "
            "destination 10.0.0.0/8",
        ),
    ),
    BadInput(
        "summary-route-around-a-ue-pool-of-the-pool",
        "routes",
        config(
            {
                "multus": {
                    "networks": [
                        {
                            **networks()[0],
                            "routes": [{"destination": "10.0.0.0/8", "transit_gateway_id": TGW}],
                        },
                        {**networks()[1], "pod_routed_ranges": ["10.45.0.0/16"]},
                    ]
                }
            }
        ),
        (
            "node_pools[0] (multus): its nodes attach multus2 and multus1",
            "pod_routed_ranges[0] 10.45.0.0/16 overlaps multus.networks[0] (multus1).routes[0] "
            "10.0.0.0/8",
        ),
    ),
    BadInput(
        "route-destination-twice-in-a-network",
        "routes",
        routes(
            {"destination": "10.200.0.0/16", "transit_gateway_id": TGW},
            {"destination": "10.200.0.0/16", "nat_gateway": True},
        ),
        ("multus.networks[0].routes[1].destination", "10.200.0.0/16 is routed twice"),
    ),
    BadInput(
        "route-destination-in-two-networks",
        "routes",
        config(
            {
                "multus": {
                    "networks": [
                        {
                            **network,
                            "routes": [{"destination": "10.200.0.0/16", "nat_gateway": True}],
                        }
                        for network in networks()
                    ]
                }
            }
        ),
        (
            "node_pools[0] (multus)",
            "attach multus1 and multus2, which route the overlapping 10.200.0.0/16 and "
            "10.200.0.0/16",
            "attach them in different pools",
        ),
    ),
    BadInput(
        "overlapping-routes-in-one-pool",
        "silent",
        config(
            {
                "multus": {
                    "networks": [
                        {**network, "routes": [{"destination": cidr, "nat_gateway": True}]}
                        for network, cidr in zip(
                            networks(), ("10.200.0.0/16", "10.200.4.0/24"), strict=True
                        )
                    ]
                }
            }
        ),
        (
            "node_pools[0] (multus)",
            "the overlapping 10.200.0.0/16 and 10.200.4.0/24",
            "route the range on one of them",
        ),
    ),
    # Issue #53: two networks' overlapping routes were refused, a UE pool equal to the RAN
    # range routed on the pool's other network accepted.
    BadInput(
        "pod-routed-range-routed-on-another-network-of-the-pool",
        "accepted",
        config(
            {
                "multus": {
                    "networks": [
                        {
                            **networks()[0],
                            "routes": [{"destination": "10.200.0.0/16", "transit_gateway_id": TGW}],
                        },
                        {**networks()[1], "pod_routed_ranges": ["10.200.0.0/16"]},
                    ]
                }
            }
        ),
        (
            "node_pools[0] (multus): its nodes attach multus2 and multus1",
            "multus.networks[1] (multus2).pod_routed_ranges[0] 10.200.0.0/16 overlaps "
            "multus.networks[0] (multus1).routes[0] 10.200.0.0/16",
            "attach the networks in different pools",
        ),
    ),
    BadInput(
        "route-inside-a-pod-routed-range-of-another-network-of-the-pool",
        "accepted",
        config(
            {
                "multus": {
                    "networks": [
                        {**networks()[0], "pod_routed_ranges": ["10.45.0.0/16"]},
                        {
                            **networks()[1],
                            "routes": [{"destination": "10.45.7.0/24", "nat_gateway": True}],
                        },
                    ]
                }
            }
        ),
        ("multus.networks[0] (multus1).pod_routed_ranges[0] 10.45.0.0/16 overlaps",),
    ),
    BadInput(
        "route-without-a-target",
        "routes",
        routes({"destination": "10.200.0.0/16", "description": "RAN"}),
        (ROUTE, "exactly one target", "10.200.0.0/16 has none"),
    ),
    BadInput(
        "route-with-nat-gateway-false-only",
        "routes",
        routes({"destination": "10.200.0.0/16", "nat_gateway": False}),
        (ROUTE, "exactly one target", "has none"),
    ),
    BadInput(
        "route-with-two-targets",
        "routes",
        routes({"destination": "10.200.0.0/16", "transit_gateway_id": TGW, "nat_gateway": True}),
        (ROUTE, "exactly one target", "has transit_gateway_id and nat_gateway"),
    ),
    BadInput(
        "route-to-a-malformed-transit-gateway-id",
        "routes",
        routes({"destination": "10.200.0.0/16", "transit_gateway_id": "tgw-12345"}),
        (f"{ROUTE}.transit_gateway_id", "tgw- and 8 or 17 lowercase hex digits"),
    ),
    BadInput(
        "route-to-a-vpn-gateway-id-of-another-type",
        "routes",
        routes({"destination": "10.200.0.0/16", "vpn_gateway_id": TGW}),
        (f"{ROUTE}.vpn_gateway_id", "vgw- and 8 or 17 lowercase hex digits"),
    ),
    BadInput(
        "route-to-an-uppercase-network-interface-id",
        "routes",
        routes({"destination": "10.200.0.0/16", "network_interface_id": "eni-0123456789ABCDEF0"}),
        (f"{ROUTE}.network_interface_id", "eni- and 8 or 17 lowercase hex digits"),
    ),
    BadInput(
        "route-nat-gateway-as-text",
        "routes",
        routes({"destination": "10.200.0.0/16", "nat_gateway": "yes"}),
        (f"{ROUTE}.nat_gateway",),
    ),
    BadInput(
        "route-target-key-misspelled",
        "routes",
        routes({"destination": "10.200.0.0/16", "transit_gateway": TGW}),
        (f"{ROUTE}.transit_gateway", "transit_gateway_id"),
    ),
    BadInput(
        "routes-on-a-node-prefix-network",
        "routes",
        routes(
            {"destination": "10.200.0.0/16", "transit_gateway_id": TGW},
            ip_management="node_prefix",
        ),
        ("multus.networks[0].routes", "'node_prefix' networks", "ip_management 'whereabouts'"),
    ),
]


def dual_stack(vpc_ipv6: bool = True, **first: Any) -> dict[str, Any]:
    """The seed's networks with the first one changed (ipv6 given there), vpc.ipv6 as given."""
    return config({"vpc": {"ipv6": vpc_ipv6}, "multus": {"networks": networks(**first)}})


NETWORK = "multus.networks[0]"
# Dual-stack networks (docs/network.md, Dual stack): a subnet's IPv6 CIDR is a /64 of the VPC's
# Amazon-provided /56 (AWS::EC2::SubnetCidrBlock), the pod range a block of it that holds none
# of the addresses AWS keeps.
DUAL_STACK = [
    BadInput(
        "vpc-ipv6-in-an-existing-vpc",
        "covered",
        existing_vpc(vpc={"ipv6": True}),
        ("vpc.ipv6", "need a VPC the app creates", "remove ipv6, or existing"),
    ),
    BadInput(
        "ipv6-network-in-an-existing-vpc",
        "covered",
        config({**existing_vpc()["config"], "multus": {"networks": networks(ipv6={})}}),
        (f"{NETWORK} (multus1).ipv6", "vpc.existing names one the app does not own"),
    ),
    BadInput(
        "ipv6-network-without-vpc-ipv6",
        "covered",
        dual_stack(vpc_ipv6=False, ipv6={}),
        (f"{NETWORK} (multus1).ipv6", "no IPv6 block", '"vpc": {"ipv6": true}'),
    ),
    BadInput(
        "ipv6-pod-range-as-large-as-the-64",
        "covered",
        dual_stack(ipv6={"pod_range_prefix_length": 64}),
        (f"{NETWORK}.ipv6.pod_range_prefix_length: 64 bits is below", "65 to 128 bits"),
    ),
    BadInput(
        "ipv6-pod-range-of-half-the-64",
        "covered",
        dual_stack(ipv6={"pod_range_prefix_length": 65}),
        (f"{NETWORK}.ipv6", "addresses AWS keeps", "use /66 or longer"),
    ),
    BadInput(
        "ipv6-pod-range-offset-zero-holds-aws-addresses",
        "covered",
        dual_stack(ipv6={"pod_range_offset": 0}),
        (f"{NETWORK}.ipv6.pod_range_offset: 0 is below what this field takes: at least 1",),
    ),
    BadInput(
        "ipv6-pod-range-offset-past-the-64",
        "covered",
        dual_stack(ipv6={"pod_range_offset": 2**48}),
        (f"{NETWORK}.ipv6", f"pod_range_offset: {2**48} is outside the /64", f"1-{2**48 - 2}"),
    ),
    BadInput(
        "ipv6-pod-range-offset-in-the-last-block",
        "covered",
        dual_stack(ipv6={"pod_range_prefix_length": 66, "pod_range_offset": 3}),
        (f"{NETWORK}.ipv6", "pod_range_offset: 3 is outside the /64", "1-2"),
    ),
    BadInput(
        "ipv6-subnets-sharing-a-64",
        "covered",
        config(
            {
                "vpc": {"ipv6": True},
                "multus": {
                    "networks": [
                        {
                            "name": "multus1",
                            "ipv6": {},
                            "subnets": [
                                {"cidr": "10.0.4.0/25", "reservation": "10.0.4.32/27"},
                                {"cidr": "10.0.5.0/24", "reservation": "10.0.5.32/27"},
                            ],
                        },
                        {
                            "name": "multus2",
                            "ipv6": {},
                            "subnets": [
                                {"cidr": "10.0.4.128/25", "reservation": "10.0.4.160/27"},
                                {"cidr": "10.0.7.0/24", "reservation": "10.0.7.32/27"},
                            ],
                        },
                    ]
                },
            }
        ),
        (
            "multus.networks[1] (multus2).subnets[0].cidr",
            "/64 number 4",
            "multus.networks[0] (multus1).subnets[0]",
            "different /24 blocks",
        ),
    ),
    BadInput(
        "ipv6-with-node-prefix",
        "covered",
        dual_stack(ipv6={}, ip_management="node_prefix"),
        (NETWORK, "ipv6: not available with ip_management 'node_prefix'", "'whereabouts'"),
    ),
    BadInput(
        "ipv6-with-a-static-range",
        "covered",
        config(
            {
                "vpc": {"ipv6": True},
                "multus": {"networks": static_range_networks("10.0.4.48/28", ipv6={})},
            }
        ),
        (NETWORK, "subnets[0].static_range", "IPv4 only", "remove static_range or ipv6"),
    ),
    BadInput(
        "ipv6-rule-on-an-ipv4-network",
        "covered",
        ingress(protocol="all", cidr="2001:db8::/32"),
        (f"{NETWORK}", "security_group.ingress[0].cidr: 2001:db8::/32 is IPv6", '"ipv6": {}'),
    ),
    BadInput(
        "ipv6-rule-with-icmp-for-ipv4",
        "covered",
        ingress(protocol="icmp", cidr="2001:db8::/32"),
        (f"{RULE}.protocol", "matches nothing from 2001:db8::/32", '{"protocol": 58, '),
    ),
    BadInput(
        "ipv6-rule-with-host-bits",
        "covered",
        ingress(protocol="all", cidr="2001:db8::1/32"),
        (f"{RULE}.cidr", "not an IPv6 CIDR block", "for example 2001:db8::/32"),
    ),
]

# The monitoring section (docs/operations.md, Alerts).
MONITORING = [
    BadInput(
        "monitoring-selector-labels-without-the-operator",
        "covered",
        config({"monitoring": {"selector_labels": {"release": "kube-prometheus-stack"}}}),
        ("monitoring", "selector_labels", "prometheus_operator: true"),
    ),
    BadInput(
        "monitoring-selector-label-key-kubernetes-refuses",
        "covered",
        config({"monitoring": {"prometheus_operator": True, "selector_labels": {"a b": "x"}}}),
        ("monitoring", "selector_labels: ", "a b"),
    ),
]

# Issue #38: multus.networks[].mode host-device and enis_per_node.
HOST_DEVICE = [
    BadInput(
        "host-device-network-with-node-prefix",
        "node-pools",
        config({"multus": {"networks": networks(mode="host-device", ip_management="node_prefix")}}),
        (
            "multus.networks[0].ip_management: 'node_prefix' hands out pod addresses",
            "a host-device pod takes the whole ENI and its primary address",
            'or use mode "ipvlan"',
        ),
    ),
    BadInput(
        "host-device-network-with-pod-routed-ranges",
        "node-pools",
        config(
            {
                "multus": {
                    "networks": networks(mode="host-device", pod_routed_ranges=["10.45.0.0/16"])
                }
            }
        ),
        (
            "multus.networks[0].pod_routed_ranges: the pod IP agent",
            "the pod owns its ENI",
            "remove pod_routed_ranges",
        ),
    ),
    BadInput(
        "host-device-network-with-a-static-range",
        "node-pools",
        config(
            {
                "multus": {
                    "networks": networks(
                        mode="host-device",
                        subnets=[
                            {
                                "cidr": "10.0.4.0/24",
                                "reservation": "10.0.4.32/27",
                                "static_range": "10.0.4.48/28",
                            },
                            {"cidr": "10.0.5.0/24", "reservation": "10.0.5.32/27"},
                        ],
                    )
                }
            }
        ),
        ("multus.networks[0].subnets[0].static_range: a host-device pod", "remove static_range"),
    ),
    BadInput(
        "host-device-network-with-an-ipvlan-mode",
        "node-pools",
        config({"multus": {"networks": networks(mode="host-device", ipvlan_mode="l2")}}),
        ("multus.networks[0].ipvlan_mode: a host-device network has no ipvlan", "remove"),
    ),
    BadInput(
        "enis-per-node-on-an-ipvlan-network",
        "node-pools",
        config({"multus": {"networks": networks(enis_per_node=2)}}),
        ("multus.networks[0].enis_per_node: 2 ENIs per node", 'set mode "host-device"'),
    ),
    BadInput(
        "host-device-enis-beyond-the-smallest-size",
        "node-pools",
        config(
            {
                "multus": {"networks": networks(mode="host-device", enis_per_node=3)},
                "node_pools": [{"name": "multus", "instance_cpus": [4, 8]}],
            }
        ),
        ("node_pools[0] (multus).networks: 4 Multus ENIs", "or lower enis_per_node"),
    ),
    BadInput(
        "host-device-slot-names-too-long",
        "node-pools",
        config(
            {
                "multus": {
                    "networks": networks(
                        mode="host-device", enis_per_node=2, interface_name="abcdefghijklmno"
                    )
                }
            }
        ),
        (
            "multus.networks[0].interface_name: with enis_per_node 2 the ENIs are named "
            "abcdefghijklmno0",
            "at most 15 characters",
            "set another interface_name",
        ),
    ),
    BadInput(
        "unknown-network-mode",
        "node-pools",
        config({"multus": {"networks": networks(mode="macvlan")}}),
        ("multus.networks[0].mode", "ipvlan", "host-device"),
    ),
]

# Issues #47 and #53: what Karpenter's controller, not its CRD, makes of a budget
# (config/cron_schedule.py: robfig/cron v3.0.1 as Karpenter v1.14.1 calls it).
FAILS_CLOSED = "allows no disruption of the pool's nodes at all"
BUDGET_SCHEDULES = [
    BadInput(
        "budget-schedule-sunday-as-7",
        "accepted",
        budget("0 4 * * 7", "2h"),
        (
            f"{BUDGET}.schedule: '0 4 * * 7' is no schedule Karpenter can read",
            "day of week 7 is outside 0-6 (Sunday is 0 or SUN; robfig/cron has no 7)",
            FAILS_CLOSED,
        ),
    ),
    BadInput(
        "budget-schedule-hour-26",
        "accepted",
        budget("0 26 * * 0", "2h"),
        (f"{BUDGET}.schedule: '0 26 * * 0'", "hour 26 is outside 0-23 (in UTC)", FAILS_CLOSED),
    ),
    BadInput(
        "budget-schedule-in-words",
        "accepted",
        budget("every sunday at two am", "2h"),
        (
            f"{BUDGET}.schedule: 'every sunday at two am' is no schedule Karpenter can read",
            "minute 'every' is not a number 0-59, a range or *",
            "day of week 'am' is not a number 0-6, a name SUN-SAT, a range or *",
            "Give five fields, minute hour day-of-month month day-of-week",
        ),
    ),
    BadInput(
        "budget-schedule-with-seconds",
        "accepted",
        budget("0 0 4 * * 0", "2h"),
        (
            f"{BUDGET}.schedule: '0 0 4 * * 0' is no schedule Karpenter can read: 6 fields",
            "has no seconds field",
            FAILS_CLOSED,
        ),
    ),
    BadInput(
        "budget-schedule-with-a-time-zone",
        "accepted",
        budget("TZ=Mars/Olympus_Mons 0 4 * * 0", "2h"),
        (
            f"{BUDGET}.schedule: 'TZ=Mars/Olympus_Mons 0 4 * * 0'",
            "Karpenter puts TZ=UTC in front of every schedule",
            "drop TZ=Mars/Olympus_Mons and give the time in UTC",
        ),
    ),
    BadInput(
        "budget-schedule-every-interval",
        "accepted",
        budget("@every 2h     ", "1h"),
        (f"{BUDGET}.schedule: '@every 2h     '", "would apply always or never"),
    ),
    BadInput(
        "budget-schedule-never-fires",
        "accepted",
        budget("0 4 30 2 *", "2h"),
        (
            f"{BUDGET}.schedule: '0 4 30 2 *' never fires",
            "takes the budget as active all the time",
        ),
    ),
    BadInput(
        "budget-schedule-the-api-server-refuses",
        "accepted",
        budget(" @daily", "2h"),
        (f"{BUDGET}.schedule: ' @daily': robfig/cron reads it", "the API server refuses"),
    ),
    BadInput(
        "budget-duration-a-whole-day-of-a-daily-schedule",
        "accepted",
        budget("0 4 * * *", "24h"),
        (
            f"{BUDGET}.duration: 24h is not shorter than 24h, the longest time between two hits "
            "of schedule '0 4 * * *'",
            "it would apply all the time",
            "make duration shorter than 24h (22h leaves a 2h window)",
        ),
    ),
    BadInput(
        "budget-duration-longer-than-a-week",
        "accepted",
        budget("0 4 * * SUN", "170h"),
        (f"{BUDGET}.duration: 170h is not shorter than 168h", "(166h leaves a 2h window)"),
    ),
]


# settings.reservedENIs is global (config/pod_enis.py): a pool of 3-interface sizes next to a
# pool whose nodes attach 3 networks gets no interface for pods on those sizes.
def upf_and_control(control_cpus: list[int]) -> dict[str, Any]:
    third = {
        "name": "multus3",
        "subnets": [
            {"cidr": "10.0.8.0/24", "reservation": "10.0.8.32/27"},
            {"cidr": "10.0.9.0/24", "reservation": "10.0.9.32/27"},
        ],
    }
    return config(
        {
            "multus": {"networks": [*networks(), third]},
            "node_pools": [
                {"name": "upf", "instance_cpus": [4, 8]},
                {"name": "control", "networks": ["multus1"], "instance_cpus": control_cpus},
            ],
        }
    )


RESERVED_ENIS = [
    BadInput(
        "reserved-enis-leave-a-pool-no-pod-interface",
        "accepted",
        upf_and_control([2]),
        (
            "node_pools[1] (control).instance_cpus: m5.large, c5.large, m6i.large, c6i.large, "
            "r6i.large have 3 network interfaces or fewer",
            "settings.reservedENIs 3 takes (the Multus ENIs of node_pools[0] (upf)",
            "gives these sizes 0 pods and never launches them",
            "the pool never gets a node",
            "keep only sizes with more than 3 network interfaces (in c5, c6i, m5, m6i, r6i: "
            "instance_cpus [4, 8, 16, 32, 36, 48])",
            "or attach fewer networks to node_pools[0] (upf)",
        ),
    ),
    BadInput(
        "reserved-enis-leave-some-sizes-of-a-pool-no-pod-interface",
        "accepted",
        upf_and_control([2, 4]),
        (
            "node_pools[1] (control).instance_cpus: m5.large, c5.large",
            "the pool launches only its other sizes",
        ),
    ),
]

# cluster.addon_versions overrides the versions config/eks_addons.py pins: EKS would refuse an
# unknown add-on or a malformed version at deploy time, and a vpc-cni below v1.23.0 deploys but
# loses count of the Multus ENIs (aws/amazon-vpc-cni-k8s#3544).
ADDONS = [
    BadInput(
        "addon-version-of-an-unknown-addon",
        "addons",
        config({"cluster": {"addon_versions": {"vpc_cni": "v1.23.2-eksbuild.1"}}}),
        (
            "cluster.addon_versions: 'vpc_cni' is not an add-on this app pins",
            "did you mean 'vpc-cni'?",
        ),
    ),
    BadInput(
        "addon-version-without-its-eksbuild",
        "addons",
        config({"cluster": {"addon_versions": {"kube-proxy": "1.35.3"}}}),
        (
            "cluster.addon_versions: kube-proxy '1.35.3' is not an EKS add-on version",
            "for example v1.35.3-eksbuild.2",
            "aws eks describe-addon-versions --addon-name kube-proxy",
        ),
    ),
    BadInput(
        "vpc-cni-that-loses-count-of-the-multus-enis",
        "addons",
        config({"cluster": {"addon_versions": {"vpc-cni": "v1.22.4-eksbuild.3"}}}),
        (
            "cluster.addon_versions: vpc-cni v1.22.4-eksbuild.3 is older than v1.23.0",
            "aws/amazon-vpc-cni-k8s issue #3544",
            "for example v1.23.2-eksbuild.1",
        ),
    ),
]

# Issue #53: a value of another type than its field's was coerced ("yes" became true, "32" the
# number 32, 1 true, 8.0 the whole number 8): JSON and YAML values are taken only as their
# field's type (config/coercion.py, STRICT_SECTION); `-c` texts are typed by config/overrides.py.
COERCIONS = [
    BadInput(
        "boolean-given-as-text",
        "accepted",
        config({"monitoring": {"prometheus_operator": "yes"}}),
        (
            "monitoring.prometheus_operator: 'yes' is text",
            "takes true or false",
            "write true without quotes",
        ),
    ),
    BadInput(
        "quoted-yaml-boolean",
        "accepted",
        {"config_file": "quoted.yaml"},
        ("monitoring.prometheus_operator: 'false' is text", "write false without quotes"),
        files={"quoted.yaml": b'monitoring:\n  prometheus_operator: "false"\n'},
    ),
    BadInput(
        "boolean-given-as-a-number",
        "accepted",
        config({"monitoring": {"prometheus_operator": 1}}),
        ("monitoring.prometheus_operator: 1 is a number", "takes true or false"),
    ),
    BadInput(
        "vcpu-count-given-as-text",
        "accepted",
        pool(instance_cpus=[16, "32"]),
        (
            "node_pools[0].instance_cpus[1]: '32' is text",
            "takes a whole number",
            "write 32 without quotes",
        ),
    ),
    BadInput(
        "count-given-as-a-boolean",
        "accepted",
        config({"karpenter": {"replicas": True}}),
        ("karpenter.replicas: true is a boolean", "takes a whole number"),
    ),
    BadInput(
        "count-with-a-decimal-point",
        "accepted",
        # In a file: a context value crosses jsii as a JavaScript number, which has no 30.0.
        {"config_file": "decimal.json"},
        ("cluster.teardown_timeout_minutes: 30.0 has a decimal point", "write 30"),
        files={"decimal.json": b'{"cluster": {"teardown_timeout_minutes": 30.0}}'},
    ),
    BadInput(
        "command-line-boolean-that-is-no-boolean",
        "accepted",
        {"config.monitoring.prometheus_operator": "maybe"},
        ("monitoring.prometheus_operator: 'maybe' is text", "write true or false"),
    ),
    BadInput(
        "every-coerced-value-in-one-run",
        "accepted",
        config(
            {
                "monitoring": {"prometheus_operator": "yes"},
                "node_pools": [{"name": "multus", "instance_cpus": [16, "32"]}],
            }
        ),
        ("monitoring.prometheus_operator: 'yes'", "node_pools[0].instance_cpus[1]: '32'"),
    ),
]

# Issue #53: a trailing space gave "'16 ' is not a valid netmask", and bounds came without their
# unit ("Input should be greater than or equal to 10"): config/messages.py says both.
MESSAGES = [
    BadInput(
        "cidr-with-a-trailing-space",
        "unclear",
        config({"vpc": {"cidr": "10.0.0.0/16 "}}),
        (
            "vpc.cidr: '10.0.0.0/16 ' has surrounding whitespace (at its end)",
            "write '10.0.0.0/16'",
        ),
    ),
    BadInput(
        "list-item-with-a-leading-space",
        "unclear",
        {"config.vpc.public_subnet_cidrs": '[" 10.0.0.0/24", "10.0.1.0/24"]'},
        ("vpc.public_subnet_cidrs[0]: ' 10.0.0.0/24' has surrounding whitespace (at its start)",),
    ),
    BadInput(
        "choice-with-surrounding-whitespace",
        "unclear",
        config({"vpc": {"nat_gateways": " single\t"}}),
        ("vpc.nat_gateways: ' single\\t' has surrounding whitespace (at its start and its end)",),
    ),
    BadInput(
        "teardown-bound-below-its-minimum",
        "unclear",
        {"config.cluster.teardown_timeout_minutes": "5"},
        (
            "cluster.teardown_timeout_minutes: 5 minutes is below what this field takes",
            "at least 10 minutes",
        ),
    ),
    BadInput(
        "system-disk-below-its-minimum",
        "unclear",
        {"config.cluster.system_node_group.root_volume_gib": "8"},
        ("cluster.system_node_group.root_volume_gib: 8 GiB is below", "at least 20 GiB"),
    ),
    BadInput(
        "connection-tracking-timeout-below-ec2s-minimum",
        "unclear",
        config({"multus": {"networks": networks(connection_tracking={"udp_timeout": 1})}}),
        (
            "multus.networks[0].connection_tracking.udp_timeout: 1 second is below",
            "30 to 60 seconds",
        ),
    ),
    BadInput(
        "mtu-above-the-vpcs",
        "unclear",
        config({"multus": {"networks": networks(mtu=9500)}}),
        ("multus.networks[0].mtu: 9500 bytes is above", "1280 to 9001 bytes"),
    ),
    BadInput(
        "negative-hugepages",
        "unclear",
        pool(node_profile={"hugepages_2mi": -1}),
        ("node_pools[0].node_profile.hugepages_2mi: -1 hugepages is below", "at least 0"),
    ),
    BadInput(
        "weight-without-a-unit",
        "unclear",
        pool(weight=0),
        ("node_pools[0].weight: 0 is below what this field takes: 1 to 100",),
    ),
]

# Issue #53: warnings are acknowledged by ID (config/synth_warnings.py).
WARNINGS = [
    BadInput(
        "acknowledged-warning-id-misspelled",
        "warnings",
        config({"acknowledged_warnings": ["images-pinned-by-tags"]}),
        (
            "acknowledged_warnings[0]: 'images-pinned-by-tags' is not a warning ID",
            "did you mean 'images-pinned-by-tag'?",
            "the known ones are kubernetes-version-without-support-dates, ",
            "no-cluster-admins",
        ),
    ),
    BadInput(
        "acknowledged-warning-id-unknown",
        "warnings",
        {"config.acknowledged_warnings": '["no-cluster-admins", "everything"]'},
        ("acknowledged_warnings[1]: 'everything' is not a warning ID; the known ones are",),
    ),
]

CASES = (
    ACCEPTED
    + TRACEBACKS
    + UNCLEAR
    + COVERED
    + NODE_POOLS
    + NODE_PROFILE
    + SECURITY_GROUP_RULES
    + EXISTING_VPC
    + ROUTES
    + DUAL_STACK
    + MONITORING
    + HOST_DEVICE
    + BUDGET_SCHEDULES
    + RESERVED_ENIS
    + ADDONS
    + COERCIONS
    + MESSAGES
    + WARNINGS
)
# Run as a real `python app.py` too: exit status and stderr end to end.
IN_A_PROCESS = {
    "config-context-value-not-an-object",
    "conflicting-dotted-overrides",
    "non-utf8-yaml-file",
}


def case_context(case: BadInput, directory: Path) -> dict[str, Any]:
    for name, content in case.files.items():
        (directory / name).write_bytes(content)
    context = dict(case.context)
    if "config_file" in context and case.files:
        context["config_file"] = str(directory / context["config_file"])
    return cdk_json_context(**context)


def run_main_in_process(
    context: dict[str, Any], outdir: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[object, str]:
    with pytest.raises(SystemExit) as exited:
        app_module.main(cdk.App(context=context, outdir=str(outdir)))
    return exited.value.code, capsys.readouterr().err


def run_app_process(context: dict[str, Any], outdir: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps(context),
        "CDK_OUTDIR": str(outdir),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    return subprocess.run(
        [sys.executable, "app.py"], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )


def assert_explained(case: BadInput, stderr: str) -> None:
    assert "Traceback" not in stderr
    for fragment in case.expected:
        assert fragment in stderr, f"{fragment!r} missing from:\n{stderr}"


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_stops_with_the_field_and_the_fix(
    case: BadInput, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stderr = run_main_in_process(case_context(case, tmp_path), tmp_path / "out", capsys)
    assert code == 1
    assert_explained(case, stderr)
    assert not list(tmp_path.glob("out/**/*.template.json"))


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c.id in IN_A_PROCESS],
    ids=[c.id for c in CASES if c.id in IN_A_PROCESS],
)
def test_bad_input_exits_1_without_traceback_from_the_cli_entry(
    case: BadInput, tmp_path: Path
) -> None:
    result = run_app_process(case_context(case, tmp_path), tmp_path / "out")
    assert result.returncode == 1, result.stderr
    assert_explained(case, result.stderr)


def test_every_class_of_the_issue_is_covered() -> None:
    counts = {kind: sum(case.kind == kind for case in CASES) for kind in {c.kind for c in CASES}}
    # The issue found 13 accepted, 3 tracebacks and 22 unclear messages; several of its
    # findings have more than one case here.
    assert counts["accepted"] >= 13
    assert counts["traceback"] >= 3
    assert counts["unclear"] >= 22
    assert len({case.id for case in CASES}) == len(CASES)


def test_pipeline_sample_is_the_base_of_the_pipeline_cases() -> None:
    assert load_config(config(PIPELINE_SAMPLE), REPO).pipeline is not None
