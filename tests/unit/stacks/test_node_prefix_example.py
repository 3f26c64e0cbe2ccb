"""examples/node-prefix.json synthesized: one network per IP management mode."""

from __future__ import annotations

import json
from typing import Any

import pytest

from testing_support.multus_emulator import shell_part
from tests.conftest import SynthesizedApp
from tests.helpers import joined_text
from tests.unit.stacks.test_cluster_workloads import by_kind


@pytest.fixture(scope="module")
def example(node_prefix_app: SynthesizedApp) -> SynthesizedApp:
    return node_prefix_app


@pytest.fixture(scope="module")
def cluster(example: SynthesizedApp) -> dict[str, Any]:
    return example.template_json(example.stage.cluster)


def test_example_synthesizes_without_nag_findings(example: SynthesizedApp) -> None:
    assert example.synth_error is None


def test_reservation_types_follow_each_networks_mode(example: SynthesizedApp) -> None:
    network = example.template_json(example.stage.network)
    reservations = sorted(
        (r["Properties"]["Cidr"], r["Properties"]["ReservationType"])
        for r in network["Resources"].values()
        if r["Type"] == "Custom::SubnetCidrReservation"
    )
    assert reservations == [
        ("10.0.10.0/23", "prefix"),
        ("10.0.18.0/23", "prefix"),
        ("10.0.4.32/27", "explicit"),
        ("10.0.5.32/27", "explicit"),
    ]


def test_node_prefix_nads_carry_no_config(cluster: dict[str, Any]) -> None:
    nads = {nad["metadata"]["name"]: nad for nad in by_kind(cluster, "NetworkAttachmentDefinition")}
    assert sorted(nads) == [
        "signaling-us-west-2a",
        "signaling-us-west-2b",
        "userplane-us-west-2a",
        "userplane-us-west-2b",
    ]
    for az in ("us-west-2a", "us-west-2b"):
        assert nads[f"userplane-{az}"]["spec"] == {}
        config = json.loads(nads[f"signaling-{az}"]["spec"]["config"])
        assert config["plugins"][0]["ipam"]["type"] == "whereabouts"


def test_cleartaints_also_waits_for_the_node_cni_config(cluster: dict[str, Any]) -> None:
    (daemon_set,) = [
        d for d in by_kind(cluster, "DaemonSet") if d["metadata"]["name"] == "cleartaints"
    ]
    (container,) = daemon_set["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    # userplane is device 2; the signaling network's Whereabouts kubeconfig is waited for too.
    assert env["CNI_FILES"].split() == [
        "/host/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig",
        "/host/etc/cni/net.d/90-node-prefix-eni2.conflist",
    ]
    assert set(env["CNI_BINARIES"].split()) == {
        "host-local",
        "ipvlan",
        "multus-pod-ip",  # chained by the example's whereabouts network
        "sbr",
        "whereabouts",
    }


def test_user_data_asks_for_the_prefixes_of_the_userplane_network(cluster: dict[str, Any]) -> None:
    (node_class,) = by_kind(cluster, "EC2NodeClass")
    script = shell_part(joined_text(node_class["spec"]["userData"]))
    # shlex quoting of a multi-line value: the lines follow the opening quote.
    start = script.index("MULTUS_NODE_PREFIX='") + len("MULTUS_NODE_PREFIX='")
    lines = script[start : script.index("'", start)].splitlines()
    assert lines == [
        "us-west-2a userplane 4 userplane-us-west-2a 10.0.8.0/21 10.0.10.0/23 10.0.8.1 l2 "
        "90-node-prefix-eni2.conflist",
        "us-west-2b userplane 4 userplane-us-west-2b 10.0.16.0/21 10.0.18.0/23 10.0.16.1 l2 "
        "90-node-prefix-eni2.conflist",
    ]


def test_pod_ip_agent_manages_only_the_whereabouts_network(cluster: dict[str, Any]) -> None:
    (code,) = [
        c for c in by_kind(cluster, "ConfigMap") if c["metadata"]["name"] == "multus-pod-ips"
    ]
    # userplane's addresses come from prefixes on its ENI: nothing for the agent to assign.
    assert json.loads(code["data"]["config.json"])["interfaces"] == {
        "signaling": ["10.0.4.32/27", "10.0.5.32/27"]
    }
