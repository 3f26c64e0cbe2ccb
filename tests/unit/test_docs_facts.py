"""The docs state what the default synth deploys: IMDS hop limits, the managed policies of each
role, the Karpenter charts, the AMI type and the container images.

Each check reads the statement from the page (so a page that says hop limit 2, or lists
AmazonEKS_CNI_Policy on a node role, fails) and compares it with the synthesized templates."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, SynthesizedApp
from tests.helpers import logical_id, resources
from tests.unit.stacks.test_cluster_workloads import by_kind
from tests.unit.stacks.test_images import workload_images

DOCS = REPO / "docs"
PAGES = [*sorted(DOCS.glob("*.md")), REPO / "README.md"]
# A bullet ("- **Title**"), a table row or a heading starts a section of a page.
SECTION_START = re.compile(r"^(?:- \*\*|\| |#)", re.MULTILINE)
HOP_LIMIT = re.compile(r"hop limit (\d+)", re.IGNORECASE)
# AWS managed policy names as the pages write them (AmazonEKS_CNI_Policy,
# AmazonSSMManagedInstanceCore, AWSLambdaBasicExecutionRole, ...).
MANAGED_POLICY = re.compile(r"\b(?:Amazon|AWS)[A-Za-z0-9_]*(?:Policy|Role|Core|Only)\b")
AWS_MANAGED_POLICY_ARN = re.compile(r":iam::aws:policy/(?:[\w-]+/)*([\w-]+)")
AMI_TYPE = re.compile(r"`((?:AL2023|AL2|BOTTLEROCKET|WINDOWS)_\w+)`")

SYSTEM_NODE_GROUP = ("cluster-and-karpenter.md", "- **System node group**")
KARPENTER_IAM = ("cluster-and-karpenter.md", "- **Karpenter IAM**")
ADD_ONS = ("cluster-and-karpenter.md", "- **Add-ons**")
HELM = ("cluster-and-karpenter.md", "- **Helm**")
CRDS = ("cluster-and-karpenter.md", "- **CRDs and upgrades**")
NODE_POOL_CHART = ("in-cluster-components.md", "| `charts/karpenter_node_pool.py`")


def section(page: str, start: str) -> str:
    """The section of docs/<page> that begins with `start`, whitespace collapsed."""
    text = (DOCS / page).read_text()
    assert start in text, f"docs/{page} has no section starting {start!r}"
    begin = text.index(start)
    following = SECTION_START.search(text, begin + len(start))
    return " ".join(text[begin : following.start() if following else len(text)].split())


def stated_policies(text: str, role: str) -> list[str]:
    """The policies a section lists in parentheses after `role`, e.g. "node role (A, B)"."""
    match = re.search(rf"{role} \(([^)]*)\)", text)
    assert match, f"no '{role} (...)' list in: {text[:80]}..."
    return sorted(name.strip() for name in match.group(1).split(","))


@pytest.fixture(scope="module")
def cluster(default_app: SynthesizedApp) -> dict[str, Any]:
    return default_app.template_json(default_app.stage.cluster)


@pytest.fixture(scope="module")
def templates(default_app: SynthesizedApp) -> list[dict[str, Any]]:
    stage = default_app.stage
    return [default_app.template_json(stack) for stack in (stage.network, stage.cluster)]


def launch_template_hop_limits(template: dict[str, Any]) -> set[int]:
    return {
        r["Properties"]["LaunchTemplateData"]["MetadataOptions"]["HttpPutResponseHopLimit"]
        for r in resources(template, "AWS::EC2::LaunchTemplate").values()
    }


def node_class_hop_limits(template: dict[str, Any]) -> set[int]:
    return {
        node_class["spec"]["metadataOptions"]["httpPutResponseHopLimit"]
        for node_class in by_kind(template, "EC2NodeClass")
    }


def attached_policies(role: dict[str, Any]) -> list[str]:
    """AWS managed policy names on a role, conditional ones (Fn::If) included."""
    arns = str(role["Properties"].get("ManagedPolicyArns", []))
    return sorted(AWS_MANAGED_POLICY_ARN.findall(arns))


@pytest.mark.parametrize(
    ("where", "hop_limits"),
    [
        (SYSTEM_NODE_GROUP, launch_template_hop_limits),
        (KARPENTER_IAM, node_class_hop_limits),
        (NODE_POOL_CHART, node_class_hop_limits),
    ],
    ids=["system-node-group", "karpenter-nodes", "node-pool-chart"],
)
def test_each_stated_hop_limit_is_what_its_nodes_get(
    cluster: dict[str, Any], where: tuple[str, str], hop_limits: Any
) -> None:
    """EC2 User Guide, "Instance metadata access considerations": with hop limit 1 the IMDSv2
    answer does not reach a container, one hop further than the host; the page must say which
    limit each kind of node has."""
    stated = {int(n) for n in HOP_LIMIT.findall(section(*where))}
    assert stated, f"{where} states no hop limit"
    assert stated == hop_limits(cluster)


def test_no_page_states_a_hop_limit_the_synth_does_not_set(templates: list[dict[str, Any]]) -> None:
    synthesized = set().union(
        *(launch_template_hop_limits(t) | node_class_hop_limits(t) for t in templates)
    )
    stated = {
        f"{page.relative_to(REPO)}: hop limit {n}"
        for page in PAGES
        for n in HOP_LIMIT.findall(page.read_text())
        if int(n) not in synthesized
    }
    assert stated == set()


@pytest.mark.parametrize(
    ("where", "role", "logical_id_prefix"),
    [
        (SYSTEM_NODE_GROUP, "node role", "SystemNodesNodeRole"),
        (KARPENTER_IAM, "node role", "KarpenterNodeRole"),
        (ADD_ONS, "own role", "EksVpcCniRole"),
    ],
    ids=["system-nodes", "karpenter-nodes", "vpc-cni"],
)
def test_each_roles_stated_policies_are_its_attached_ones(
    cluster: dict[str, Any], where: tuple[str, str], role: str, logical_id_prefix: str
) -> None:
    """Karpenter v1.14.1's reference node role (shared/reference/karpenter-v1.14.1/
    cloudformation.yaml, KarpenterNodeRole) carries AmazonEKS_CNI_Policy; ours moves it to the
    VPC CNI's own Pod Identity role, and the page must not list it on a node role."""
    roles = resources(cluster, "AWS::IAM::Role")
    attached = attached_policies(roles[logical_id(cluster, "AWS::IAM::Role", logical_id_prefix)])
    assert stated_policies(section(*where), role) == attached


