"""CloudFormation's events for the kubectl provider's resources of a cluster template, in the
order model's order (testing_support/cloudformation_order.py, cloudformation_changes.py).

- create: every resource of a kubectl provider type, Create, in the creation walk;
- update: the walk of the new template: each added resource Create, each changed one Update
  with OldResourceProperties (custom resources are updated, never replaced by CloudFormation);
  then the cleanup phase: each removed resource Delete with its last properties, in the old
  template's deletion order;
- delete: every resource Delete in the deletion walk (a resource goes once nothing that names
  it is left).

Properties are resolved as CloudFormation would hand them over (intrinsics resolved by
testing_support/iam_reference's TemplateResolver; the EKS cluster's Ref is the config's cluster
name, so the handler's log-in names the real cluster).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from testing_support.cloudformation_changes import compare
from testing_support.cloudformation_order import StackOrder
from testing_support.deploy_box.handler import KUBECTL_TYPES
from testing_support.iam_call_level import resolver
from testing_support.karpenter_box.app_world import AppTemplates


@dataclass(frozen=True)
class StackEvent:
    """One request CloudFormation sends the kubectl provider."""

    request_type: str
    logical_id: str
    resource_type: str
    properties: Mapping[str, Any]
    old_properties: Mapping[str, Any] | None = None


def physical_ids(app: AppTemplates) -> dict[str, str]:
    (cluster,) = app.logical_ids("AWS::EKS::Cluster")
    return {cluster: app.config.cluster_name}


def resolved_properties(app: AppTemplates) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each kubectl provider resource of the cluster template: (type, resolved properties)."""
    resolve = resolver(dict(app.templates), app.cluster_stack, physical_ids(app)).resolve
    return {
        logical_id: (resource["Type"], dict(resolve(resource.get("Properties", {}))))
        for logical_id, resource in app.cluster["Resources"].items()
        if resource["Type"] in KUBECTL_TYPES
    }


def create_events(app: AppTemplates) -> list[StackEvent]:
    resources = resolved_properties(app)
    return [
        StackEvent("Create", logical_id, *resources[logical_id])
        for logical_id in StackOrder(app.cluster).creation_order
        if logical_id in resources
    ]


def _deletion_order(template: Mapping[str, Any]) -> Iterator[str]:
    for wave in StackOrder(template).deletion_waves:
        yield from sorted(wave)


def delete_events(app: AppTemplates) -> list[StackEvent]:
    resources = resolved_properties(app)
    return [
        StackEvent("Delete", logical_id, *resources[logical_id])
        for logical_id in _deletion_order(app.cluster)
        if logical_id in resources
    ]


def update_events(before: AppTemplates, after: AppTemplates) -> list[StackEvent]:
    if before.cluster_stack != after.cluster_stack:
        raise ValueError("an update keeps the stack's name")
    changes = compare(before.templates, after.templates).stacks[after.cluster_stack]
    old, new = resolved_properties(before), resolved_properties(after)
    events = []
    for logical_id in StackOrder(after.cluster).creation_order:
        if logical_id not in new:
            continue
        resource_type, properties = new[logical_id]
        if logical_id in changes.added:
            events.append(StackEvent("Create", logical_id, resource_type, properties))
        elif logical_id in changes.updated or logical_id in changes.replaced:
            events.append(
                StackEvent("Update", logical_id, resource_type, properties, old[logical_id][1])
            )
    for logical_id in _deletion_order(before.cluster):
        if logical_id in changes.removed and logical_id in old:
            events.append(StackEvent("Delete", logical_id, *old[logical_id]))
    return events
