"""Start the Karpenter box: the cluster box's control plane, the EC2 emulator with the app's
world in it, the app's objects applied, and the real Karpenter controller beside them with the
settings the app's Helm values give it.

The controller runs as a process on this machine with the environment of the Deployment that
`helm template` renders from the module's chart and the app's values (testing_support/
karpenter_box/chart.py), and with the RBAC that chart grants: its ServiceAccount, Roles and
ClusterRoles are applied and the controller authenticates with a token of that account. Its
deviations from the rendered Deployment, each because it runs outside a pod here:
- the API server through KUBECONFIG (a token kubeconfig of the chart's service account) instead
  of the in-cluster service-account mount;
- AWS through AWS_ENDPOINT_URL_<SERVICE> (testing_support/karpenter_box/aws.py) with the
  emulator's credentials instead of EKS Pod Identity;
- LEADER_ELECTION_NAMESPACE: in a pod, controller-runtime reads the namespace of its lease from
  the service-account mount;
- ISOLATED_VPC=true: no pricing API here (Karpenter then uses its compiled-in prices);
- its metrics and health ports chosen free (the chart's 8080 and 8081 may be taken).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.credentials import Credentials

from testing_support.cluster_box.build import build_all
from testing_support.cluster_box.control_plane import ControlPlane, running
from testing_support.cluster_box.objects import apply, apply_objects
from testing_support.cluster_box.script_container import token_kubeconfig
from testing_support.karpenter_box.app_world import AppTemplates, AppWorld, create_world
from testing_support.karpenter_box.aws import FleetLaunches, PublicParameters
from testing_support.karpenter_box.build import KarpenterBinaries, build_karpenter
from testing_support.karpenter_box.chart import (
    controller_container,
    controller_environment,
    layer_tools,
    render,
)
from testing_support.karpenter_box.kube_api import KubeApi
from testing_support.karpenter_box.kubelet import CapacityOf, KubeletPlayer
from testing_support.karpenter_box.node_allocatable import node_allocatable
from testing_support.multus_emulator import REGION, Ec2Emulator, free_port, running_emulator
from testing_support.startup import wait_until_answering

NAMESPACE = "kube-system"
#: The startup-taint remover's namespace (charts/cleartaints.py): its pods' scripts run.
REMOVER_NAMESPACE = "cleartaints"
SERVICE_ACCOUNT = "karpenter"
READY_SECONDS = 120.0
#: The credentials the controller signs with; the emulator's proxy checks EC2's signatures.
ACCESS_KEY = "AKIAKARPENTERBOX0001"
SECRET_KEY = "karpenter-box-secret-key"
TOKEN_SECONDS = 86400


@dataclass
class KarpenterBox:
    """A started box: its control plane, the emulator, the app's world, the controller."""

    plane: ControlPlane
    emulator: Ec2Emulator
    parameters: PublicParameters
    world: AppWorld
    api: KubeApi
    kubelet: KubeletPlayer
    karpenter: KarpenterBinaries
    fleets: FleetLaunches
    controller: subprocess.Popen[bytes]
    log: Path
    environment: dict[str, str]

    def controller_log(self) -> str:
        return self.log.read_text(errors="replace")

    def aws_environment(self) -> dict[str, str]:
        """What a command needs to reach the box's AWS as the controller does (make
        cluster-box CMD=...): the endpoints, the region and the credentials."""
        settings = {
            key: value
            for key, value in self.environment.items()
            if key.startswith("AWS_") and key != "AWS_EC2_METADATA_DISABLED"
        }
        # boto3 reads the region from AWS_DEFAULT_REGION (the Go SDK from AWS_REGION).
        return {**settings, "AWS_DEFAULT_REGION": settings["AWS_REGION"]}


