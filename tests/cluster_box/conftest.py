"""The cluster box tier: one real control plane for the session (testing_support/cluster_box),
with the Karpenter CRDs of the pinned chart installed (NodeOverlay's from
testing_support/upstream_crds). Without Go the tier skips and says why;
under CI=true it fails instead."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from testing_support.cluster_box.build import BuildError, build_all
from testing_support.cluster_box.control_plane import ControlPlane, running
from tests.helpers import karpenter_crd_files


@pytest.fixture(scope="session")
def cluster_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    try:
        binaries = build_all()
    except BuildError as error:
        if os.environ.get("CI"):
            pytest.fail(f"cluster box: {error}")
        pytest.skip(f"cluster box tier cannot run: {error}")
    with running(tmp_path_factory.mktemp("cluster-box"), binaries) as plane:
        for crd in karpenter_crd_files():
            plane.kubectl("apply", "--server-side", "-f", str(crd))
        plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        yield plane
