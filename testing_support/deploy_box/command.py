"""`make cluster-box CONFIG=<a> THEN=<b> CMD=...`: config a's app deployed through aws-cdk's
kubectl handler, then updated to config b's the same way (CloudFormation's update events of b's
synth against a's: Create, Update with OldResourceProperties, the cleanup phase's Deletes), then
CMD, which sees exactly what a deploy of b after a leaves in the cluster. This is the deploy box
(package docstring): a real control plane and the real handler, no Karpenter controller, no EC2;
the Prometheus Operator's CRDs are installed first when either config turns monitoring on, as an
operator installs the operator before that."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testing_support.deploy_box.box import running_deploy_box
from testing_support.deploy_box.handler import HandlerFailed
from testing_support.deploy_box.monitoring_crds import apply_monitoring_crds
from testing_support.karpenter_box.app_world import synthesize_stage


def deploy_then_update(
    repo: Path, work: Path, config_file: str | None, then_file: str, command: str
) -> int:
    """Runs `command` after the deploy of `config_file` (None: the default app) and the update to
    `then_file`; returns its exit code (1 when a step before it fails, saying which)."""
    first, first_assembly = synthesize_stage(repo, work / "cdk.out-config", config_file)
    then, then_assembly = synthesize_stage(repo, work / "cdk.out-then", then_file)
    if (first.network_stack, first.cluster_stack) != (then.network_stack, then.cluster_stack):
        print(
            f"cluster-box: THEN={then_file} names other stacks ({then.cluster_stack}) than "
            f"CONFIG ({first.cluster_stack}): an update keeps the stage's `name`",
            file=sys.stderr,
        )
        return 1
    versions = dict.fromkeys((first.config.karpenter.version, then.config.karpenter.version))
    with running_deploy_box(
        work / "box",
        first.cluster,
        first.config.availability_zones,
        kubernetes_minor=first.config.cluster.kubernetes_version,
        karpenter_versions=list(versions),
    ) as box:
        if any(app.config.monitoring.prometheus_operator for app in (first, then)):
            apply_monitoring_crds(box.plane)
        try:
            created = box.create(first, first_assembly)
            updated = box.update(first, then, then_assembly)
        except HandlerFailed as error:
            print(f"cluster-box: the handler failed: {error}", file=sys.stderr)
            return 1
        print(f"cluster-box: {len(created)} create events, then {len(updated)} update events "
              "through aws-cdk's kubectl handler", file=sys.stderr)  # fmt: skip
        environment = dict(box.plane.environment())
        environment["PATH"] = os.pathsep.join(
            (str(box.plane.binaries.kubectl.parent), str(repo / ".venv" / "bin"),
             os.environ.get("PATH", ""))
        )  # fmt: skip
        return subprocess.run(command, shell=True, env=environment, check=False).returncode
