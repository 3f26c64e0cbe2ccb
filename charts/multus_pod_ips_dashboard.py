"""The pod IP agent's Grafana dashboard: one panel per question an operator asks of the agent's
metrics (docs/multus-pod-ips.md, Metrics), shipped as a ConfigMap by
charts/multus_pod_ips_monitoring.py. Variables pick the Prometheus data source and the nodes
(the PodMonitor's `node` label); every panel is a Grafana timeseries."""

from __future__ import annotations

from typing import Any

#: Grafana's dashboard schema version these fields follow (Grafana 10 and 11 read it).
_SCHEMA_VERSION = 39
_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_NODES = 'node=~"$node"'

# (title, unit, expression with its legend) per panel, in the dashboard's order.
_PANELS: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    (
        "CNI ADD time (p50, p99)",
        "s",
        tuple(
            (
                f"histogram_quantile({q}, sum by (network, le) "
                f"(rate(multus_pod_ips_assign_seconds_bucket{{{_NODES}}}[$__rate_interval])))",
                f"p{int(q * 100)} {{{{network}}}}",
            )
            for q in (0.5, 0.99)
        ),
    ),
    (
        "IMDS lag after an assign (p99): addresses waiting for their remap",
        "s",
        (
            (
                "histogram_quantile(0.99, sum by (network, le) "
                f"(rate(multus_pod_ips_imds_lag_seconds_bucket{{{_NODES}}}[$__rate_interval])))",
                "{{network}}",
            ),
        ),
    ),
    (
        "CNI DEL time (p99)",
        "s",
        (
            (
                "histogram_quantile(0.99, sum by (network, le) "
                f"(rate(multus_pod_ips_unassign_seconds_bucket{{{_NODES}}}[$__rate_interval])))",
                "{{network}}",
            ),
        ),
    ),
    (
        "EC2 requests per second",
        "reqps",
        (
            (
                "sum by (action) "
                f"(rate(multus_pod_ips_ec2_requests_total{{{_NODES}}}[$__rate_interval]))",
                "{{action}}",
            ),
        ),
    ),
    (
        "EC2 errors per second, by code",
        "reqps",
        (
            (
                "sum by (action, code) "
                f"(rate(multus_pod_ips_ec2_errors_total{{{_NODES}}}[$__rate_interval]))",
                "{{action}} {{code}}",
            ),
        ),
    ),
    (
        "EC2 throttles per second and the client-side rate limit",
        "reqps",
        (
            (
                "sum by (node) "
                f"(rate(multus_pod_ips_ec2_throttles_total{{{_NODES}}}[$__rate_interval]))",
                "throttled {{node}}",
            ),
            (
                f"multus_pod_ips_ec2_rate_limit_requests_per_second{{{_NODES}}} > 0",
                "limit {{node}}",
            ),
        ),
    ),
    (
        "ENI addresses free (lowest node per network)",
        "none",
        (
            (
                f"min by (network) (multus_pod_ips_eni_address_slots_free{{{_NODES}}})",
                "free {{network}}",
            ),
            (
                f"max by (network) (multus_pod_ips_eni_address_slots_used{{{_NODES}}})",
                "used (fullest) {{network}}",
            ),
        ),
    ),
    (
        "Reconcile corrections per hour (drift)",
        "none",
        (
            (
                "sum by (network, kind) "
                f"(increase(multus_pod_ips_reconcile_corrections_total{{{_NODES}}}[1h]))",
                "{{network}} {{kind}}",
            ),
        ),
    ),
)


def dashboard() -> dict[str, Any]:
    """The dashboard's JSON model."""
    return {
        "uid": "multus-pod-ips",
        "title": "Multus pod IP agent",
        "tags": ["multus", "karpenter"],
        "schemaVersion": _SCHEMA_VERSION,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus"},
                {
                    "name": "node",
                    "type": "query",
                    "datasource": _DATASOURCE,
                    "query": "label_values(multus_pod_ips_eni_address_slots_used, node)",
                    "includeAll": True,
                    "multi": True,
                    "current": {"text": "All", "value": "$__all"},
                },
            ]
        },
        "panels": [_panel(index, *panel) for index, panel in enumerate(_PANELS)],
    }


def _panel(
    index: int, title: str, unit: str, targets: tuple[tuple[str, str], ...]
) -> dict[str, Any]:
    # Two panels per row, 8 grid units high, in order.
    return {
        "id": index + 1,
        "type": "timeseries",
        "title": title,
        "datasource": _DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + n), "expr": expr, "legendFormat": legend}
            for n, (expr, legend) in enumerate(targets)
        ],
    }
