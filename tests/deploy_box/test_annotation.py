"""The last-applied-configuration annotation the real handler's kubectl writes (on Create,
`kubectl create --save-config`; on Update, client-side `kubectl apply`), measured on the largest
object of the default app, against the synth's estimate (cdk_constructs/kubectl_annotation.py)
and the API server's limit on an object's annotations."""

from __future__ import annotations

import json

import pytest

from cdk_constructs.kubectl_annotation import (
    ANNOTATION_LIMIT_BYTES,
    LAST_APPLIED,
    SAFE_ANNOTATION_BYTES,
    annotation_bytes,
)
from testing_support.deploy_box.handler import MANIFEST
from testing_support.deploy_box.inventory import live, written_by_the_handler
from testing_support.deploy_box.stack import resolved_properties
from tests.conftest import SynthesizedApp
from tests.deploy_box.conftest import StartBox, assembly, templates

pytestmark = pytest.mark.deploy_box


def test_the_largest_objects_annotation_is_the_estimate_and_below_the_limit(
    default_app: SynthesizedApp, start_box: StartBox
) -> None:
    app = templates(default_app)
    box = start_box(app)
    box.create(app, assembly(default_app))

    measured = {}
    for identity, obj in live(box.plane).items():
        annotations = obj["metadata"].get("annotations", {})
        if written_by_the_handler(obj) and LAST_APPLIED in annotations:
            measured[(identity.kind, identity.name)] = sum(
                len(k.encode()) + len(v.encode()) for k, v in annotations.items()
            )
    largest = max(measured, key=lambda key: measured[key])
    assert largest == ("ConfigMap", "multus-pod-ips")
    assert 100_000 < measured[largest] < SAFE_ANNOTATION_BYTES < ANNOTATION_LIMIT_BYTES
    # The synth's estimate of the object the handler got (resolved) is what kubectl wrote, to
    # within what kubectl adds on its own (the namespace of an object that names none).
    (template_object,) = [
        o
        for resource_type, properties in resolved_properties(app).values()
        if resource_type == MANIFEST
        for o in json.loads(properties["Manifest"])
        if (o["kind"], o["metadata"]["name"]) == largest
    ]
    assert abs(annotation_bytes(template_object) - measured[largest]) <= 64, (
        annotation_bytes(template_object),
        measured[largest],
    )
