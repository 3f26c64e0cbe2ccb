"""Small Kubernetes building blocks shared by several charts (the labels and taints of
Karpenter's nodes that they share with the config are in config/node_labels.py)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import cdk8s
import cdk8s_plus_28 as kplus
from constructs import Construct

from config.node_labels import NodeTaint

# Pod template annotation prefix; the name is the ConfigMap's (roll_on_change).
CONFIG_DIGEST_ANNOTATION = "configmap-sha256"
#: How the CDK encodes a deploy-time value in a string (aws-cdk-lib core token-map.ts: a
#: number from a process-wide counter, so its text differs between two synths).
_ENCODED_TOKEN = re.compile(r"\$\{Token\[[^\]]*\]\}")

TAINT_EFFECTS = {
    "NoSchedule": kplus.TaintEffect.NO_SCHEDULE,
    "PreferNoSchedule": kplus.TaintEffect.PREFER_NO_SCHEDULE,
    "NoExecute": kplus.TaintEffect.NO_EXECUTE,
}


def toleration(taint: NodeTaint) -> kplus.NodeTaintQuery:
    """A toleration of exactly this taint's key, value and effect; of a taint without value,
    operator Exists (no value at all: kplus would render Equal with value "")."""
    effect = TAINT_EFFECTS[taint.effect]
    if not taint.value:
        return kplus.NodeTaintQuery.exists(taint.key, effect=effect)
    return kplus.NodeTaintQuery.is_(taint.key, taint.value, effect=effect)


def api_object(
    scope: Construct,
    construct_id: str,
    *,
    api_version: str,
    kind: str,
    name: str,
    namespace: str | None = None,
    body: Mapping[str, Any],
) -> cdk8s.ApiObject:
    """An ApiObject whose top-level fields besides metadata (spec, data...) come from `body`."""
    obj = cdk8s.ApiObject(
        scope,
        construct_id,
        api_version=api_version,
        kind=kind,
        metadata=cdk8s.ApiObjectMetadata(name=name, namespace=namespace),
    )
    for field, value in body.items():
        obj.add_json_patch(cdk8s.JsonPatch.add(f"/{field}", value))
    return obj


def inventory_config_map(
    scope: Construct, name: str, entries: Mapping[str, Sequence[str]]
) -> cdk8s.ApiObject:
    """A ConfigMap in kube-system naming, per key, the objects of one of the app's manifests
    (comma-separated): the manifest that held them all before each got its own keeps its
    CloudFormation resource as this inventory, so an upgrade updates it instead of deleting it
    (which would delete the objects it held)."""
    return api_object(
        scope,
        "inventory",
        api_version="v1",
        kind="ConfigMap",
        name=name,
        namespace="kube-system",
        body={"data": {key: ",".join(objects) for key, objects in entries.items()}},
    )


def string_schema() -> dict[str, Any]:
    return {"type": "string"}


def object_schema(properties: Mapping[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    if required:
        schema["required"] = list(required)
    return schema


def resource_schema(
    spec: Mapping[str, Any],
    *,
    status: Mapping[str, Any] | None = None,
    required: Sequence[str] = (),
) -> dict[str, Any]:
    """openAPIV3Schema of a custom resource: the standard envelope around its spec (and status)."""
    properties: dict[str, Any] = {
        "apiVersion": string_schema(),
        "kind": string_schema(),
        "metadata": {"type": "object"},
        "spec": dict(spec),
    }
    if status is not None:
        properties["status"] = dict(status)
    return object_schema(properties, required)


def custom_resource_definition(
    scope: Construct,
    construct_id: str,
    *,
    group: str,
    kind: str,
    plural: str,
    singular: str,
    version: str,
    schema: Mapping[str, Any],
    short_names: Sequence[str] = (),
) -> cdk8s.ApiObject:
    """A namespaced CRD serving and storing a single version."""
    names: dict[str, Any] = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": singular,
    }
    if short_names:
        names["shortNames"] = list(short_names)
    return api_object(
        scope,
        construct_id,
        api_version="apiextensions.k8s.io/v1",
        kind="CustomResourceDefinition",
        name=f"{plural}.{group}",
        body={
            "spec": {
                "group": group,
                "names": names,
                "scope": "Namespaced",
                "versions": [
                    {
                        "name": version,
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": dict(schema)},
                    }
                ],
            }
        },
    )


def resources(
    *, cpu_millis: int, cpu_limit_millis: int | None, memory_mib: int, memory_limit_mib: int
) -> kplus.ContainerResources:
    """cpu_limit_millis None: no CPU limit (the container may use idle CPU, never throttled)."""
    cpu_limit = None if cpu_limit_millis is None else kplus.Cpu.millis(cpu_limit_millis)
    return kplus.ContainerResources(
        cpu=kplus.CpuResources(request=kplus.Cpu.millis(cpu_millis), limit=cpu_limit),
        memory=kplus.MemoryResources(
            request=cdk8s.Size.mebibytes(memory_mib), limit=cdk8s.Size.mebibytes(memory_limit_mib)
        ),
    )


def privileged_security_context() -> kplus.ContainerSecurityContextProps:
    """For CNI components that write to the host's CNI directories and network namespaces."""
    return kplus.ContainerSecurityContextProps(
        privileged=True,
        ensure_non_root=False,
        allow_privilege_escalation=True,
        read_only_root_filesystem=False,
    )


