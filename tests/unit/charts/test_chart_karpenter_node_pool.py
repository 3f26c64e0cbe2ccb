from __future__ import annotations

import copy
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cdk8s
import jsonschema
import pytest

from charts.karpenter_node_pool import DisruptionBudget, KarpenterNodePoolChart
from config import parse_config
from config.node_labels import NodeTaint
from stacks.cluster_props import node_pool_props as cluster_node_pool_props

THREE_ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")


def synth(helpers: SimpleNamespace, **overrides: object) -> dict[str, dict[str, Any]]:
    chart = KarpenterNodePoolChart(
        cdk8s.Testing.app(), "node-pool", [helpers.node_pool_props(**overrides)]
    )
    return {manifest["kind"]: manifest for manifest in cdk8s.Testing.synth(chart)}


@pytest.fixture(scope="module")
def seed(seed_manifests: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {m["kind"]: m for m in seed_manifests["karpenter-node-pool"]}


@pytest.fixture(scope="module")
def seed_node_pool_file(helpers: SimpleNamespace, reference_dir: Path) -> dict[str, dict[str, Any]]:
    path = reference_dir / "seed-karpenter-with-multus-on-eks" / "config" / "nodepool.yaml"
    return {m["kind"]: m for m in helpers.load_yaml_documents(path)}


def requirement(node_pool: dict[str, Any], key: str) -> dict[str, Any]:
    found: dict[str, Any]
    (found,) = [r for r in node_pool["spec"]["template"]["spec"]["requirements"] if r["key"] == key]
    return found


def test_node_pool_carries_the_seed_scheduling_contract(seed: dict[str, dict[str, Any]]) -> None:
    template = seed["NodePool"]["spec"]["template"]
    # The seed's label, plus one per network its nodes attach (pods select those).
    assert template["metadata"]["labels"] == {
        "karpenter-node": "true",
        "multus.network/multus1": "true",
        "multus.network/multus2": "true",
    }
    assert template["spec"]["startupTaints"] == [
        {"key": "multus/not-ready", "value": "true", "effect": "NoSchedule"}
    ]
    assert requirement(seed["NodePool"], "karpenter-node") == {
        "key": "karpenter-node",
        "operator": "Exists",
    }


def test_node_pool_matches_the_seed_apart_from_the_zones(
    seed: dict[str, dict[str, Any]], seed_node_pool_file: dict[str, dict[str, Any]]
) -> None:
    ours, theirs = seed["NodePool"]["spec"], seed_node_pool_file["NodePool"]["spec"]
    zone = "topology.kubernetes.io/zone"

    def without_zone(spec: dict[str, Any]) -> list[dict[str, Any]]:
        return [r for r in spec["template"]["spec"]["requirements"] if r["key"] != zone]

    assert without_zone(ours) == without_zone(theirs)
    # The seed's labels, and ours adds the labels of the networks its nodes attach.
    seed_labels = theirs["template"]["metadata"]["labels"]
    assert seed_labels.items() <= ours["template"]["metadata"]["labels"].items()
    assert {k for k in ours["template"]["metadata"]["labels"] if k not in seed_labels} == {
        "multus.network/multus1",
        "multus.network/multus2",
    }
    assert ours["template"]["spec"]["startupTaints"] == theirs["template"]["spec"]["startupTaints"]
    for field in ("disruption", "limits", "weight"):
        assert ours[field] == theirs[field], field


def test_node_pool_limits_disruption_and_weight(seed: dict[str, dict[str, Any]]) -> None:
    spec = seed["NodePool"]["spec"]
    assert spec["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "120s"}
    assert spec["limits"] == {"cpu": "500", "memory": "500Gi"}
    assert spec["weight"] == 10
    assert requirement(seed["NodePool"], "karpenter.sh/capacity-type")["values"] == ["on-demand"]
    assert requirement(seed["NodePool"], "karpenter.k8s.aws/instance-family")["values"] == [
        "m5",
        "c5",
        "m6i",
        "c6i",
        "r6i",
    ]


def test_expiry_consolidation_and_budgets_reach_the_node_pool_as_written(
    helpers: SimpleNamespace,
) -> None:
    """spec.template.spec.expireAfter and spec.disruption of karpenter.sh/v1 (Karpenter v1.14
    karpenter.sh_nodepools.yaml); a budget carries only the fields it sets, and no budget at
    all leaves Karpenter's default (10% of the nodes)."""
    budgets = [
        DisruptionBudget(nodes="0", reasons=["Drifted"], schedule="0 4 * * *", duration="22h"),
        DisruptionBudget(nodes="1"),
    ]
    node_pool = synth(
        helpers,
        expire_after="Never",
        consolidation_policy="WhenEmptyOrUnderutilized",
        budgets=budgets,
    )["NodePool"]["spec"]

    assert node_pool["template"]["spec"]["expireAfter"] == "Never"
    assert node_pool["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "120s",
        "budgets": [
            {"nodes": "0", "reasons": ["Drifted"], "schedule": "0 4 * * *", "duration": "22h"},
            {"nodes": "1"},
        ],
    }
    assert "budgets" not in synth(helpers)["NodePool"]["spec"]["disruption"]
    assert synth(helpers)["NodePool"]["spec"]["template"]["spec"]["expireAfter"] == "720h"


def test_zones_come_from_props(helpers: SimpleNamespace) -> None:
    node_pool = synth(helpers, zones=THREE_ZONES)["NodePool"]
    assert requirement(node_pool, "topology.kubernetes.io/zone") == {
        "key": "topology.kubernetes.io/zone",
        "operator": "In",
        "values": list(THREE_ZONES),
    }


def test_node_pool_launches_its_node_class(seed: dict[str, dict[str, Any]]) -> None:
    assert seed["NodePool"]["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": seed["EC2NodeClass"]["metadata"]["name"],
    }


def test_node_class_requires_imdsv2_out_of_reach_of_pods(seed: dict[str, dict[str, Any]]) -> None:
    # Hop limit 1: a pod's request crosses one more hop than the host's and is dropped.
    assert seed["EC2NodeClass"]["spec"]["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
    }


def test_node_class_root_volume_is_encrypted_gp3(helpers: SimpleNamespace) -> None:
    (mapping,) = synth(helpers, root_volume_size="50Gi")["EC2NodeClass"]["spec"][
        "blockDeviceMappings"
    ]
    assert mapping["deviceName"] == "/dev/xvda"
    assert mapping["rootVolume"] is True
    assert mapping["ebs"] == {
        "volumeSize": "50Gi",
        "volumeType": "gp3",
        "encrypted": True,
        "deleteOnTermination": True,
    }


def test_node_class_ami_is_a_pinned_al2023_release(seed: dict[str, dict[str, Any]]) -> None:
    (term,) = seed["EC2NodeClass"]["spec"]["amiSelectorTerms"]
    assert re.fullmatch(r"al2023@v\d{8}", term["alias"])


def test_node_class_selects_only_the_tagged_node_subnets(helpers: SimpleNamespace) -> None:
    spec = synth(
        helpers,
        subnet_selector_terms=[{"tags": {"karpenter.sh/discovery": "prod-cluster"}}],
        security_group_selector_tags={"aws:cloudformation:logical-id": "NodeSg"},
    )["EC2NodeClass"]["spec"]
    assert spec["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "prod-cluster"}}]
    assert spec["securityGroupSelectorTerms"] == [
        {"tags": {"aws:cloudformation:logical-id": "NodeSg"}}
    ]


def test_tokens_and_user_data_pass_through_verbatim(helpers: SimpleNamespace) -> None:
    user_data = 'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n--//--\n'
    spec = synth(
        helpers,
        node_role_name=helpers.token,
        user_data=user_data,
        tags={"cluster": helpers.token},
    )["EC2NodeClass"]["spec"]
    assert spec["role"] == helpers.token
    assert spec["userData"] == user_data
    assert spec["tags"] == {"cluster": helpers.token}


def test_user_data_and_tags_are_optional(helpers: SimpleNamespace) -> None:
    spec = synth(helpers, user_data=None, tags={})["EC2NodeClass"]["spec"]
    assert "userData" not in spec
    assert "tags" not in spec


def test_termination_grace_period_bounds_every_drain(
    helpers: SimpleNamespace, upstream_crds: dict[str, dict[str, Any]]
) -> None:
    bounded = synth(helpers, termination_grace_period="15m")["NodePool"]
    assert bounded["spec"]["template"]["spec"]["terminationGracePeriod"] == "15m"
    schema = helpers.crd_schema(upstream_crds["karpenter.sh/NodePool"], "v1")
    helpers.validate_custom_object(bounded, schema)
    unbounded = synth(helpers, termination_grace_period=None)["NodePool"]
    assert "terminationGracePeriod" not in unbounded["spec"]["template"]["spec"]


def test_every_pool_gets_its_own_node_pool_and_node_class(helpers: SimpleNamespace) -> None:
    upf = helpers.node_pool_props(
        node_pool_name="upf",
        node_class_name="upf",
        labels={"multus.network/n3": "true", "example.com/nf": "upf"},
        taints=[NodeTaint(key="example.com/upf", value="true", effect="NoSchedule")],
        weight=20,
        user_data="upf user-data",
    )
    plain = helpers.node_pool_props(
        node_pool_name="plain", node_class_name="plain", startup_taint=None, user_data=None
    )
    chart = KarpenterNodePoolChart(cdk8s.Testing.app(), "node-pool", [upf, plain])
    objects = {(m["kind"], m["metadata"]["name"]): m for m in cdk8s.Testing.synth(chart)}
    assert set(objects) == {
        ("EC2NodeClass", "upf"),
        ("NodePool", "upf"),
        ("EC2NodeClass", "plain"),
        ("NodePool", "plain"),
    }
    upf_pool = objects[("NodePool", "upf")]["spec"]
    assert upf_pool["template"]["spec"]["nodeClassRef"]["name"] == "upf"
    assert upf_pool["template"]["metadata"]["labels"] == {
        "karpenter-node": "true",
        "multus.network/n3": "true",
        "example.com/nf": "upf",
    }
    assert upf_pool["template"]["spec"]["taints"] == [
        {"key": "example.com/upf", "value": "true", "effect": "NoSchedule"}
    ]
    assert upf_pool["weight"] == 20
    assert objects[("EC2NodeClass", "upf")]["spec"]["userData"] == "upf user-data"
    # A pool without Multus networks: no startup taint nobody would lift, no user-data.
    plain_pool = objects[("NodePool", "plain")]["spec"]["template"]["spec"]
    assert "startupTaints" not in plain_pool
    assert "taints" not in plain_pool
    assert "userData" not in objects[("EC2NodeClass", "plain")]["spec"]


def test_a_taint_without_value_is_rendered_without_one_and_the_crd_takes_it(
    helpers: SimpleNamespace, upstream_crds: dict[str, dict[str, Any]]
) -> None:
    """core/v1 Taint's value is optional, and the config takes a taint without one; the
    NodePool CRD's pattern for taints[].value and startupTaints[].value (Karpenter v1.14.1)
    needs a character, so `value: ""` would be refused by the API server."""
    raw = {
        "node_pools": [
            {"name": "upf", "taints": [{"key": "example.net/dataplane", "effect": "NoExecute"}]}
        ]
    }
    config = parse_config(raw)
    from_config = cluster_node_pool_props(
        config, config.node_pools[0], node_role_name=helpers.token, user_data="user-data"
    )
    node_pool = synth(
        helpers,
        taints=from_config.taints,
        startup_taint=NodeTaint(key="example.net/starting", value="", effect="NoSchedule"),
    )["NodePool"]
    spec = node_pool["spec"]["template"]["spec"]
    assert spec["taints"] == [{"key": "example.net/dataplane", "effect": "NoExecute"}]
    assert spec["startupTaints"] == [{"key": "example.net/starting", "effect": "NoSchedule"}]
    schema = helpers.crd_schema(upstream_crds["karpenter.sh/NodePool"], "v1")
    helpers.validate_custom_object(node_pool, schema)
    with_empty_value = copy.deepcopy(node_pool)
    with_empty_value["spec"]["template"]["spec"]["taints"][0]["value"] = ""
    with pytest.raises(jsonschema.ValidationError, match="does not match"):
        helpers.validate_custom_object(with_empty_value, schema)


@pytest.mark.parametrize(
    ("profile", "kubelet"),
    [
        ({"cpu_manager": "static", "reserved_cpus": 2}, {"systemReserved": {"cpu": "2"}}),
        ({"cpu_manager": "static", "reserved_cpus": "0,2-3"}, {"systemReserved": {"cpu": "3"}}),
        ({"hugepages_2mi": 512}, None),
    ],
    ids=["a-count", "a-list", "no-reserved-cpus"],
)
def test_the_node_class_tells_karpenter_the_cpus_the_kubelet_reserves(
    helpers: SimpleNamespace,
    upstream_crds: dict[str, dict[str, Any]],
    profile: dict[str, Any],
    kubelet: dict[str, Any] | None,
) -> None:
    """Karpenter v1.14 takes no reservedSystemCPUs: without spec.kubelet.systemReserved it
    counts a 4-vCPU node's 3,920m where a kubelet keeping 2 CPUs allocates 2,000m (issue #47;
    the Karpenter box's test_capacity.py shows it with the real controller). The kubelet
    replaces system-reserved CPU by the reserved CPUs' count, so the two agree."""
    raw = {"node_pools": [{"name": "upf", "instance_cpus": [4, 8], "node_profile": profile}]}
    config = parse_config(raw)
    props = cluster_node_pool_props(
        config, config.node_pools[0], node_role_name=helpers.token, user_data="user-data"
    )
    node_class = synth(helpers, kubelet=props.kubelet)["EC2NodeClass"]
    assert node_class["spec"].get("kubelet") == kubelet
    schema = helpers.crd_schema(upstream_crds["karpenter.k8s.aws/EC2NodeClass"], "v1")
    helpers.validate_custom_object(node_class, schema)