@contextmanager
def running_karpenter_box(
    directory: Path,
    app: AppTemplates,
    *,
    capacity_of: CapacityOf | None = None,
    extra_environment: dict[str, str] | None = None,
) -> Iterator[KarpenterBox]:
    """The box for `app`, with Karpenter at the config's karpenter.version; stopped on exit.
    capacity_of: what each node reports (default: what its kubelet would, from its instance
    type and its launch template's user data: node_allocatable.py). `extra_environment`:
    settings a test adds to the controller's (e.g. a shorter interval)."""
    version = app.config.karpenter.version
    karpenter = build_karpenter(version)
    binaries = build_all()
    minor = app.config.cluster.kubernetes_version
    helm = layer_tools(minor)["helm"]
    with ExitStack() as stack:
        emulator = stack.enter_context(running_emulator())
        parameters = stack.enter_context(
            closing(PublicParameters(_host_port(emulator.proxy.upstream_url)))
        )
        fleets = FleetLaunches(emulator.ec2)
        emulator.proxy.on_answered = fleets
        world = create_world(emulator, parameters, app)
        plane = stack.enter_context(running(directory / "plane", binaries))
        apply_objects(
            plane, render(helm, karpenter.chart_directory("karpenter-crd"), {}, NAMESPACE)
        )
        for _, objects in world.manifests():
            apply_objects(plane, objects)
        rendered = render(
            helm, karpenter.chart_directory(), world.helm_values("karpenter"), NAMESPACE
        )
        apply(plane, [o for o in rendered if o["kind"] != "Deployment"])
        environment = _controller_environment(
            plane, emulator, parameters, rendered, directory, extra_environment or {}
        )
        log = directory / "karpenter.log"
        with log.open("wb") as output:
            controller = subprocess.Popen(
                [str(karpenter.controller)],
                env=environment,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        stack.callback(_stop, controller)
        _wait_ready(controller, environment, log)
        api = KubeApi(plane)
        kubelet = KubeletPlayer(
            api,
            emulator.ec2,
            capacity_of or _kubelet_reports(emulator, fleets),
            script_namespace=REMOVER_NAMESPACE,
            plane=plane,
            host_roots=directory / "nodes",
        ).start()
        stack.callback(kubelet.stop)
        yield KarpenterBox(
            plane, emulator, parameters, world, api, kubelet, karpenter, fleets, controller, log,
            environment,
        )  # fmt: skip


def _kubelet_reports(emulator: Ec2Emulator, fleets: FleetLaunches) -> CapacityOf:
    def report(
        _claim: Mapping[str, Any], instance: Mapping[str, Any]
    ) -> tuple[dict[str, str], dict[str, str]]:
        (described,) = emulator.ec2.describe_instance_types(
            InstanceTypes=[instance["InstanceType"]]
        )["InstanceTypes"]
        return node_allocatable(fleets.user_data(str(instance["InstanceId"])), described)

    return report


def _controller_environment(
    plane: ControlPlane,
    emulator: Ec2Emulator,
    parameters: PublicParameters,
    rendered: list[dict[str, Any]],
    directory: Path,
    extra: dict[str, str],
) -> dict[str, str]:
    token = plane.kubectl(
        "create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, f"--duration={TOKEN_SECONDS}s"
    ).strip()
    kubeconfig = token_kubeconfig(plane, token, directory / "karpenter.kubeconfig")
    chart = controller_environment(controller_container(rendered), NAMESPACE)
    emulator.proxy.signer = Credentials(ACCESS_KEY, SECRET_KEY)
    return {
        "PATH": os.environ.get("PATH", ""),
        **chart,
        "KUBECONFIG": str(kubeconfig),
        "AWS_REGION": chart.get("AWS_REGION", REGION),
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_ENDPOINT_URL": emulator.proxy.upstream_url,
        "AWS_ENDPOINT_URL_EC2": emulator.proxy.url,
        "AWS_ENDPOINT_URL_SSM": parameters.url,
        "AWS_EC2_METADATA_DISABLED": "true",
        "ISOLATED_VPC": "true",
        "LEADER_ELECTION_NAMESPACE": NAMESPACE,
        "METRICS_PORT": str(free_port()),
        "HEALTH_PROBE_PORT": str(free_port()),
        **extra,
    }


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _wait_ready(
    controller: subprocess.Popen[bytes], environment: dict[str, str], log: Path
) -> None:
    def exit_reason() -> str | None:
        if controller.poll() is None:
            return None
        return f"karpenter exited ({controller.returncode}):\n{log.read_text()[-3000:]}"

    wait_until_answering(
        f"http://127.0.0.1:{environment['HEALTH_PROBE_PORT']}/readyz",
        timeout_seconds=READY_SECONDS,
        exit_reason=exit_reason,
    )


def _stop(controller: subprocess.Popen[bytes]) -> None:
    controller.terminate()
    try:
        controller.wait(timeout=15)
    except subprocess.TimeoutExpired:
        controller.kill()
        controller.wait()
