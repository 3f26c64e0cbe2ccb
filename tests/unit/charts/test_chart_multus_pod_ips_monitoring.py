"""The pod IP agent's PodMonitor, alerts and dashboard: deployed only with the switch, every
series they read served by the agent (or named as another component's), every alert with the
text an operator needs."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import cdk8s
import pytest

from charts.multus_pod_ips_dashboard import dashboard
from charts.multus_pod_ips_monitoring import (
    EXTERNAL_SERIES,
    MonitoringProps,
    MultusPodIpsMonitoringChart,
    alerts,
    prometheus_rule_spec,
)
from config import AppConfig
from config.images import ImagesConfig
from multus_pod_ips.agent import metrics as agent_metrics
from stacks.cluster_props import monitoring_props, pod_ips_props

# A metric name in PromQL: a word not followed by "(" (functions) and not inside quotes,
# braces or brackets (label values, label names, ranges); keywords are filtered below.
_PROMQL_KEYWORDS = {"sum", "by", "rate", "max", "min", "histogram_quantile", "increase", "le"}
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def served_metrics() -> dict[str, str]:
    """Metric name -> kind, read from the source of multus_pod_ips/agent/metrics.py (the names
    are the first argument of each Histogram, Counter and Gauge), so a rename fails here."""
    tree = ast.parse(Path(agent_metrics.__file__).read_text())
    served = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("Histogram", "Counter", "Gauge")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            served[str(node.args[0].value)] = node.func.id
    return served


def series_in(expr: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    without_strings = re.sub(r'"[^"]*"', "", expr)
    without_ranges = re.sub(r"\[[^]]*\]", "", without_strings)
    without_matchers = re.sub(r"\{[^}]*\}", "", without_ranges)
    without_groupings = re.sub(r"\b(by|without)\s*\([^)]*\)", "", without_matchers)
    words = re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", without_groupings)
    return {word for word in words if word not in _PROMQL_KEYWORDS}


def known(series: str, served: dict[str, str]) -> bool:
    if series in served or series in EXTERNAL_SERIES:
        return True
    base = next((series.removesuffix(s) for s in _HISTOGRAM_SUFFIXES if series.endswith(s)), "")
    return served.get(base) == "Histogram"


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    props = MonitoringProps(
        agent_names=["multus-pod-ips", "multus-pod-ips-upf"], selector_labels={"release": "kps"}
    )
    return list(
        cdk8s.Testing.synth(MultusPodIpsMonitoringChart(cdk8s.Testing.app(), "monitoring", props))
    )


def by_kind(manifests: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (match,) = [m for m in manifests if m["kind"] == kind]
    return match


def test_only_the_switch_deploys_it() -> None:
    image = ImagesConfig().multus_pod_ips.reference
    off = AppConfig()
    on = AppConfig.model_validate({"monitoring": {"prometheus_operator": True}})
    assert monitoring_props(off, pod_ips_props(off, image)) is None
    props = monitoring_props(on, pod_ips_props(on, image))
    assert props is not None and list(props.agent_names) == ["multus-pod-ips"]
    # No agent, no metrics to watch: a config whose networks all run without it.
    assert monitoring_props(on, None) is None


def test_the_selector_labels_need_the_switch() -> None:
    with pytest.raises(ValueError, match=r"selector_labels: .*prometheus_operator: true"):
        AppConfig.model_validate({"monitoring": {"selector_labels": {"release": "kps"}}})
    with pytest.raises(ValueError, match="selector_labels: "):
        AppConfig.model_validate(
            {"monitoring": {"prometheus_operator": True, "selector_labels": {"bad key!": "x"}}}
        )


def test_every_series_a_rule_or_panel_reads_exists() -> None:
    served = served_metrics()
    assert "multus_pod_ips_assign_seconds" in served  # the parser found the agent's metrics
    exprs = [a.expr for a in alerts("kube-system")]
    exprs += [t["expr"] for p in dashboard()["panels"] for t in p["targets"]]
    unknown = {s for expr in exprs for s in series_in(expr) if not known(s, served)}
    assert not unknown, f"series no metric of multus_pod_ips/agent/metrics.py serves: {unknown}"


def test_series_in_finds_renamed_metrics() -> None:
    # The check above is only as good as this parser.
    assert series_in('sum by (node, le) (rate(multus_pod_ips_x_bucket{code!~"a|b"}[5m])) > 0') == {
        "multus_pod_ips_x_bucket"
    }
    assert not known("multus_pod_ips_assign_second_bucket", served_metrics())


def test_every_alert_says_what_happened_and_what_to_do() -> None:
    names = [a.name for a in alerts("kube-system")]
    assert len(names) == len(set(names))
    for rule in prometheus_rule_spec("kube-system")["groups"][0]["rules"]:
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert set(rule["annotations"]) == {"summary", "description", "runbook"}, rule["alert"]
        assert all(len(text) > 20 for text in rule["annotations"].values()), rule["alert"]
        assert re.fullmatch(r"\d+[mh]", rule["for"]), rule["alert"]


def test_agent_rules_read_only_this_pod_monitors_job(manifests: list[dict[str, Any]]) -> None:
    monitor = by_kind(manifests, "PodMonitor")
    job = f"{monitor['metadata']['namespace']}/{monitor['metadata']['name']}"
    for alert in alerts("kube-system"):
        if any(s.startswith("multus_pod_ips_") or s == "up" for s in series_in(alert.expr)):
            assert f'job="{job}"' in alert.expr, alert.name


def test_pod_monitor_scrapes_every_pools_agents_by_node(manifests: list[dict[str, Any]]) -> None:
    spec = by_kind(manifests, "PodMonitor")["spec"]
    assert spec["selector"]["matchExpressions"] == [
        {"key": "app", "operator": "In", "values": ["multus-pod-ips", "multus-pod-ips-upf"]}
    ]
    assert spec["namespaceSelector"] == {"matchNames": ["kube-system"]}
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics"  # the agent container's port name
    assert endpoint["relabelings"][0]["targetLabel"] == "node"


def test_selector_labels_on_the_monitor_and_the_rule(manifests: list[dict[str, Any]]) -> None:
    for kind in ("PodMonitor", "PrometheusRule"):
        assert by_kind(manifests, kind)["metadata"]["labels"] == {"release": "kps"}
    assert by_kind(manifests, "PrometheusRule")["apiVersion"] == "monitoring.coreos.com/v1"


def test_dashboard_is_a_configmap_grafanas_sidecar_loads(manifests: list[dict[str, Any]]) -> None:
    config_map = by_kind(manifests, "ConfigMap")
    assert config_map["metadata"]["labels"] == {"grafana_dashboard": "1"}
    model = json.loads(config_map["data"]["multus-pod-ips.json"])
    assert model["uid"] == "multus-pod-ips"
    ids = [panel["id"] for panel in model["panels"]]
    assert len(ids) == len(set(ids))
