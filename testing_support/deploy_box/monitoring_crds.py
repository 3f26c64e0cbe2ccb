"""The Prometheus Operator's PodMonitor and PrometheusRule CRDs, for the app's monitoring objects
(monitoring.prometheus_operator: true). An operator installs them with the Prometheus Operator
before turning monitoring on; the box installs them before the first event, from
github.com/prometheus-operator/prometheus-operator's module at the version go/prometheus-operator
pins (example/prometheus-operator-crd/, the CRDs its release ships), downloaded into Go's module
cache and checked against go.sum."""

from __future__ import annotations

import shutil
from pathlib import Path

from testing_support.cluster_box.build import BuildError
from testing_support.cluster_box.control_plane import ControlPlane
from testing_support.go_build import downloaded_module, required_version

GO_MODULE = Path(__file__).parent / "go" / "prometheus-operator"
MODULE = "github.com/prometheus-operator/prometheus-operator"
MONITORING_KINDS = frozenset({"PodMonitor", "PrometheusRule"})
_CRD_FILES = (
    "monitoring.coreos.com_podmonitors.yaml",
    "monitoring.coreos.com_prometheusrules.yaml",
)


def _module_directory() -> Path:
    go = shutil.which("go")
    if go is None:
        raise BuildError("the Prometheus Operator's CRDs need Go (go on PATH) to download them")
    version = required_version(GO_MODULE, MODULE)
    if version is None:
        raise BuildError(f"{GO_MODULE}/go.mod requires no {MODULE}")
    return downloaded_module(go, GO_MODULE, MODULE, version, BuildError)


def apply_monitoring_crds(plane: ControlPlane) -> None:
    """Installs the two CRDs and waits until the API server serves them."""
    crds = _module_directory() / "example" / "prometheus-operator-crd"
    for name in _CRD_FILES:
        plane.kubectl("apply", "--server-side", "-f", "-", stdin=(crds / name).read_text())
    plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s",
        "crd/podmonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com",
    )  # fmt: skip
