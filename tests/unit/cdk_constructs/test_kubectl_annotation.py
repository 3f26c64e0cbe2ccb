"""The size of kubectl's last-applied-configuration annotation, computed as kubectl writes it,
and the synth's stop before the API server's 256 KiB limit on an object's annotations. The
deploy box measures the annotation the real handler writes (tests/deploy_box/test_annotation.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdk_constructs import kubectl_annotation
from cdk_constructs.kubectl_annotation import (
    ANNOTATION_LIMIT_BYTES,
    LAST_APPLIED,
    SAFE_ANNOTATION_BYTES,
    AnnotationTooLarge,
    annotation_bytes,
    check_annotation_sizes,
    go_json,
)
from tests.conftest import SynthesizedApp
from tests.helpers import joined_text
from tests.unit.cdk_constructs.test_cluster_workloads import Built


def config_map(data: dict[str, str], **annotations: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "big", "namespace": "kube-system"}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def test_go_json_is_what_gos_encoder_writes() -> None:
    # keys sorted, no spaces, HTML characters escaped, non-ASCII kept, a final newline
    assert go_json({"b": "a < b && c > d", "a": ["é"]}) == (
        '{"a":["é"],"b":"a \\u003c b \\u0026\\u0026 c \\u003e d"}\n'
    )


def test_the_annotation_counts_the_object_and_its_other_annotations_twice() -> None:
    obj = config_map({"k": "v"}, note="x")
    value = go_json(obj)
    # the annotations the API server sums: note (in the object) and last-applied (whose value
    # holds the object with note again)
    assert annotation_bytes(obj) == len("note") + len("x") + len(LAST_APPLIED) + len(value)
    # an annotation already there is not counted into itself
    applied = config_map({"k": "v"}, note="x", **{LAST_APPLIED: "old" * 100})
    assert annotation_bytes(applied) == annotation_bytes(obj)


def test_an_object_past_the_safe_bound_stops_the_synth_naming_it_and_its_size() -> None:
    small = config_map({"k": "v"})
    check_annotation_sizes("m", [small])
    big = config_map({"script.py": "x" * (SAFE_ANNOTATION_BYTES - 100)})
    with pytest.raises(AnnotationTooLarge) as error:
        check_annotation_sizes("multus-pod-ips", [small, big])
    message = str(error.value)
    assert "ConfigMap kube-system/big in manifest multus-pod-ips" in message
    assert str(annotation_bytes(big)) in message and str(ANNOTATION_LIMIT_BYTES) in message
    assert SAFE_ANNOTATION_BYTES < annotation_bytes(big) < ANNOTATION_LIMIT_BYTES


def test_cluster_workloads_check_every_chart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubectl_annotation, "SAFE_ANNOTATION_BYTES", 2000)
    with pytest.raises(AnnotationTooLarge, match="in manifest multus"):
        Built()


def test_the_default_apps_largest_object_is_the_agents_config_map_below_the_bound(
    default_app: SynthesizedApp,
) -> None:
    template = default_app.template_json(default_app.stage.cluster)
    sizes = {
        (o["kind"], o["metadata"]["name"]): annotation_bytes(o)
        for r in template["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
        for o in json.loads(joined_text(r["Properties"]["Manifest"]))
    }
    largest = max(sizes, key=lambda key: sizes[key])
    assert largest == ("ConfigMap", "multus-pod-ips")
    assert 100_000 < sizes[largest] < SAFE_ANNOTATION_BYTES
