"""Optional node-latency-for-k8s Helm release that times node startup (extras.node_latency)."""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks

from config.images import ImageRef

NODE_LATENCY_CHART_REPOSITORY = "oci://public.ecr.aws/g4k0u1s2/node-latency-for-k8s-chart"
NODE_LATENCY_CHART_VERSION = "v0.1.10"


def add_node_latency_monitor(cluster: eks.Cluster, image: ImageRef | None) -> None:
    cluster.add_helm_chart(
        "NodeLatencyForK8s",
        repository=NODE_LATENCY_CHART_REPOSITORY,
        chart="node-latency-for-k8s-chart",
        version=NODE_LATENCY_CHART_VERSION,
        release="node-latency-for-k8s",
        namespace="node-latency-for-k8s",
        create_namespace=True,
        # Prometheus metrics only: the CloudWatch exporter would need its own IAM role.
        # No IMDS: pods cannot reach it (hop limit 1); the IMDS-based timings are skipped.
        values={
            "env": [
                {"name": "PROMETHEUS_METRICS", "value": "true"},
                {"name": "CLOUDWATCH_METRICS", "value": "false"},
                {"name": "NO_IMDS", "value": "true"},
                {"name": "OUTPUT", "value": "markdown"},
                {"name": "TIMEOUT", "value": "250"},
            ],
            **({"image": image.helm_values()} if image else {}),
        },
    )