def root_without_capabilities_security_context(
    add: Sequence[kplus.Capability] = (),
) -> kplus.ContainerSecurityContextProps:
    """Root for host directories that root owns (the owner's write bit suffices: no
    CAP_DAC_OVERRIDE), but not privileged, no capabilities (but those in `add`), no escalation,
    the runtime's seccomp profile and a read-only image."""
    return kplus.ContainerSecurityContextProps(
        ensure_non_root=False,
        user=0,
        group=0,
        privileged=False,
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        capabilities=kplus.ContainerSecutiryContextCapabilities(
            drop=[kplus.Capability.ALL], **({"add": list(add)} if add else {})
        ),
        seccomp_profile=kplus.SeccompProfile(type=kplus.SeccompProfileType.RUNTIME_DEFAULT),
    )


def node_critical(daemon_set: kplus.DaemonSet) -> None:
    """priorityClassName system-node-critical: evicted last, and the kubelet gives its
    containers the OOM score adjustment of Guaranteed pods (-997) whatever their QoS class
    (kubernetes pkg/kubelet/qos/policy.go, GetContainerOOMScoreAdjust)."""
    cdk8s.ApiObject.of(daemon_set).add_json_patch(
        cdk8s.JsonPatch.add("/spec/template/spec/priorityClassName", "system-node-critical")
    )


def restricted_security_context(user_id: int) -> kplus.ContainerSecurityContextProps:
    """The Pod Security Standards "restricted" profile, running as `user_id`."""
    return kplus.ContainerSecurityContextProps(
        ensure_non_root=True,
        user=user_id,
        group=user_id,
        privileged=False,
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        capabilities=kplus.ContainerSecutiryContextCapabilities(drop=[kplus.Capability.ALL]),
        seccomp_profile=kplus.SeccompProfile(type=kplus.SeccompProfileType.RUNTIME_DEFAULT),
    )


def select_pods(workload: kplus.Workload, labels: Mapping[str, str]) -> None:
    """Select the workload's pods by explicit labels.

    cdk8s-plus would otherwise select on a label derived from the construct path, and a
    DaemonSet/Deployment selector is immutable: a refactor would then force a delete+create.
    """
    workload.select(kplus.LabelSelector.of(labels=dict(labels)))
    for key, value in labels.items():
        workload.pod_metadata.add_label(key, value)


def host_path_volume(scope: Construct, name: str, path: str) -> kplus.Volume:
    return kplus.Volume.from_host_path(scope, f"{name}-volume", name, path=path)


def roll_on_change(
    workload: kplus.Workload, config_map: kplus.ConfigMap, keys: Sequence[str] | None = None
) -> None:
    """Replace the workload's pods when what they read from `config_map` (its `keys`, default
    all) changes. A mounted ConfigMap is no part of the pod template, and the DaemonSet and
    Deployment controllers replace pods only for a new template (kubernetes
    pkg/controller/daemon/update.go: a pod whose controller-revision-hash is not the current
    template's is replaced): a digest of that data in a template annotation is such a change.

    A deploy-time value (an IPv6 pod range reserved by the network stack) is in the data as the
    CDK's token text, whose number depends on what the process created before it: the digest
    reads each such value as one placeholder, so two synths of one config agree and a deploy
    does not roll the pods for nothing. (Nor did it roll them for a new deploy-time value
    before: the digest never saw the value.)"""
    data = config_map.data
    read = {key: data[key] for key in sorted(keys if keys is not None else data)}
    stable = _ENCODED_TOKEN.sub("${deploy-time value}", json.dumps(read, sort_keys=True))
    digest = hashlib.sha256(stable.encode()).hexdigest()
    workload.pod_metadata.add_annotation(f"{CONFIG_DIGEST_ANNOTATION}/{config_map.name}", digest)
