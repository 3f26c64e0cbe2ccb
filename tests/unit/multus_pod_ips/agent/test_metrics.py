"""The agent's metrics in the Prometheus text format.

Source: Prometheus "Exposition formats", text format 0.0.4: `# HELP` and `# TYPE` lines; label
values escape `\\`, `"` and line feed; a histogram's `_bucket` samples are cumulative, end with
`le="+Inf"` (equal to `_count`), followed by `_sum` and `_count`; content type
`text/plain; version=0.0.4`.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from multus_pod_ips.agent.metrics import AgentMetrics, Counter, Histogram, MetricsServer


def test_a_counter_renders_help_type_and_one_sample_per_label_set() -> None:
    counter = Counter("requests_total", "Requests.", ("action", "code"))
    counter.inc("Assign", 'odd "code"\\\n')
    counter.inc("Assign", 'odd "code"\\\n', amount=2)

    assert list(counter.render()) == [
        "# HELP requests_total Requests.",
        "# TYPE requests_total counter",
        'requests_total{action="Assign",code="odd \\"code\\"\\\\\\n"} 3',
    ]


def test_a_histogram_counts_cumulatively_with_the_bound_inclusive() -> None:
    histogram = Histogram("wait_seconds", "Waits.", ("network",), buckets=(0.1, 1.0))
    for value in (0.1, 0.5, 1.0, 7.0):
        histogram.observe(value, "multus1")

    assert list(histogram.render())[2:] == [
        'wait_seconds_bucket{network="multus1",le="0.1"} 1',
        'wait_seconds_bucket{network="multus1",le="1"} 3',
        'wait_seconds_bucket{network="multus1",le="+Inf"} 4',
        'wait_seconds_sum{network="multus1"} 8.6',
        'wait_seconds_count{network="multus1"} 4',
    ]


def test_slot_gauges_read_the_agents_state_when_scraped() -> None:
    metrics = AgentMetrics()
    metrics.slots = lambda: {"multus1": (3, 7)}

    text = metrics.render()

    assert 'multus_pod_ips_eni_address_slots_used{network="multus1"} 3\n' in text
    assert 'multus_pod_ips_eni_address_slots_free{network="multus1"} 7\n' in text
    assert "multus_pod_ips_ec2_rate_limit_requests_per_second 0\n" in text


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    started = MetricsServer(("127.0.0.1", 0), AgentMetrics())
    threading.Thread(target=started.serve_forever, daemon=True).start()
    yield started
    started.shutdown()
    started.server_close()


def test_the_server_answers_get_metrics_in_the_text_format_and_nothing_else(
    server: MetricsServer,
) -> None:
    base = f"http://127.0.0.1:{server.server_address[1]}"
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
        content_type = response.headers["Content-Type"]
        body = response.read().decode()

    assert content_type.startswith("text/plain; version=0.0.4")
    assert "# TYPE multus_pod_ips_assign_seconds histogram" in body
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{base}/", timeout=5)
    assert missing.value.code == 404
