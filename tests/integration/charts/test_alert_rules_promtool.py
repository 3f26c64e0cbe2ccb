"""The PrometheusRule's alerts through Prometheus' own promtool (built from its Go module:
testing_support/promtool): `promtool check rules` on the rendered group, and `promtool test
rules` on recorded input series, one file per alert in alert_tests/ (it fires when it should,
and stays silent just below its threshold). Without Go these tests skip and say why; under
CI=true they fail instead.

The rule file promtool reads is the PrometheusRule's spec as the chart renders it: the
operator's spec.groups is Prometheus' rule file format."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from charts.multus_pod_ips_monitoring import alerts, prometheus_rule_spec
from testing_support.promtool import BuildError, build

ALERT_TESTS = Path(__file__).parent / "alert_tests"
NAMESPACE = "kube-system"  # the agents' (stacks/cluster_props.py: the pod IP chart's)


@pytest.fixture(scope="module")
def promtool() -> Path:
    try:
        return build()
    except BuildError as error:
        if os.environ.get("CI"):
            pytest.fail(f"promtool: {error}")
        pytest.skip(f"promtool cannot be built: {error}")


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(prometheus_rule_spec(NAMESPACE)))
    return tmp_path


def run(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )


def test_promtool_accepts_the_rules(promtool: Path, rules_dir: Path) -> None:
    done = run(promtool, "check", "rules", "rules.yaml", cwd=rules_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts(NAMESPACE))} rules found" in done.stdout


def test_every_alert_has_its_test_file_firing_and_silent() -> None:
    assert {p.stem for p in ALERT_TESTS.glob("*.yaml")} == {a.name for a in alerts(NAMESPACE)}
    for path in ALERT_TESTS.glob("*.yaml"):
        checks = [
            check
            for test in yaml.safe_load(path.read_text())["tests"]
            for check in test["alert_rule_test"]
        ]
        assert all(check["alertname"] == path.stem for check in checks), path.name
        assert any(check["exp_alerts"] for check in checks), f"{path.name}: never fires"
        assert any(not check["exp_alerts"] for check in checks), f"{path.name}: never silent"


@pytest.mark.parametrize("alert", sorted(p.stem for p in ALERT_TESTS.glob("*.yaml")))
def test_alert_fires_above_its_threshold_only(alert: str, promtool: Path, rules_dir: Path) -> None:
    shutil.copy(ALERT_TESTS / f"{alert}.yaml", rules_dir)
    done = run(promtool, "test", "rules", f"{alert}.yaml", cwd=rules_dir)
    assert done.returncode == 0, done.stdout + done.stderr
