"""examples/host-device.json synthesized: the UPF pool's N6 network gives each pod a whole ENI
(docs/network.md, Whole-ENI networks)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from charts.nad_cni_configs import CNI_VERSION
from testing_support.multus_emulator import shell_part
from tests.conftest import SynthesizedApp
from tests.helpers import joined_text
from tests.unit.stacks.test_cluster_workloads import by_kind

AZS = ("us-west-2a", "us-west-2b")


@pytest.fixture(scope="module")
def example(host_device_app: SynthesizedApp) -> SynthesizedApp:
    return host_device_app


@pytest.fixture(scope="module")
def cluster(example: SynthesizedApp) -> dict[str, Any]:
    return example.template_json(example.stage.cluster)


def test_example_synthesizes_without_nag_findings(example: SynthesizedApp) -> None:
    assert example.synth_error is None


def test_one_nad_per_az_and_eni_slot_with_an_empty_spec(cluster: dict[str, Any]) -> None:
    """Multus reads the config of a NAD without spec.config from its confDir, the file whose
    "name" is the NAD's (network-attachment-definition-client pkg/utils/cniconfig.go,
    GetCNIConfig and GetCNIConfigFromFile, as multus-cni v4.1.4 vendors it)."""
    nads = {nad["metadata"]["name"]: nad for nad in by_kind(cluster, "NetworkAttachmentDefinition")}
    assert sorted(nads) == sorted(
        [*(f"n3-{az}" for az in AZS), *(f"n6-{az}-{slot}" for az in AZS for slot in (0, 1))]
    )
    for az in AZS:
        for slot in (0, 1):
            assert nads[f"n6-{az}-{slot}"]["spec"] == {}
        n3 = json.loads(nads[f"n3-{az}"]["spec"]["config"])
        assert [plugin["type"] for plugin in n3["plugins"]][:1] == ["ipvlan"]


def test_cleartaints_waits_for_each_enis_config_and_the_plugins_it_names(
    cluster: dict[str, Any],
) -> None:
    (daemon_set,) = [
        d for d in by_kind(cluster, "DaemonSet") if d["metadata"]["name"] == "cleartaints-upf"
    ]
    (container,) = daemon_set["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    # n6's ENIs are devices 2 and 3; n3's Whereabouts kubeconfig is waited for too.
    assert env["CNI_FILES"].split() == [
        "/host/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig",
        "/host/etc/cni/net.d/90-host-device-eni2.conf",
        "/host/etc/cni/net.d/90-host-device-eni3.conf",
    ]
    assert {"host-device", "static"} <= set(env["CNI_BINARIES"].split())


def test_the_pod_ip_agent_leaves_the_host_device_network_out(cluster: dict[str, Any]) -> None:
    (code,) = [
        c for c in by_kind(cluster, "ConfigMap") if c["metadata"]["name"] == "multus-pod-ips"
    ]
    # A host-device pod has its ENI's primary address: nothing for the agent to assign.
    # The pool's file (charts/multus_pod_ips.py: config-<pool>.json for a pool not named multus).
    assert json.loads(code["data"]["config-upf.json"])["interfaces"] == {
        "n3": ["10.0.6.32/27", "10.0.7.32/27"]
    }


def test_user_data_attaches_both_enis_and_describes_their_configs(
    cluster: dict[str, Any],
) -> None:
    (node_class,) = by_kind(cluster, "EC2NodeClass")
    script = shell_part(joined_text(node_class["spec"]["userData"]))
    start = script.index("MULTUS_HOST_DEVICE='") + len("MULTUS_HOST_DEVICE='")
    lines = script[start : script.index("'", start)].splitlines()
    assert lines == [
        f"{az} n6{slot} n6-{az}-{slot} 24 10.0.{8 + zone}.1 90-host-device-eni{2 + slot}.conf "
        "10.200.0.0/16"
        for zone, az in enumerate(AZS)
        for slot in (0, 1)
    ]


def test_the_node_config_speaks_the_nads_cni_version() -> None:
    """host_device.sh writes cniVersion 0.3.1, as the chart's NADs (charts/nad_cni_configs.py)."""
    script = (Path(__file__).resolve().parents[3] / "node_bootstrap/host_device.sh").read_text()
    assert f'"cniVersion":"{CNI_VERSION}"' in script