def test_every_managed_policy_a_page_names_is_attached_to_a_role(
    templates: list[dict[str, Any]],
) -> None:
    attached = {
        name
        for template in templates
        for role in resources(template, "AWS::IAM::Role").values()
        for name in attached_policies(role)
    }
    unattached = {
        f"{page.relative_to(REPO)}: {name}"
        for page in PAGES
        for name in MANAGED_POLICY.findall(page.read_text())
        if name not in attached
    }
    assert unattached == set()


def test_the_stated_system_node_ami_type_is_the_node_groups(cluster: dict[str, Any]) -> None:
    (nodegroup,) = resources(cluster, "AWS::EKS::Nodegroup").values()
    assert AMI_TYPE.findall(section(*SYSTEM_NODE_GROUP)) == [nodegroup["Properties"]["AmiType"]]


def test_the_karpenter_charts_come_from_the_stated_repository_at_the_stated_version(
    cluster: dict[str, Any],
) -> None:
    """Helm's OCI support: a chart `oci://<registry>/<path>` is `<repository>/<chart name>`."""
    helm = re.search(
        r"chart `(?P<chart>[\w-]+)` `karpenter.version` \(default (?P<version>[\d.]+)\) "
        r"from `(?P<repository>oci://[^`]+)`",
        section(*HELM),
    )
    assert helm, "the Helm bullet no longer names chart, default version and repository"
    crd_chart = re.search(
        r"the `([\w-]+)` chart is installed first, at the same version", section(*CRDS)
    )
    assert crd_chart, "the CRDs bullet no longer names the CRD chart"
    releases = {
        r["Properties"]["Chart"]: (r["Properties"]["Repository"], r["Properties"]["Version"])
        for r in resources(cluster, "Custom::AWSCDK-EKS-HelmChart").values()
    }
    for chart in (helm["chart"], crd_chart.group(1)):
        assert releases[chart] == (f"{helm['repository']}/{chart}", helm["version"])


def default_images_rows(page: Path) -> dict[str, str]:
    """images.md's table of default images: config key -> its default image cell, for images
    the default app deploys (not the optional charts' and not those a Helm chart picks)."""
    lines = page.read_text().splitlines()
    table_header = "| config key | default image |"
    (header,) = [n for n, line in enumerate(lines) if line.startswith(table_header)]
    table = itertools.takewhile(lambda line: line.startswith("|"), lines[header + 2 :])
    rows = [line for line in table if line.startswith("| `images.")]
    return {
        row.split("`")[1]: row.split(" | ")[1]
        for row in rows
        if "optional" not in row and not row.split(" | ")[1].startswith("chart default")
    }


def image_pattern(stated: str) -> re.Pattern[str]:
    """A stated image with its <placeholders> (account, region) matching any value."""
    parts = re.split(r"<[^>]+>", stated)
    return re.compile("[^/:@]+".join(re.escape(part) for part in parts))


def test_images_md_lists_exactly_the_images_the_default_app_runs(cluster: dict[str, Any]) -> None:
    stated = {
        key: image_pattern(re.findall(r"`([^`]+)`", cell)[0])
        for key, cell in default_images_rows(DOCS / "images.md").items()
    }
    running = workload_images(cluster)
    assert {
        key: sorted(i for i in running if pattern.fullmatch(i)) != []
        for key, pattern in stated.items()
    } == dict.fromkeys(stated, True)
    assert {i for i in running if not any(p.fullmatch(i) for p in stated.values())} == set()
