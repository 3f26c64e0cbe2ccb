"""The pod IP agent's monitoring for clusters that run the Prometheus Operator: a PodMonitor on
the agents' `metrics` port, a PrometheusRule with the alerts below and the Grafana dashboard as a
ConfigMap (charts/multus_pod_ips_dashboard.py). Deployed only with
`monitoring.prometheus_operator: true`: without the operator's CRDs the API server refuses the
PodMonitor and PrometheusRule kinds. docs/operations.md ("Alerts") says what each alert means
and what the operator does.

cdk8s has no typed PrometheusRule or PodMonitor, so both are ApiObjects whose fields follow the
prometheus-operator CRDs (monitoring.coreos.com/v1: PrometheusRule spec.groups[].rules[] with
alert, expr, for, labels, annotations; PodMonitor spec.selector, namespaceSelector,
podMetricsEndpoints[] with port and relabelings).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import cdk8s
from constructs import Construct

from charts.building_blocks import api_object
from charts.cleartaints import CLEARTAINTS_NAMESPACE
from charts.multus_pod_ips_dashboard import dashboard
from config.node_labels import MULTUS_NOT_READY_TAINT
from multus_pod_ips.agent.config import AgentConfig
from multus_pod_ips.agent.ec2_query import CLIENT_RATE_LIMITED, RETRYABLE_EC2_CODES

MONITORING_API = "monitoring.coreos.com/v1"
#: Prometheus names a PodMonitor's scrape job <namespace>/<name> (prometheus-operator).
POD_MONITOR_NAME = "multus-pod-ips"
RULE_GROUP = "multus-pod-ips"
#: The Grafana sidecar of kube-prometheus-stack loads ConfigMaps with this label.
DASHBOARD_LABEL = {"grafana_dashboard": "1"}
#: Series the alerts read that the agent does not serve: Prometheus' own scrape health and
#: kube-state-metrics' node taints (a metric of the operator's stack, not of ours).
EXTERNAL_SERIES = frozenset({"up", "kube_node_spec_taint"})

# The agent fails a CNI ADD whose addresses IMDS has not listed by this deadline (its default
# add_timeout_seconds); half of it is where a slow VPC starts failing pods under load.
_ADD_DEADLINE_SECONDS = float(
    next(f.default for f in dataclasses.fields(AgentConfig) if f.name == "add_timeout_seconds")  # type: ignore[arg-type]
)
_SLOW_SECONDS = _ADD_DEADLINE_SECONDS / 2
# Throttles, and calls the client-side rate limit held back (it follows EC2's throttles).
_THROTTLE_CODES = "|".join(sorted({*RETRYABLE_EC2_CODES, CLIENT_RATE_LIMITED}))


@dataclass(frozen=True)
class Alert:
    """One alerting rule: `expr` fires once true for `for_`; `runbook` is what the operator does."""

    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str
    runbook: str

    def rule(self) -> dict[str, Any]:
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity},
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook": self.runbook,
            },
        }


def alerts(namespace: str) -> list[Alert]:
    """The agent's alerts; `namespace` is the PodMonitor's (its scrape job's name)."""
    job = f"{namespace}/{POD_MONITOR_NAME}"
    return [
        # A target down for 5 m is no restart (the agent starts in seconds): Multus pods on the
        # node cannot get their addresses, or nothing watches them (port blocked).
        Alert(
            "MultusPodIpsAgentDown",
            f'up{{job="{job}"}} == 0',
            "5m",
            "critical",
            "The pod IP agent on {{ $labels.node }} does not answer its metrics scrape.",
            "Prometheus has not scraped {{ $labels.instance }} for 5 minutes: the agent is "
            "down (CNI ADDs of Multus pods on the node fail) or the node's security group "
            "blocks the metrics port.",
            # The pod label, not app=multus-pod-ips: each pool's agents are a DaemonSet of
            # their own, multus-pod-ips-<pool> (config/node_labels.py, pool_object_name).
            f"kubectl -n {namespace} get pod {{{{ $labels.pod }}}} -o wide; kubectl -n "
            f"{namespace} logs {{{{ $labels.pod }}}} -c agent; check that the node security "
            "group admits the scraper on port 61690.",
        ),
        # Calls that failed for good (multus_pod_ips_ec2_failures_total, once per call, with
        # the error it ended with), not every attempt: a 5xx the retries get past is no
        # refusal. Throttles have their own alert; what is left are refusals no retry fixes
        # (UnauthorizedOperation, InvalidParameterValue, PrivateIpAddressLimitExceeded) or
        # 5xx and connection errors that outlast the agent's retries. Ten minutes is no blip.
        Alert(
            "MultusPodIpsEc2Refused",
            "sum by (node, action, code) (rate(multus_pod_ips_ec2_failures_total"
            f'{{job="{job}",code!~"{_THROTTLE_CODES}"}}[5m])) > 0',
            "10m",
            "critical",
            "EC2 refuses {{ $labels.action }} from the pod IP agent on {{ $labels.node }}.",
            "{{ $labels.action }} has failed with {{ $labels.code }} for 10 minutes: Multus "
            "pods on the node fail to start or keep addresses they no longer need.",
            "UnauthorizedOperation: the node role's policy; InvalidParameterValue: a NAD used "
            "outside its AZ; PrivateIpAddressLimitExceeded: the ENI is full (see "
            "MultusPodIpsEniNearlyFull). The agent's log names the address.",
        ),
        # One throttle is routine at a burst; 15 minutes of them mean the account's EC2
        # buckets stay empty, which the VPC CNI and Karpenter share.
        Alert(
            "MultusPodIpsEc2Throttled",
            f'sum by (node) (rate(multus_pod_ips_ec2_throttles_total{{job="{job}"}}[5m])) > 0',
            "15m",
            "warning",
            "EC2 has throttled the pod IP agent on {{ $labels.node }} for 15 minutes.",
            "The account's EC2 request buckets stay empty: pods start late (the agent retries "
            "and lowers its own rate), and the VPC CNI and Karpenter are throttled too.",
            "Find who else calls EC2 (CloudWatch EC2 API request metrics per action); at scale "
            "move churn-heavy networks to ip_management node_prefix (docs/node-prefix-mode.md).",
        ),
        # Addresses waiting for their remap: a moved address counts only once IMDS lists it on
        # the new ENI; past half the ADD deadline, moves under load start failing pods.
        Alert(
            "MultusPodIpsRemapSlow",
            "histogram_quantile(0.99, sum by (node, network, le) (rate("
            f'multus_pod_ips_imds_lag_seconds_bucket{{job="{job}"}}[15m]))) > {_SLOW_SECONDS:g}',
            "15m",
            "warning",
            "Addresses on {{ $labels.node }} ({{ $labels.network }}) wait long for IMDS.",
            "The 99th percentile from EC2's assign until IMDS lists the address is "
            f"{{{{ $value | humanize }}}} s, above {_SLOW_SECONDS:g} s (half the "
            f"{_ADD_DEADLINE_SECONDS:g} s ADD deadline): pods whose address moves start late, "
            "and soon fail.",
            "Usually the VPC's propagation, not the agent: compare other nodes and AZs; if one "
            "node only, drain it. Pods that failed are retried by the kubelet.",
        ),
        # The whole ADD, not only the remap: queueing behind throttles or a busy ENI worker.
        Alert(
            "MultusPodIpsAssignSlow",
            "histogram_quantile(0.99, sum by (node, network, le) (rate("
            f'multus_pod_ips_assign_seconds_bucket{{job="{job}"}}[10m]))) > {_SLOW_SECONDS:g}',
            "10m",
            "warning",
            "Multus pods on {{ $labels.node }} ({{ $labels.network }}) wait for their address.",
            "The 99th percentile of CNI ADDs is {{ $value | humanize }} s, above "
            f"{_SLOW_SECONDS:g} s of the {_ADD_DEADLINE_SECONDS:g} s deadline: pods sit in "
            "ContainerCreating and the slowest fail.",
            "Look for MultusPodIpsEc2Throttled or MultusPodIpsRemapSlow on the same node; the "
            "agent's log has each ADD's time.",
        ),
        # Reconcile corrections are drift: an address without a live pod, a live pod's
        # address missing, IMDS against the record. One is a lost DEL; corrections that keep
        # coming for an hour mean something changes the ENI behind the agent's back.
        Alert(
            "MultusPodIpsReconcileDrift",
            "sum by (node, network, kind) (rate(multus_pod_ips_reconcile_corrections_total"
            f'{{job="{job}"}}[30m])) > 0',
            "1h",
            "warning",
            "The pod IP agent on {{ $labels.node }} keeps correcting {{ $labels.network }} "
            "({{ $labels.kind }}).",
            "The reconcile has found the ENI and the node's pods apart again and again for an "
            "hour: another tool changes the ENI's addresses, or DELs keep getting lost.",
            "Look in CloudTrail for Assign/UnassignPrivateIpAddresses on the node's ENI by "
            "another principal; the agent's log names each corrected address.",
        ),
        # Below two free addresses the next Multus pods of that network on the node fail
        # (CNI error 101): Karpenter sizes nodes by CPU and memory, not by ENI addresses.
        Alert(
            "MultusPodIpsEniNearlyFull",
            f'multus_pod_ips_eni_address_slots_free{{job="{job}"}} < 2',
            "5m",
            "warning",
            "The {{ $labels.network }} ENI on {{ $labels.node }} has {{ $value }} free addresses.",
            "The instance type's addresses per ENI are nearly used up: the next Multus pods of "
            "this network on the node fail to start.",
            "Narrow the pool to instance types with more addresses per ENI "
            "(node_pools[].instance_cpus / instance_families) or cap Multus pods per node "
            "(docs/multus-pod-ips.md, Limits).",
        ),
        # A healthy node loses the startup taint within minutes of joining (bootstrap, Multus
        # config, agent ready); one that still has it after 15 m has a bootstrap that hung or
        # failed without powering off, or a missing CNI piece. Read from kube-state-metrics: the
        # bootstrap itself serves no metrics.
        Alert(
            "MultusNodeNotReady",
            f'max by (node) (kube_node_spec_taint{{key="{MULTUS_NOT_READY_TAINT.key}"}}) > 0',
            "15m",
            "warning",
            "{{ $labels.node }} still has the Multus startup taint after 15 minutes.",
            "Multus pods cannot land on the node: its ENI bootstrap has not written its "
            "readiness marker, or Multus, Whereabouts or the pod IP agent are not ready there.",
            f"kubectl -n {CLEARTAINTS_NAMESPACE} get pods -o wide --field-selector "
            "spec.nodeName={{ $labels.node }} finds the node's cleartaints pod (cleartaints, "
            "or cleartaints-<pool>), whose log says what is missing; for the bootstrap read "
            "/var/log/multus-eni-bootstrap.log or the instance tag multus-eni/bootstrap-failure "
            "(docs/operations.md, A node powered itself off).",
        ),
    ]


@dataclass(frozen=True)
class MonitoringProps:
    """agent_names: the agents' DaemonSet names (their pods' `app` label), one per pool.
    selector_labels: for the Prometheus resource's podMonitorSelector and ruleSelector."""

    agent_names: Sequence[str]
    namespace: str = "kube-system"
    selector_labels: Mapping[str, str] = field(default_factory=dict)


def prometheus_rule_spec(namespace: str) -> dict[str, Any]:
    """The PrometheusRule's spec: one group with every alert."""
    return {"groups": [{"name": RULE_GROUP, "rules": [a.rule() for a in alerts(namespace)]}]}


class MultusPodIpsMonitoringChart(cdk8s.Chart):
    """The PodMonitor, the PrometheusRule and the dashboard ConfigMap."""

    def __init__(self, scope: Construct, construct_id: str, props: MonitoringProps) -> None:
        super().__init__(scope, construct_id)
        pod_monitor = api_object(
            self,
            "pod-monitor",
            api_version=MONITORING_API,
            kind="PodMonitor",
            name=POD_MONITOR_NAME,
            namespace=props.namespace,
            body={
                "spec": {
                    "selector": {
                        "matchExpressions": [
                            {"key": "app", "operator": "In", "values": list(props.agent_names)}
                        ]
                    },
                    "namespaceSelector": {"matchNames": [props.namespace]},
                    "podMetricsEndpoints": [
                        {
                            "port": "metrics",
                            "path": "/metrics",
                            # The alerts and the dashboard speak of nodes; on the host network
                            # the instance is only the node's address.
                            "relabelings": [
                                {
                                    "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                                    "targetLabel": "node",
                                }
                            ],
                        }
                    ],
                }
            },
        )
        rule = api_object(
            self,
            "prometheus-rule",
            api_version=MONITORING_API,
            kind="PrometheusRule",
            name=RULE_GROUP,
            namespace=props.namespace,
            body={"spec": prometheus_rule_spec(props.namespace)},
        )
        for labelled in (pod_monitor, rule):
            for key, value in props.selector_labels.items():
                labelled.metadata.add_label(key, value)
        dashboard_map = api_object(
            self,
            "dashboard",
            api_version="v1",
            kind="ConfigMap",
            name="multus-pod-ips-dashboard",
            namespace=props.namespace,
            body={"data": {"multus-pod-ips.json": json.dumps(dashboard(), indent=2)}},
        )
        for key, value in DASHBOARD_LABEL.items():
            dashboard_map.metadata.add_label(key, value)
