"""The Karpenter box tier: the real Karpenter controller of the config's karpenter.version,
built from aws/karpenter-provider-aws's Go module, beside the cluster box's control plane,
reaching AWS through the EC2 emulator (testing_support/karpenter_box). One box per app for the
session. Without Go the tier skips and says why; under CI=true it fails instead."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from testing_support.cluster_box.build import BuildError
from testing_support.karpenter_box.app_world import AppTemplates
from testing_support.karpenter_box.box import KarpenterBox, running_karpenter_box
from tests.conftest import SynthesizedApp, shared_state_tier

#: The tier's boxes, stopped once its last test ran (not at the session's end: each box's
#: controller and kubelet player would go on polling beside the other tiers' tests).
_BOXES = ExitStack()


def started_box(app: SynthesizedApp, directory: Path) -> KarpenterBox:
    templates = AppTemplates.of_stage(app.stage, app.stage.outdir)
    try:
        return _BOXES.enter_context(running_karpenter_box(directory, templates))
    except BuildError as error:
        if os.environ.get("CI"):
            pytest.fail(f"Karpenter box: {error}")
        pytest.skip(f"Karpenter box tier cannot run: {error}")


@pytest.fixture(scope="session")
def default_box(
    default_app: SynthesizedApp, tmp_path_factory: pytest.TempPathFactory
) -> KarpenterBox:
    return started_box(default_app, tmp_path_factory.mktemp("karpenter-box"))


@pytest.fixture(scope="session")
def five_g_core_box(
    five_g_core_app: SynthesizedApp, tmp_path_factory: pytest.TempPathFactory
) -> KarpenterBox:
    return started_box(five_g_core_app, tmp_path_factory.mktemp("karpenter-box-5g"))


@pytest.fixture(scope="session")
def three_by_three_box(
    three_by_three_app: SynthesizedApp, tmp_path_factory: pytest.TempPathFactory
) -> KarpenterBox:
    """examples/three-az-three-networks.json: one pool attaching three Multus networks, so
    Karpenter's reservedENIs is 3."""
    return started_box(three_by_three_app, tmp_path_factory.mktemp("karpenter-box-3x3"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the tier's last test and its fixtures' teardown, the boxes stop."""
    yield
    if nextitem is None or shared_state_tier(nextitem.nodeid) != "karpenter_box":
        _BOXES.close()
