"""The deploy box tier: aws-cdk's kubectl handler, from the synthesized assets and unchanged, fed
CloudFormation's events against a real control plane (testing_support/deploy_box). A fresh box
per test (about 5 s: the control plane and the registry; the Go builds are cached). Without Go
the tier skips and says why; under CI=true it fails instead."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from testing_support.cluster_box.build import BuildError
from testing_support.deploy_box.box import DeployBox, running_deploy_box
from testing_support.karpenter_box.app_world import AppTemplates
from tests.conftest import FIVE_G_CORE, REPO, SynthesizedApp, synthesize_config

StartBox = Callable[..., DeployBox]


def templates(app: SynthesizedApp) -> AppTemplates:
    return AppTemplates.of_stage(app.stage, app.stage.outdir)


def assembly(app: SynthesizedApp) -> Path:
    return Path(app.stage.outdir)


def example(name: str) -> dict[str, Any]:
    return dict(json.loads((REPO / "examples" / name).read_text()))


@pytest.fixture
def start_box(tmp_path: Path) -> Iterator[StartBox]:
    """Starts a box for an app (its node group's nodes registered), its registry serving the
    Karpenter charts of that app and of the `later` apps it is updated to; stopped after the
    test."""
    with ExitStack() as stack:

        def start(app: AppTemplates, *later: AppTemplates) -> DeployBox:
            versions = dict.fromkeys(a.config.karpenter.version for a in (app, *later))
            try:
                return stack.enter_context(
                    running_deploy_box(
                        tmp_path / "box",
                        app.cluster,
                        app.config.availability_zones,
                        kubernetes_minor=app.config.cluster.kubernetes_version,
                        karpenter_versions=list(versions),
                    )
                )
            except BuildError as error:
                if os.environ.get("CI"):
                    pytest.fail(f"deploy box: {error}")
                pytest.skip(f"deploy box tier cannot run: {error}")

        yield start


@pytest.fixture(scope="session")
def five_g_core_without_control(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    """examples/5g-core.json without its control pool (n2 stays, without a pool); its config
    file is config.json beside the app's cdk.out."""
    config = json.loads((REPO / FIVE_G_CORE).read_text())
    config["node_pools"] = [p for p in config["node_pools"] if p["name"] != "control"]
    return synthesize_config(tmp_path_factory.mktemp("5g-core-without-control"), config)
