"""The annotation kubectl writes into every object the kubectl handler deploys, and its limit.

aws-cdk's kubectl handler creates a manifest's objects with `kubectl create --save-config` (or
`kubectl apply`) and updates them with client-side `kubectl apply`: each stores the whole object
in its kubectl.kubernetes.io/last-applied-configuration annotation. The API server refuses an
object whose annotations (keys and values, in bytes) pass 256 KiB (k8s.io/apimachinery v0.35
pkg/api/validation/objectmeta.go: TotalAnnotationSizeLimitB = 256 * (1 << 10)), so an object
near that size deploys once and fails the next time it grows.

kubectl's value is the object without that annotation as Go's encoding/json writes it (k8s.io/
kubectl v0.35 pkg/util/apply.go GetModifiedConfiguration: runtime.Encode with the unstructured
JSON scheme, which is json.NewEncoder(w).Encode of the object: keys sorted, no spaces, <, > and
& escaped as \\u003c, \\u003e and \\u0026, a final newline). `annotation_bytes` computes the
same; the synth stops above SAFE_ANNOTATION_BYTES, which leaves room for what the template's
tokens resolve to at deploy time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: All annotations of one object, keys and values: k8s.io/apimachinery's limit.
ANNOTATION_LIMIT_BYTES = 256 * 1024
#: The most the synth accepts: 16 KiB below the limit for the deploy-time values of tokens.
SAFE_ANNOTATION_BYTES = 240 * 1024
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028"} | {
    "\u2029": "\\u2029"
}


class AnnotationTooLarge(ValueError):
    """An object whose last-applied-configuration annotation would pass the safe bound."""


def go_json(value: Any) -> str:
    """`value` as Go's json.Encoder writes it (HTML-escaped, keys sorted, a final newline)."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    for character, escape in _GO_ESCAPES.items():
        text = text.replace(character, escape)
    return text + "\n"


def annotation_bytes(obj: Mapping[str, Any]) -> int:
    """The bytes of all annotations the object has once kubectl wrote its last-applied
    configuration: its own annotations, and that one's key and value."""
    metadata = dict(obj.get("metadata", {}))
    annotations = {k: v for k, v in metadata.get("annotations", {}).items() if k != LAST_APPLIED}
    stripped = {**obj, "metadata": {**metadata, "annotations": annotations}}
    if not annotations:
        del stripped["metadata"]["annotations"]
    value = go_json(stripped)
    own = sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items())
    return own + len(LAST_APPLIED) + len(value.encode())


def check_annotation_sizes(manifest: str, objects: Iterable[Mapping[str, Any]]) -> None:
    """AnnotationTooLarge naming each object of `manifest` past SAFE_ANNOTATION_BYTES."""
    problems = []
    for obj in objects:
        size = annotation_bytes(obj)
        if size > SAFE_ANNOTATION_BYTES:
            metadata = obj.get("metadata", {})
            where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
            problems.append(
                f"{obj.get('kind')} {where}{metadata.get('name')} in manifest {manifest}: "
                f"kubectl's {LAST_APPLIED} annotation would make its annotations {size} bytes"
            )
    if problems:
        raise AnnotationTooLarge(
            "; ".join(problems)
            + f". The API server refuses more than {ANNOTATION_LIMIT_BYTES} bytes of annotations "
            f"(k8s.io/apimachinery TotalAnnotationSizeLimitB) and the synth stops above "
            f"{SAFE_ANNOTATION_BYTES}: split the object (a ConfigMap into several) or shrink it"
        )
