"""The deploy box: the cluster box's control plane, the OCI registry with the Karpenter charts
on loopback, the system node group's nodes with the kubelet's part for pods, and aws-cdk's
kubectl handler fed CloudFormation's events (package docstring)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from testing_support.cluster_box.build import build_all
from testing_support.cluster_box.control_plane import ControlPlane, running
from testing_support.deploy_box.handler import (
    KubectlHandler,
    function_environment,
    function_timeout,
    handler_asset,
    write_aws_stand_in,
)
from testing_support.deploy_box.nodes import PodPlayer, register, system_nodes
from testing_support.deploy_box.registry import Registry, push_release_charts, running_registry
from testing_support.deploy_box.stack import (
    StackEvent,
    create_events,
    delete_events,
    update_events,
)
from testing_support.karpenter_box.app_world import AppTemplates
from testing_support.karpenter_box.build import module_source
from testing_support.karpenter_box.chart import layer_tools
from testing_support.karpenter_box.kube_api import KubeApi

HANDLER_ACCOUNT = "cdk-kubectl-handler"
STACK_ID = "arn:aws:cloudformation:{region}:123456789012:stack/{stack}/00000000-0000-0000-0000-0"


@dataclass
class DeployBox:
    """A running box: what the tests read (plane, api) and the events they send."""

    plane: ControlPlane
    registry: Registry
    api: KubeApi
    #: helm of the first app's kubectl layer, for rendering the charts the way the handler does.
    helm: Path
    #: (chart, Karpenter version) -> the packaged chart the registry serves.
    charts: dict[tuple[str, str], Path]
    sandbox: Path
    handler_kubeconfig: Path
    pods: PodPlayer
    #: Logical ID -> the physical ID the provider framework gave it (Create: the RequestId).
    physical_ids: dict[str, str] = field(default_factory=dict)
    handlers: list[KubectlHandler] = field(default_factory=list)

    def handler(self, app: AppTemplates, assembly: Path) -> KubectlHandler:
        """The app's kubectl handler, in the box's one sandbox (a warm Lambda keeps its /tmp)."""
        template = app.cluster
        asset = handler_asset(assembly, template)
        region = app.config.region
        handler = KubectlHandler(
            asset=asset,
            sandbox=self.sandbox,
            # The layer of the app's Kubernetes minor: a version bump replaces the handler's layer.
            tools=layer_tools(app.config.cluster.kubernetes_version)["kubectl"].parent,
            region=region,
            stack_id=STACK_ID.format(region=region, stack=app.cluster_stack),
            function_variables=function_environment(template, asset.name.removeprefix("asset.")),
            route=self.registry.environment(),
            timeout_seconds=function_timeout(template, asset.name.removeprefix("asset.")),
        )
        write_aws_stand_in(handler, app.config.cluster_name, self.handler_kubeconfig)
        self.handlers.append(handler)
        return handler

    def send(self, handler: KubectlHandler, events: Sequence[StackEvent]) -> None:
        for stack_event in events:
            physical_id = self.physical_ids.get(stack_event.logical_id)
            event = handler.event(
                stack_event.request_type,
                stack_event.logical_id,
                stack_event.resource_type,
                stack_event.properties,
                stack_event.old_properties,
                None if stack_event.request_type == "Create" else physical_id,
            )
            handler.send(event)
            if stack_event.request_type == "Create":
                self.physical_ids[stack_event.logical_id] = event["RequestId"]
            elif stack_event.request_type == "Delete":
                self.physical_ids.pop(stack_event.logical_id, None)

    def create(self, app: AppTemplates, assembly: Path) -> list[StackEvent]:
        events = create_events(app)
        self.send(self.handler(app, assembly), events)
        return events

    def update(self, before: AppTemplates, after: AppTemplates, assembly: Path) -> list[StackEvent]:
        events = update_events(before, after)
        self.send(self.handler(after, assembly), events)
        return events

    def delete(self, app: AppTemplates, assembly: Path) -> list[StackEvent]:
        events = delete_events(app)
        self.send(self.handler(app, assembly), events)
        return events


def _handler_kubeconfig(plane: ControlPlane, path: Path) -> Path:
    """A bearer token of a service account bound to cluster-admin: what EKS gives the provider
    role's access entry (AmazonEKSClusterAdminPolicy)."""
    plane.kubectl("create", "serviceaccount", HANDLER_ACCOUNT, "-n", "kube-system")
    plane.kubectl(
        "create",
        "clusterrolebinding",
        HANDLER_ACCOUNT,
        "--clusterrole=cluster-admin",
        f"--serviceaccount=kube-system:{HANDLER_ACCOUNT}",
    )
    token = plane.kubectl(
        "create", "token", HANDLER_ACCOUNT, "-n", "kube-system", "--duration=24h"
    ).strip()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "eks",
                "cluster": {
                    "server": plane.server,
                    "certificate-authority": str(plane.pki.ca_cert),
                },
            }
        ],
        "users": [{"name": "handler", "user": {"token": token}}],
        "contexts": [{"name": "eks", "context": {"cluster": "eks", "user": "handler"}}],
        "current-context": "eks",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


@contextmanager
def running_deploy_box(
    directory: Path,
    cluster_template: dict[str, object],
    zones: list[str],
    *,
    kubernetes_minor: str,
    karpenter_versions: Sequence[str],
) -> Iterator[DeployBox]:
    """A box with the charts of each of `karpenter_versions` in its registry (a version bump
    pulls the new one) and the system nodes of `cluster_template`'s node group registered."""
    binaries = build_all()
    tools = layer_tools(kubernetes_minor)
    modules = {version: module_source(version) for version in karpenter_versions}
    with (
        running(directory / "cluster", binaries) as plane,
        running_registry(directory / "registry") as registry,
    ):
        charts = {
            (chart, version): packaged
            for version, module in modules.items()
            for chart, packaged in push_release_charts(
                registry, tools["helm"], module, version, directory
            ).items()
        }
        api = KubeApi(plane)
        for node in system_nodes(cluster_template, zones):
            register(api, node)
        kubeconfig = _handler_kubeconfig(plane, directory / "handler.kubeconfig")
        pods = PodPlayer(api)
        pods.start()
        try:
            yield DeployBox(
                plane=plane,
                registry=registry,
                api=api,
                helm=tools["helm"],
                charts=charts,
                sandbox=directory / "lambda",
                handler_kubeconfig=kubeconfig,
                pods=pods,
            )
        finally:
            pods.stop()
