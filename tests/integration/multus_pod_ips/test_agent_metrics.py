"""The agent's metrics endpoint on an emulator run serves every metric docs/multus-pod-ips.md
lists, and no other: the list is parsed from the docs, so docs and code cannot drift.

Source of the format: Prometheus "Exposition formats" (text format 0.0.4: `# TYPE name kind`,
samples `name{labels} value`, histograms as `_bucket`/`_sum`/`_count`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from multus_pod_ips import AGENT_METRICS_PORT
from testing_support.multus_emulator import AVAILABILITY_ZONES, Ec2Emulator, Fault
from testing_support.pod_ip_node import PodIpNode, pod_ip_vpc, wait_until

pytestmark = pytest.mark.integration

DOCS = Path(__file__).resolve().parents[3] / "docs" / "multus-pod-ips.md"


def documented_metrics() -> dict[str, str]:
    """name -> type, from the table of the docs' "Metrics" section."""
    section = DOCS.read_text().split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(multus_pod_ips_\w+)` \| (\w+) \|", section, re.MULTILINE)
    return dict(rows)


def served(text: str) -> tuple[dict[str, str], set[str]]:
    """(name -> type from the # TYPE lines, names that have at least one sample)."""
    types = dict(re.findall(r"^# TYPE (\w+) (\w+)$", text, re.MULTILINE))
    sampled = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            sampled.add(re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name)
    return types, sampled


@pytest.fixture
def node(emulator: Ec2Emulator) -> Iterator[PodIpNode]:
    vpc = pod_ip_vpc(emulator)
    started = PodIpNode.bootstrap(
        emulator, vpc, AVAILABILITY_ZONES[0], "metrics-cluster", reconcile_seconds=0.3
    )
    started.start_agent()
    yield started
    started.stop_agent()
    emulator.proxy.reset()


def test_the_docs_list_metrics_and_the_port_the_code_uses() -> None:
    assert len(documented_metrics()) >= 10
    assert f":{AGENT_METRICS_PORT}/metrics" in DOCS.read_text()


def test_the_endpoint_serves_every_documented_metric_and_only_those(
    emulator: Ec2Emulator, node: PodIpNode
) -> None:
    # A run that exercises every metric: a throttled assign (errors, throttles, the rate limit),
    # ADD and DEL (latencies, IMDS lag), an address removed behind the agent's back (the
    # reconcile corrects its record and restores it).
    emulator.proxy.reset(
        [Fault("RequestLimitExceeded", status=503, action="AssignPrivateIpAddresses")]
    )
    assert node.add_pod("a", "10.0.4.40").status == 0
    assert node.add_pod("b", "10.0.4.41").status == 0
    assert node.delete_pod("b", "10.0.4.41").status == 0
    time.sleep(0.6)  # past the settle time (0.5 s)
    emulator.ec2.unassign_private_ip_addresses(
        NetworkInterfaceId=node.enis["multus1"], PrivateIpAddresses=["10.0.4.40"]
    )
    assert wait_until(lambda: node.addresses("multus1") == {"10.0.4.40"}), node.agent_log()
    # A refusal no retry fixes: the call fails for good (failures_total).
    emulator.proxy.reset(
        [Fault("UnauthorizedOperation", status=403, action="AssignPrivateIpAddresses")]
    )
    assert node.add_pod("c", "10.0.4.42").status != 0

    text = node.scrape_metrics()
    types, sampled = served(text)

    assert types == documented_metrics()
    assert sampled == set(documented_metrics()), text
    assert 'multus_pod_ips_eni_address_slots_used{network="multus1"} 2' in text  # primary + a
    assert 'multus_pod_ips_eni_address_slots_free{network="multus1"} 8' in text  # m5.large: 10
    assert (
        'multus_pod_ips_ec2_errors_total{action="AssignPrivateIpAddresses",'
        'code="RequestLimitExceeded"} 1' in text
    )
    assert (
        'multus_pod_ips_ec2_failures_total{action="AssignPrivateIpAddresses",'
        'code="UnauthorizedOperation"} 1' in text
    )
    # The throttled attempt was retried: an error, no failure.
    assert (
        'multus_pod_ips_ec2_failures_total{action="AssignPrivateIpAddresses",code="Request'
        not in (text)
    )
    assert 'multus_pod_ips_reconcile_corrections_total{network="multus1",kind="restored"} 1' in (
        text
    )
