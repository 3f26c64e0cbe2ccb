from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import cdk8s

from charts.sample_workloads import (
    MULTUS_NETWORKS_ANNOTATION,
    SampleWorkloadsChart,
    SampleWorkloadsProps,
    ZoneWorkload,
    deployment_name,
)
from config.images import ImagesConfig
from config.node_labels import NodeTaint


def test_one_deployment_per_zone_with_that_zones_attachments(
    seed_manifests: dict[str, list[dict[str, Any]]], helpers: SimpleNamespace
) -> None:
    deployments = helpers.find_all(seed_manifests["sample-workloads"], "Deployment")
    assert len(deployments) == len(helpers.seed_zones)
    for zone in helpers.seed_zones:
        deployment = helpers.find(deployments, "Deployment", deployment_name(zone))
        template = deployment["spec"]["template"]
        assert template["metadata"]["annotations"] == {
            MULTUS_NETWORKS_ANNOTATION: f"multus1-{zone}, multus2-{zone}"
        }
        (term,) = template["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert term["matchExpressions"] == [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
            {"key": "karpenter-node", "operator": "Exists"},
            # Only nodes that attach the networks the pod asks for (their pool's labels).
            {"key": "multus.network/multus1", "operator": "In", "values": ["true"]},
            {"key": "multus.network/multus2", "operator": "In", "values": ["true"]},
        ]


def test_pods_request_what_they_are_given(helpers: SimpleNamespace) -> None:
    props = SampleWorkloadsProps(
        namespace="demo",
        image="registry.example.com/mirror/network-multitool:3.22.2",
        workloads=[ZoneWorkload("ap-south-2a", ["n1-ap-south-2a"])],
        replicas=3,
        cpu_millis=500,
        memory_mib=256,
    )
    manifests = cdk8s.Testing.synth(SampleWorkloadsChart(cdk8s.Testing.app(), "s", props))
    deployment = helpers.find(manifests, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert deployment["metadata"]["namespace"] == "demo"
    assert deployment["spec"]["replicas"] == 3
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "256Mi"},
        "limits": {"cpu": "500m", "memory": "256Mi"},
    }
    assert container["image"] == "registry.example.com/mirror/network-multitool:3.22.2"


def test_seed_image_is_the_default_multitool(
    seed_manifests: dict[str, list[dict[str, Any]]], helpers: SimpleNamespace
) -> None:
    for deployment in helpers.find_all(seed_manifests["sample-workloads"], "Deployment"):
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == "wbitt/network-multitool:3.22.2"
        assert container["image"] == ImagesConfig().sample_workloads.reference


def test_a_pools_workload_is_named_after_it_and_tolerates_its_taints(
    helpers: SimpleNamespace,
) -> None:
    upf = ZoneWorkload(
        "us-west-2a",
        ["n3-us-west-2a"],
        networks=["n3"],
        pool="upf",
        tolerations=[NodeTaint(key="example.com/upf", value="true", effect="NoSchedule")],
    )
    props = SampleWorkloadsProps(namespace="demo", image="multitool:1", workloads=[upf])
    manifests = cdk8s.Testing.synth(SampleWorkloadsChart(cdk8s.Testing.app(), "s", props))
    deployment = helpers.find(manifests, "Deployment", deployment_name("us-west-2a", "upf"))
    assert deployment["metadata"]["name"] == "multitool-upf-us-west-2a"
    pod = deployment["spec"]["template"]["spec"]
    assert helpers.tolerates(pod["tolerations"], "example.com/upf", "true", "NoSchedule")
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {"key": "multus.network/n3", "operator": "In", "values": ["true"]} in term[
        "matchExpressions"
    ]


def test_a_taint_without_value_is_tolerated_without_one(helpers: SimpleNamespace) -> None:
    upf = ZoneWorkload(
        "us-west-2a",
        ["n3-us-west-2a"],
        networks=["n3"],
        pool="upf",
        tolerations=[NodeTaint(key="example.net/dataplane", value="", effect="NoExecute")],
    )
    props = SampleWorkloadsProps(namespace="demo", image="multitool:1", workloads=[upf])
    manifests = cdk8s.Testing.synth(SampleWorkloadsChart(cdk8s.Testing.app(), "s", props))
    deployment = helpers.find(manifests, "Deployment", deployment_name("us-west-2a", "upf"))
    tolerations = deployment["spec"]["template"]["spec"]["tolerations"]
    assert tolerations == [
        {"key": "example.net/dataplane", "operator": "Exists", "effect": "NoExecute"}
    ]
    assert helpers.tolerates(tolerations, "example.net/dataplane", "", "NoExecute")
