"""What is in the box's cluster, and what the app's templates say should be.

`live(plane)`: every object the API server lists, of every resource type that can be listed,
less what others derive from ours (anything with an ownerReference: pods, ReplicaSets,
ControllerRevisions, EndpointSlices; Events, Endpoints and Leases, which controllers write
without one; each namespace's kube-root-ca.crt and default ServiceAccount, the APIService the API
server registers for each API group). A test subtracts
what the box had before the first event (`baseline`).

`expected(events, box)`: the objects of the app's kubectl manifests (as resolved for the
handler), and of each Helm release what `helm template` makes of the registry's chart with the
release's values, plus helm's own record of the release (its `sh.helm.release.v1.<release>.v<n>`
Secrets, which helm keeps per revision).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from testing_support.cluster_box.control_plane import ControlPlane
from testing_support.deploy_box.handler import HELM_CHART, MANIFEST

#: Kinds controllers write beside ours without an ownerReference.
DERIVED_KINDS = frozenset({"Event", "Endpoints", "Lease", "Node"})
AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
LIST_RETRY_SECONDS = 60.0
HANDLER_MANAGERS = ("kubectl", "helm")
HELM_RECORD = re.compile(r"sh\.helm\.release\.v1\.(?P<release>.+)\.v(?P<revision>\d+)$")


class Identity(NamedTuple):
    """An object's group, kind, namespace ('' for cluster-scoped) and name."""

    group: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        kind = f"{self.kind}.{self.group}" if self.group else self.kind
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{kind} {where}{self.name}"


def identity(obj: Mapping[str, Any], namespaced: Mapping[tuple[str, str], bool]) -> Identity:
    group = obj["apiVersion"].rpartition("/")[0]
    kind = obj["kind"]
    metadata = obj["metadata"]
    namespace = metadata.get("namespace", "")
    # kubectl puts a namespaced object without one into the kubeconfig's namespace: default
    scoped = namespaced.get((group, kind), bool(namespace))
    return Identity(group, kind, (namespace or "default") if scoped else "", metadata["name"])


def resource_types(plane: ControlPlane) -> tuple[list[str], dict[tuple[str, str], bool]]:
    """The listable resource types (group-qualified names) and, per (group, kind), whether
    it is namespaced."""
    names = plane.kubectl("api-resources", "--verbs=list", "-o", "name").split()
    table = plane.kubectl("api-resources", "--verbs=list", "--no-headers")
    namespaced: dict[tuple[str, str], bool] = {}
    for line in table.splitlines():
        fields = line.split()
        # NAME [SHORTNAMES] APIVERSION NAMESPACED KIND
        kind, is_namespaced, api_version = fields[-1], fields[-2], fields[-3]
        namespaced[(api_version.rpartition("/")[0], kind)] = is_namespaced == "true"
    return names, namespaced


def written_by_the_handler(obj: Mapping[str, Any]) -> bool:
    """Whether kubectl or helm (the handler's tools) wrote any of the object's fields, by the
    field managers the API server records (kubectl-create, kubectl-client-side-apply,
    kubectl-patch, helm; Helm for its release records)."""
    managers = {entry.get("manager", "") for entry in obj["metadata"].get("managedFields", [])}
    return any(manager.lower().startswith(HANDLER_MANAGERS) for manager in managers)


def _listed(plane: ControlPlane) -> tuple[list[dict[str, Any]], dict[tuple[str, str], bool]]:
    """Every object of every listable type; again while a type goes away between discovery and
    the list (a deleted CRD's finalizer runs after the delete returned)."""
    deadline = time.monotonic() + LIST_RETRY_SECONDS
    while True:
        names, namespaced = resource_types(plane)
        try:
            listed = plane.kubectl(
                "get", ",".join(names), "-A", "-o", "json", "--show-managed-fields"
            )
        except RuntimeError as error:
            if "doesn't have a resource type" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(1)
            continue
        return list(json.loads(listed)["items"]), namespaced


def live(plane: ControlPlane) -> dict[Identity, dict[str, Any]]:
    listed, namespaced = _listed(plane)
    found = {}
    for obj in listed:
        metadata = obj["metadata"]
        if obj["kind"] in DERIVED_KINDS or metadata.get("ownerReferences"):
            continue
        if obj["kind"] == "ConfigMap" and metadata["name"] == "kube-root-ca.crt":
            continue
        if obj["kind"] == "ServiceAccount" and metadata["name"] == "default":
            continue
        if AUTOMANAGED in metadata.get("labels", {}):  # the API server's APIService per group
            continue
        found[identity(obj, namespaced)] = obj
    return found


def helm_template(
    helm: Path, chart: Path, release: str, namespace: str, values: Mapping[str, Any]
) -> list[dict[str, Any]]:
    with tempfile.NamedTemporaryFile("w", suffix=".json") as values_file:
        json.dump(values, values_file)
        values_file.flush()
        completed = subprocess.run(
            [
                str(helm),
                "template",
                release,
                str(chart),
                f"--namespace={namespace}",
                f"--values={values_file.name}",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
    return [d for d in yaml.safe_load_all(completed.stdout) if d]


def expected(
    resources: Mapping[str, tuple[str, Mapping[str, Any]]],
    charts: Mapping[tuple[str, str], Path],
    helm: Path,
    namespaced: Mapping[tuple[str, str], bool],
) -> dict[Identity, dict[str, Any]]:
    """The objects of the kubectl provider resources `resources` (logical ID -> (type,
    resolved properties)), each mapped to the object the template gives; a chart is rendered
    from `charts` by its name and version."""
    objects: dict[Identity, dict[str, Any]] = {}
    for resource_type, properties in resources.values():
        if resource_type == MANIFEST:
            items: Iterable[dict[str, Any]] = json.loads(properties["Manifest"])
        elif resource_type == HELM_CHART:
            release = properties["Release"]
            namespace = properties.get("Namespace", "default")
            values = json.loads(properties.get("Values", "{}"))
            chart = charts[(properties["Chart"], properties["Version"])]
            items = helm_template(helm, chart, release, namespace, values)
            for item in items:  # helm installs a namespaced object into the release's namespace
                group = item["apiVersion"].rpartition("/")[0]
                if namespaced.get((group, item["kind"]), False):
                    item["metadata"].setdefault("namespace", namespace)
        else:
            continue
        for item in items:
            objects[identity(item, namespaced)] = item
    return objects


def helm_records(objects: Mapping[Identity, Any]) -> dict[Identity, tuple[str, int]]:
    """The Secrets in which helm records a release's revisions: identity -> (release, n)."""
    records = {}
    for ident in objects:
        match = HELM_RECORD.match(ident.name) if ident.kind == "Secret" else None
        if match:
            records[ident] = (match["release"], int(match["revision"]))
    return records
