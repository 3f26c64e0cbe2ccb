"""The charts as deployed through the cluster: order, derived values, and schema validity."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from aws_cdk.assertions import Annotations, Match
from jsonschema import Draft202012Validator

from config.node_bootstrap_plan import READY_MARKER_DIR
from testing_support.crd_rules import rule_violations
from tests.conftest import (
    REPO,
    ROUTED_NETWORK_ROUTES,
    SynthesizedApp,
    cdk_json_context,
    synthesize,
)
from tests.helpers import TOKEN, joined_text, karpenter_crd_files, shared_reference


def manifests(template: dict[str, Any]) -> dict[str, tuple[list[dict[str, Any]], list[str]]]:
    """Logical ID -> (objects, DependsOn) of every kubectl manifest in the template."""
    found = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "Custom::AWSCDK-EKS-KubernetesResource":
            objects = json.loads(joined_text(resource["Properties"]["Manifest"]))
            found[logical_id] = (objects, resource.get("DependsOn", []))
    return found


def by_kind(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [o for objects, _ in manifests(template).values() for o in objects if o["kind"] == kind]


def manifest_with(template: dict[str, Any], kind: str) -> tuple[str, list[str]]:
    (match,) = [
        (logical_id, depends_on)
        for logical_id, (objects, depends_on) in manifests(template).items()
        if any(o["kind"] == kind for o in objects)
    ]
    return match


def helm_release(template: dict[str, Any], chart: str) -> str:
    logical_id: str
    (logical_id,) = [
        key
        for key, r in template["Resources"].items()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and r["Properties"]["Chart"] == chart
    ]
    return logical_id


@pytest.fixture(scope="module")
def cluster(default_app: SynthesizedApp) -> dict[str, Any]:
    return default_app.template_json(default_app.stage.cluster)


def manifests_with(template: dict[str, Any], kind: str) -> dict[str, list[dict[str, Any]]]:
    """Logical ID -> objects, of every manifest holding an object of `kind`."""
    return {
        logical_id: objects
        for logical_id, (objects, _) in manifests(template).items()
        if any(o["kind"] == kind for o in objects)
    }


def test_crds_before_their_custom_resources(cluster: dict[str, Any]) -> None:
    multus_id, _ = manifest_with_multus(cluster)
    resources = manifests(cluster)
    nad_manifests = manifests_with(cluster, "NetworkAttachmentDefinition")
    assert len(nad_manifests) == 2  # one per network
    for logical_id in nad_manifests:
        assert multus_id in resources[logical_id][1]
    _, node_pool_depends_on = manifest_with(cluster, "NodePool")
    assert helm_release(cluster, "karpenter") in node_pool_depends_on


def test_each_network_has_a_manifest_of_its_own(cluster: dict[str, Any]) -> None:
    """So that removing a network deletes its NADs (CloudFormation deletes the resource)."""
    found = {
        logical_id: sorted(o["metadata"]["name"] for o in objects)
        for logical_id, objects in manifests_with(cluster, "NetworkAttachmentDefinition").items()
    }
    assert sorted(found.values()) == [
        ["multus1-us-west-2a", "multus1-us-west-2b"],
        ["multus2-us-west-2a", "multus2-us-west-2b"],
    ]
    for logical_id, names in found.items():
        network = names[0].split("-")[0]
        assert logical_id.startswith(f"EksClusternetworkattachments{network}")


def manifest_with_multus(template: dict[str, Any]) -> tuple[str, list[str]]:
    (match,) = [
        (logical_id, depends_on)
        for logical_id, (objects, depends_on) in manifests(template).items()
        if any(
            o["kind"] == "CustomResourceDefinition"
            and o["metadata"]["name"] == "network-attachment-definitions.k8s.cni.cncf.io"
            for o in objects
        )
    ]
    return match


def test_seed_nads_match_the_seed(cluster: dict[str, Any]) -> None:
    ranges = {}
    for nad in by_kind(cluster, "NetworkAttachmentDefinition"):
        config = json.loads(nad["spec"]["config"])
        ipvlan, sbr, pod_ip = config["plugins"]
        assert (ipvlan["type"], ipvlan["mode"], sbr["type"]) == ("ipvlan", "l2", "sbr")
        assert (pod_ip["type"], pod_ip["master"]) == ("multus-pod-ip", ipvlan["master"])
        ranges[nad["metadata"]["name"]] = (
            ipvlan["master"],
            ipvlan["ipam"]["range"],
            ipvlan["ipam"]["gateway"],
            pod_ip["mainTableSubnet"],  # the subnet back in the pod's main table, after sbr
        )
    assert ranges == {
        "multus1-us-west-2a": ("multus1", "10.0.4.32-10.0.4.63/24", "10.0.4.1", "10.0.4.0/24"),
        "multus1-us-west-2b": ("multus1", "10.0.5.32-10.0.5.63/24", "10.0.5.1", "10.0.5.0/24"),
        "multus2-us-west-2a": ("multus2", "10.0.6.32-10.0.6.63/24", "10.0.6.1", "10.0.6.0/24"),
        "multus2-us-west-2b": ("multus2", "10.0.7.32-10.0.7.63/24", "10.0.7.1", "10.0.7.0/24"),
    }


def nad_routes(template: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """NAD name -> (its IPAM routes, the pod IP plugin's mainTableRoutes)."""
    routes = {}
    for nad in by_kind(template, "NetworkAttachmentDefinition"):
        ipvlan, _, pod_ip = json.loads(nad["spec"]["config"])["plugins"]
        routes[nad["metadata"]["name"]] = (
            ipvlan["ipam"].get("routes"),
            pod_ip.get("mainTableRoutes"),
        )
    return routes


def test_every_nad_of_a_routed_network_routes_its_destinations_over_net1(
    routes_app: SynthesizedApp,
) -> None:
    """Whereabouts (k8snetworkplumbingwg/whereabouts v0.9.4, cmd/whereabouts.go cmdAdd:
    result.Routes = Config.Routes) and static IPAM hand their config's routes to ipvlan, which
    adds them on net1 via their gw; sbr (containernetworking/plugins plugins/meta/sbr, doRoutes)
    moves them into the pod address's table, and multus-pod-ip's mainTableRoutes put them back
    into the main table, so the pod also initiates over net1. gw: the subnet's VPC router, the
    first host (VPC user guide, subnet CIDR blocks: the base address plus one)."""
    routes = nad_routes(routes_app.template_json(routes_app.stage.cluster))

    destinations = [route["destination"] for route in ROUTED_NETWORK_ROUTES]
    via_2a = [{"dst": destination, "gw": "10.0.4.1"} for destination in destinations]
    via_2b = [{"dst": destination, "gw": "10.0.5.1"} for destination in destinations]
    assert routes == {
        "multus1-us-west-2a": (via_2a, via_2a),
        "multus1-us-west-2a-static": (
            [{"dst": "0.0.0.0/0", "gw": "10.0.4.1"}, *via_2a],  # static IPAM has no gateway
            via_2a,
        ),
        "multus1-us-west-2b": (via_2b, via_2b),
        "multus2-us-west-2a": (None, None),
        "multus2-us-west-2b": (None, None),
    }


def test_the_seeds_nads_carry_no_routes(cluster: dict[str, Any]) -> None:
    assert set(nad_routes(cluster).values()) == {(None, None)}


def nad_mtus(template: dict[str, Any]) -> dict[str, int]:
    """NAD name -> the MTU its ipvlan gives the pod's interface."""
    return {
        nad["metadata"]["name"]: json.loads(nad["spec"]["config"])["plugins"][0]["mtu"]
        for nad in by_kind(template, "NetworkAttachmentDefinition")
    }


def test_each_nad_gives_its_pods_the_mtu_of_its_networks_narrowest_path(
    cluster: dict[str, Any], routes_app: SynthesizedApp
) -> None:
    """The seed's networks stay in the VPC: jumbo frames (9001). multus1 of the routes app also
    routes through a VPN gateway: 1446, the largest packet a Site-to-Site VPN tunnel carries
    (config/path_mtu.py); its ENIs get the same in their .link."""
    assert set(nad_mtus(cluster).values()) == {9001}
    assert nad_mtus(routes_app.template_json(routes_app.stage.cluster)) == {
        "multus1-us-west-2a": 1446,
        "multus1-us-west-2a-static": 1446,
        "multus1-us-west-2b": 1446,
        "multus2-us-west-2a": 9001,
        "multus2-us-west-2b": 9001,
    }


def test_pod_ip_agent_manages_each_interfaces_reservations_and_reads_the_bootstrap_state(
    cluster: dict[str, Any],
) -> None:
    (code,) = [
        c for c in by_kind(cluster, "ConfigMap") if c["metadata"]["name"] == "multus-pod-ips"
    ]
    config = json.loads(code["data"]["config.json"])
    assert config["interfaces"] == {
        "multus1": ["10.0.4.32/27", "10.0.5.32/27"],
        "multus2": ["10.0.6.32/27", "10.0.7.32/27"],
    }
    assert config["eni_state_dir"] == READY_MARKER_DIR
    (daemon_set,) = [
        d for d in by_kind(cluster, "DaemonSet") if d["metadata"]["name"] == "multus-pod-ips"
    ]
    assert daemon_set["metadata"]["namespace"] == "kube-system"


def test_node_pool_carries_the_seed_settings(cluster: dict[str, Any]) -> None:
    (pool,) = by_kind(cluster, "NodePool")
    template = pool["spec"]["template"]
    assert template["metadata"]["labels"] == {
        "karpenter-node": "true",
        "multus.network/multus1": "true",
        "multus.network/multus2": "true",
    }
    assert template["spec"]["startupTaints"] == [
        {"key": "multus/not-ready", "value": "true", "effect": "NoSchedule"}
    ]
    requirements = {r["key"]: r.get("values") for r in template["spec"]["requirements"]}
    assert requirements["topology.kubernetes.io/zone"] == ["us-west-2a", "us-west-2b"]
    assert requirements["karpenter.k8s.aws/instance-cpu"] == ["2", "4", "8", "16"]
    assert requirements["karpenter.sh/capacity-type"] == ["on-demand"]
    assert pool["spec"]["limits"] == {"cpu": "500", "memory": "500Gi"}
    assert pool["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "120s",
    }
    # node_pool.termination_grace_period: no drain (teardown included) waits forever
    assert template["spec"]["terminationGracePeriod"] == "15m"


def test_node_class_gets_the_rendered_bootstrap_and_node_role(cluster: dict[str, Any]) -> None:
    (node_class,) = by_kind(cluster, "EC2NodeClass")
    spec = node_class["spec"]
    assert spec["role"] == TOKEN  # the Karpenter node role's name, resolved at deploy time
    assert spec["subnetSelectorTerms"] == [
        {"tags": {"karpenter.sh/discovery": "eks-karpenterwithmultus"}}
    ]
    user_data = spec["userData"]
    assert user_data.startswith("MIME-Version: 1.0")
    assert "us-west-2a" in user_data
    assert "us-west-2b" in user_data
    assert "multus1" in user_data
    assert "multus2" in user_data


def test_cleartaints_watches_the_bootstrap_marker(cluster: dict[str, Any]) -> None:
    (daemon_set,) = [
        d for d in by_kind(cluster, "DaemonSet") if d["metadata"]["namespace"] == "cleartaints"
    ]
    host_paths = [
        v["hostPath"]["path"]
        for v in daemon_set["spec"]["template"]["spec"]["volumes"]
        if "hostPath" in v
    ]
    assert READY_MARKER_DIR in host_paths


def test_optional_charts_are_off_by_default(cluster: dict[str, Any]) -> None:
    assert [d for d in by_kind(cluster, "Deployment") if "multitool" in json.dumps(d)] == []
    helm_charts = [
        r["Properties"]["Chart"]
        for r in cluster["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    ]
    assert sorted(helm_charts) == ["karpenter", "karpenter-crd"]


@pytest.fixture(scope="module")
def three_by_three(three_by_three_app: SynthesizedApp) -> dict[str, Any]:
    return three_by_three_app.template_json(three_by_three_app.stage.cluster)


def test_three_azs_three_networks_yield_nine_nads_and_three_zones(
    three_by_three: dict[str, Any],
) -> None:
    assert len(by_kind(three_by_three, "NetworkAttachmentDefinition")) == 9
    (pool,) = by_kind(three_by_three, "NodePool")
    zones = next(
        r["values"]
        for r in pool["spec"]["template"]["spec"]["requirements"]
        if r["key"] == "topology.kubernetes.io/zone"
    )
    assert zones == ["us-west-2a", "us-west-2b", "us-west-2c"]


def test_optional_charts_when_enabled(three_by_three: dict[str, Any]) -> None:
    workloads = [
        d for d in by_kind(three_by_three, "Deployment") if d["metadata"]["namespace"] == "default"
    ]
    assert len(workloads) == 3
    annotations = {json.dumps(d["spec"]["template"]["metadata"]["annotations"]) for d in workloads}
    assert any("signaling-us-west-2c" in a for a in annotations)
    charts = {
        r["Properties"]["Chart"]
        for r in three_by_three["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    }
    assert "node-latency-for-k8s-chart" in charts


MULTUS_CRD_FILE = "multus-v4.1.4-eksbuild.3/multus-daemonset-thick.yml"


def upstream_schemas() -> dict[str, dict[str, Any]]:
    """Kind -> the openAPIV3Schema of the upstream CRD's storage version (the one we emit)."""
    schemas = {}
    for path in [*karpenter_crd_files(), shared_reference(MULTUS_CRD_FILE)]:
        for document in yaml.safe_load_all(path.read_text()):
            if document and document["kind"] == "CustomResourceDefinition":
                (stored,) = [v for v in document["spec"]["versions"] if v["storage"]]
                schemas[document["spec"]["names"]["kind"]] = stored["schema"]["openAPIV3Schema"]
    return schemas


def upstream_validators() -> dict[str, Draft202012Validator]:
    """Kind -> validator of the upstream CRD's storage version's openAPIV3Schema."""
    return {kind: Draft202012Validator(schema) for kind, schema in upstream_schemas().items()}


def test_every_emitted_object_is_schema_valid(
    cluster: dict[str, Any], three_by_three: dict[str, Any]
) -> None:
    validators = upstream_validators()
    assert {"NodePool", "EC2NodeClass", "NetworkAttachmentDefinition"} <= set(validators)
    custom, built_in = 0, 0
    for template in (cluster, three_by_three):
        for objects, _ in manifests(template).values():
            for obj in objects:
                if obj["kind"] in validators:
                    errors = [e.message for e in validators[obj["kind"]].iter_errors(obj)]
                    assert errors == [], (obj["kind"], errors)
                    custom += 1
                else:
                    kubernetes_validate.validate(obj, "1.35", strict=True)
                    built_in += 1
    assert custom == 2 + 4 + 2 + 9  # NodePool + EC2NodeClass + NADs, in both layouts
    assert built_in > 40


def test_node_latency_does_not_wait_for_imds_that_pods_cannot_reach(
    three_by_three: dict[str, Any],
) -> None:
    (chart,) = [
        r["Properties"]
        for r in three_by_three["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
        and r["Properties"]["Chart"] == "node-latency-for-k8s-chart"
    ]
    values = json.loads(chart["Values"])
    assert {"name": "NO_IMDS", "value": "true"} in values["env"]


@pytest.fixture(scope="module")
def two_pools(five_g_core_app: SynthesizedApp) -> dict[str, Any]:
    # Synthesized with cdk-nag attached, like the default app: no open finding either.
    assert five_g_core_app.synth_error is None, five_g_core_app.synth_error
    return five_g_core_app.template_json(five_g_core_app.stage.cluster)


def multus_networks_line(user_data: str) -> list[str]:
    """The networks a user-data attaches (its MULTUS_NETWORKS data: name, interface, index,
    source/dest check; the security group IDs that end each line are deploy-time tokens here,
    the emulator's bootstrap tests check them)."""
    value = re.search(r"^MULTUS_NETWORKS='([^']*)'$", user_data, re.MULTILINE | re.DOTALL)
    assert value, user_data[:500]
    return [" ".join(line.split()[:4]) for line in value.group(1).splitlines()]


#: The logical ID of the manifest that held every pool's objects before each pool had its own:
#: it stays (an inventory ConfigMap), so an upgrade updates it instead of deleting those objects.
SHARED_NODE_POOL_MANIFEST = "EksClusterkarpenternodepool3C9C061E"
SHARED_NAD_MANIFEST = "EksClusternetworkattachmentsD2B1A4B8"


def test_the_shared_manifests_keep_their_logical_ids_as_inventories(
    two_pools: dict[str, Any], cluster: dict[str, Any]
) -> None:
    for template in (cluster, two_pools):
        resources = manifests(template)
        (pools,) = resources[SHARED_NODE_POOL_MANIFEST][0]
        assert (pools["kind"], pools["metadata"]["name"]) == ("ConfigMap", "karpenter-node-pools")
        (nads,) = resources[SHARED_NAD_MANIFEST][0]
        assert (nads["kind"], nads["metadata"]["name"]) == (
            "ConfigMap",
            "multus-network-attachments",
        )
    (pools,) = manifests(two_pools)[SHARED_NODE_POOL_MANIFEST][0]
    assert pools["data"] == {
        "upf": "NodePool/upf,EC2NodeClass/upf,NodeOverlay/upf",
        "control": "NodePool/control,EC2NodeClass/control",
    }


def test_every_pool_has_its_node_pool_and_node_class_in_a_manifest_of_its_own(
    two_pools: dict[str, Any],
) -> None:
    found = manifests_with(two_pools, "NodePool")
    by_pool = {
        next(o["metadata"]["name"] for o in objects if o["kind"] == "NodePool"): (
            logical_id,
            objects,
        )
        for logical_id, objects in found.items()
    }
    assert sorted(by_pool) == ["control", "upf"]
    for pool, (logical_id, pool_objects) in by_pool.items():
        assert logical_id.startswith(f"EksClusterkarpenternodepool{pool}")
        assert sorted(o["kind"] for o in pool_objects) == ["EC2NodeClass", "NodePool"]
        assert {o["metadata"]["name"] for o in pool_objects} == {pool}
    # upf's node profile reserves hugepages, which its NodeOverlay advertises to Karpenter: a
    # manifest of its own, so a pool that stops reserving them loses it (kubectl prunes no CR).
    overlays = manifests_with(two_pools, "NodeOverlay")
    assert [
        (logical_id.startswith("EksClusterkarpenternodeoverlayupf"), [o["kind"] for o in objs])
        for logical_id, objs in overlays.items()
    ] == [(True, ["NodeOverlay"])]
    objects = [o for _, pool_objects in by_pool.values() for o in pool_objects]
    classes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "EC2NodeClass"}
    assert multus_networks_line(classes["upf"]["spec"]["userData"]) == [
        "n3 n3 1 false",
        "n6 n6 2 false",
    ]
    assert multus_networks_line(classes["control"]["spec"]["userData"]) == ["n2 n2 1 false"]
    pools = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NodePool"}
    assert pools["upf"]["template"]["spec"]["taints"] == [
        {"key": "example.com/upf", "value": "true", "effect": "NoSchedule"}
    ]
    assert set(pools["control"]["template"]["metadata"]["labels"]) == {
        "karpenter-node",
        "multus.network/n2",
        "example.com/network-function",
    }


def test_every_object_of_the_two_pool_app_passes_its_schema_and_cel_rules(
    two_pools: dict[str, Any],
) -> None:
    """karpenter-v1.14.1 CRDs (shared/reference, and NodeOverlay's from
    testing_support/upstream_crds): the structural schema and the CEL rules
    (x-kubernetes-validations) the API server runs on create, for every NodePool,
    EC2NodeClass and NodeOverlay; Kubernetes 1.35's (the default minor) schema for the
    built-in kinds."""
    schemas = upstream_schemas()
    checked = []
    for objects, _ in manifests(two_pools).values():
        for obj in objects:
            if obj["kind"] in schemas:
                assert list(Draft202012Validator(schemas[obj["kind"]]).iter_errors(obj)) == []
                assert list(rule_violations(obj, schemas[obj["kind"]])) == [], obj["kind"]
                checked.append((obj["kind"], obj["metadata"]["name"]))
            else:
                kubernetes_validate.validate(obj, "1.35", strict=True)
    assert {name for kind, name in checked if kind in ("NodePool", "EC2NodeClass")} == {
        "upf",
        "control",
    }
    assert ("NodeOverlay", "upf") in checked


def test_the_controller_gets_the_node_overlay_gate_where_a_pool_has_an_overlay(
    two_pools: dict[str, Any], cluster: dict[str, Any]
) -> None:
    """The chart's FEATURE_GATES reads settings.featureGates.nodeOverlay (default false;
    aws/karpenter-provider-aws v1.14.1 charts/karpenter/values.yaml and
    templates/deployment.yaml): without it Karpenter ignores NodeOverlays. The default app has
    no overlay and keeps the chart's gates (test_cluster_stack.py's test_controller_values)."""

    def settings(template: dict[str, Any]) -> dict[str, Any]:
        release = template["Resources"][helm_release(template, "karpenter")]
        return dict(json.loads(joined_text(release["Properties"]["Values"]))["settings"])

    assert by_kind(two_pools, "NodeOverlay")
    assert settings(two_pools)["featureGates"] == {"nodeOverlay": True}
    assert by_kind(cluster, "NodeOverlay") == []
    assert "featureGates" not in settings(cluster)


def test_each_pool_gets_its_own_cleartaints_and_pod_ip_agent_on_its_nodes_only(
    two_pools: dict[str, Any],
) -> None:
    daemon_sets = {d["metadata"]["name"]: d for d in by_kind(two_pools, "DaemonSet")}
    for pool in ("upf", "control"):
        for name in (f"cleartaints-{pool}", f"multus-pod-ips-{pool}"):
            (term,) = daemon_sets[name]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"]
            assert {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]} in term[
                "matchExpressions"
            ]
    assert "cleartaints" not in daemon_sets  # no pool is named like the seed's
    (code,) = [
        c for c in by_kind(two_pools, "ConfigMap") if c["metadata"]["name"] == "multus-pod-ips"
    ]
    assert set(json.loads(code["data"]["config-upf.json"])["interfaces"]) == {"n3", "n6"}
    assert set(json.loads(code["data"]["config-control.json"])["interfaces"]) == {"n2"}


def test_a_network_no_pool_attaches_is_a_cdk_warning(tmp_path: Path) -> None:
    raw = json.loads((REPO / "examples" / "5g-core.json").read_text())
    raw["node_pools"][1]["networks"] = []
    app = synthesize(tmp_path, cdk_json_context(config=raw))
    warnings = Annotations.from_stack(app.stage.cluster).find_warning(
        "*", Match.string_like_regexp("multus.networks\\[0\\] \\(n2\\): no node pool attaches it")
    )
    assert len(warnings) == 1
