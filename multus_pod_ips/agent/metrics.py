"""The agent's Prometheus metrics, served on the node in the text exposition format.

Prometheus "Exposition formats" (text format 0.0.4): per metric a `# HELP` and a `# TYPE`
line, then one sample per line, `name{label="value"} number`; a histogram has cumulative
`_bucket{le="..."}` samples ending with `le="+Inf"`, then `_sum` and `_count`. Label values
escape backslash, double quote and line feed. Standard library only, like the rest of the agent.
docs/multus-pod-ips.md ("Metrics") lists every metric; a test keeps the two in step.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Upper bounds (seconds) of the latency buckets: from a batched call (~0.1 s) to the ADD
#: deadline (50 s).
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0)

Labels = tuple[str, ...]


class _Metric(abc.ABC):
    kind = ""

    def __init__(self, name: str, help_text: str, label_names: Labels) -> None:
        self.name = name
        self.help_text = help_text
        self.label_names = label_names
        self._lock = threading.Lock()

    def render(self) -> Iterator[str]:
        yield f"# HELP {self.name} {self.help_text}"
        yield f"# TYPE {self.name} {self.kind}"
        yield from self._samples()

    @abc.abstractmethod
    def _samples(self) -> Iterator[str]:
        """The metric's sample lines."""

    def _labels(self, values: Labels, extra: str = "") -> str:
        pairs = [f'{name}="{_escape(value)}"' for name, value in zip(self.label_names, values)]
        pairs += [extra] if extra else []
        return "{" + ",".join(pairs) + "}" if pairs else ""


