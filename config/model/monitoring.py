"""Monitoring: whether the cluster runs the Prometheus Operator, which then loads the pod IP
agent's alerts, scrape target and dashboard (charts/multus_pod_ips_monitoring.py)."""

from __future__ import annotations

from pydantic import Field, model_validator

from config.model.base import StrictModel
from config.node_pool_rules import label_problems


class MonitoringConfig(StrictModel):
    """The pod IP agent's PrometheusRule, PodMonitor and Grafana dashboard (off by default:
    their kinds exist only where the Prometheus Operator's CRDs are installed)."""

    prometheus_operator: bool = Field(
        default=False,
        description="The cluster runs the Prometheus Operator (its monitoring.coreos.com CRDs "
        "are installed): deploy the pod IP agent's PodMonitor, its alerts (PrometheusRule) and "
        "a Grafana dashboard ConfigMap (docs/operations.md, Alerts). false: none of them.",
    )
    selector_labels: dict[str, str] = Field(
        default={},
        description="Labels on the PodMonitor and the PrometheusRule, for the Prometheus "
        "resource's podMonitorSelector and ruleSelector (kube-prometheus-stack selects "
        '{"release": "<its Helm release>"} unless told otherwise).',
    )

    @model_validator(mode="after")
    def _labels_need_the_operator(self) -> MonitoringConfig:
        problems = [f"selector_{problem}" for problem in label_problems(self.selector_labels)]
        if self.selector_labels and not self.prometheus_operator:
            problems.append(
                "selector_labels: label objects that are deployed only with "
                "prometheus_operator: true; set it or drop the labels"
            )
        if problems:
            raise ValueError("\n".join(problems))
        return self