class Counter(_Metric):
    """A count that only goes up, per label values."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, label_names: Labels = ()) -> None:
        super().__init__(name, help_text, label_names)
        self._values: dict[Labels, float] = {}

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        with self._lock:
            return self._values.get(labels, 0.0)

    def _samples(self) -> Iterator[str]:
        with self._lock:
            values = sorted(self._values.items())
        for labels, value in values:
            yield f"{self.name}{self._labels(labels)} {_number(value)}"


class Gauge(_Metric):
    """A value read when scraped: `read` returns it per label values."""

    kind = "gauge"

    def __init__(
        self,
        name: str,
        help_text: str,
        label_names: Labels,
        read: Callable[[], Mapping[Labels, float]],
    ) -> None:
        super().__init__(name, help_text, label_names)
        self._read = read

    def _samples(self) -> Iterator[str]:
        for labels, value in sorted(self._read().items()):
            yield f"{self.name}{self._labels(labels)} {_number(value)}"


class Histogram(_Metric):
    """Observed values counted into cumulative buckets, per label values."""

    kind = "histogram"

    def __init__(
        self,
        name: str,
        help_text: str,
        label_names: Labels = (),
        buckets: tuple[float, ...] = LATENCY_BUCKETS,
    ) -> None:
        super().__init__(name, help_text, label_names)
        self._bounds = buckets
        self._series: dict[Labels, tuple[list[int], float]] = {}  # bucket counts, sum

    def observe(self, value: float, *labels: str) -> None:
        with self._lock:
            counts, total = self._series.get(labels, ([0] * (len(self._bounds) + 1), 0.0))
            index = next((i for i, b in enumerate(self._bounds) if value <= b), len(self._bounds))
            counts[index] += 1
            self._series[labels] = (counts, total + value)

    def _samples(self) -> Iterator[str]:
        with self._lock:
            series = sorted((labels, (list(c), s)) for labels, (c, s) in self._series.items())
        for labels, (counts, total) in series:
            cumulative = 0
            for bound, count in zip((*self._bounds, float("inf")), counts):
                cumulative += count
                le = 'le="+Inf"' if bound == float("inf") else f'le="{_number(bound)}"'
                yield f"{self.name}_bucket{self._labels(labels, le)} {cumulative}"
            yield f"{self.name}_sum{self._labels(labels)} {_number(total)}"
            yield f"{self.name}_count{self._labels(labels)} {cumulative}"


class AgentMetrics:
    """Every metric the agent serves. The gauges read their values from `sources` (set by the
    agent once it knows its ENIs and its EC2 client), so a scrape shows the current state."""

    def __init__(self) -> None:
        self.assign_seconds = Histogram(
            "multus_pod_ips_assign_seconds",
            "Time from a CNI ADD reaching the agent until its addresses are on the ENI and "
            "listed by IMDS (or the ADD failed).",
            ("network",),
        )
        self.unassign_seconds = Histogram(
            "multus_pod_ips_unassign_seconds",
            "Time from a CNI DEL reaching the agent until EC2 released its addresses.",
            ("network",),
        )
        self.ec2_requests = Counter(
            "multus_pod_ips_ec2_requests_total",
            "EC2 requests sent, retries included, by action.",
            ("action",),
        )
        self.ec2_errors = Counter(
            "multus_pod_ips_ec2_errors_total",
            "EC2 requests answered with an error, by action and EC2 error code (each attempt: "
            "retried throttles and 5xx errors included).",
            ("action", "code"),
        )
        self.ec2_failures = Counter(
            "multus_pod_ips_ec2_failures_total",
            "EC2 calls that failed for good, by action and the EC2 error code they ended with: "
            "a refusal no retry fixes, or a throttle, 5xx or connection error that outlasted "
            "the retries (ClientRateLimited: held back by the client-side rate limit).",
            ("action", "code"),
        )
        self.ec2_throttles = Counter(
            "multus_pod_ips_ec2_throttles_total",
            "EC2 requests answered with a throttling error (RequestLimitExceeded, ...).",
            ("action",),
        )
        self.reconcile_corrections = Counter(
            "multus_pod_ips_reconcile_corrections_total",
            "Differences the reconcile corrected: released (address without a live pod), "
            "restored (a live pod's address missing), record (IMDS contradicted the agent's "
            "record past the settle time: EC2 was asked).",
            ("network", "kind"),
        )
        self.imds_lag_seconds = Histogram(
            "multus_pod_ips_imds_lag_seconds",
            "Time from EC2's answer to an assign until IMDS local-ipv4s listed the address.",
            ("network",),
        )
        self.slots: Callable[[], Mapping[str, tuple[int, int]]] = dict
        self.rate_limit: Callable[[], float] = lambda: 0.0
        self._all: list[_Metric] = [
            self.assign_seconds,
            self.unassign_seconds,
            self.ec2_requests,
            self.ec2_errors,
            self.ec2_failures,
            self.ec2_throttles,
            Gauge(
                "multus_pod_ips_ec2_rate_limit_requests_per_second",
                "The client-side rate limit of EC2 requests (0: off, EC2 has not throttled).",
                (),
                lambda: {(): self.rate_limit()},
            ),
            Gauge(
                "multus_pod_ips_eni_address_slots_used",
                "Private IPv4 addresses on the network's Multus ENI (its primary included).",
                ("network",),
                lambda: {(network,): used for network, (used, _) in self.slots().items()},
            ),
            Gauge(
                "multus_pod_ips_eni_address_slots_free",
                "Private IPv4 addresses the network's Multus ENI can still take (instance type "
                "limit minus used).",
                ("network",),
                lambda: {(network,): free for network, (_, free) in self.slots().items()},
            ),
            self.reconcile_corrections,
            self.imds_lag_seconds,
        ]

    def render(self) -> str:
        return "\n".join(line for metric in self._all for line in metric.render()) + "\n"


class MetricsServer(ThreadingHTTPServer):
    """GET /metrics: the text format; anything else 404."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], metrics: AgentMetrics) -> None:
        self.metrics = metrics
        super().__init__(address, _MetricsHandler)


class _MetricsHandler(BaseHTTPRequestHandler):
    server: MetricsServer

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404)
            return
        payload = self.server.metrics.render().encode()
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, message_format: str, *args: object) -> None:
        pass  # one line per scrape would drown the agent's log


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))
