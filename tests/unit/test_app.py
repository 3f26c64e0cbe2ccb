"""The app entry point turns bad config into a short message and exit code 1, not a trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

import app
from app import print_config_warnings
from config import load_config
from config.loader import LoadedConfig
from config.synth_warnings import SYNTH_WARNINGS
from node_bootstrap.renderer import deployed_size
from tests.conftest import PIPELINE_SAMPLE, REPO


def run_app(context: dict[str, str], outdir: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps(context),
        "CDK_OUTDIR": outdir,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    return subprocess.run(
        [sys.executable, "app.py"], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )


def test_bad_config_exits_with_the_field_and_no_traceback(tmp_path: Path) -> None:
    result = run_app({"config.multus.networks": '[{"name": "x", "subnets": []}]'}, str(tmp_path))
    assert result.returncode == 1
    assert "multus.networks[0].subnets" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("**/*.template.json"))


def test_synth_warns_on_stderr_when_nobody_can_use_kubectl(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_config_warnings(load_config({}, REPO))
    assert "cluster.admin_principal_arns is empty" in capsys.readouterr().err

    admins = {"config.cluster.admin_principal_arns": '["arn:aws:iam::123456789012:role/ops"]'}
    print_config_warnings(load_config(admins, REPO))
    assert "admin_principal_arns" not in capsys.readouterr().err


def test_synth_warns_on_stderr_about_an_endpoint_open_to_the_world(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_config_warnings(
        load_config({"config.cluster.public_access_cidrs": '["0.0.0.0/0"]'}, REPO)
    )
    assert "cluster.public_access_cidrs includes 0.0.0.0/0" in capsys.readouterr().err
    print_config_warnings(load_config({}, REPO))
    assert "public_access_cidrs includes" not in capsys.readouterr().err


def test_synth_warns_on_stderr_about_host_level_images_without_a_digest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_config_warnings(load_config({}, REPO))
    assert "images.multus (Multus: privileged" in capsys.readouterr().err

    digest = "sha256:" + "ab" * 32
    images = {
        f"config.images.{field}": json.dumps(
            {"repository": f"registry.example.com/{field}", "digest": digest}
        )
        for field in ("multus", "whereabouts", "cleartaints", "multus_pod_ips")
    }
    admins = {"config.cluster.admin_principal_arns": '["arn:aws:iam::123456789012:role/ops"]'}
    print_config_warnings(load_config({**images, **admins}, REPO))
    assert capsys.readouterr().err == ""


def test_old_admin_key_stops_synth_naming_the_new_one(tmp_path: Path) -> None:
    result = run_app(
        {"config.cluster.admin_principal_arn": "arn:aws:iam::123456789012:role/ops"},
        str(tmp_path),
    )
    assert result.returncode == 1
    assert "admin_principal_arn was replaced by admin_principal_arns" in result.stderr


@pytest.mark.parametrize(
    "context", [{}, {"config_file": PIPELINE_SAMPLE}], ids=["direct", "pipeline"]
)
def test_the_app_loads_its_config_once_and_builds_from_that_load(
    context: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[LoadedConfig] = []
    built: list[Any] = []
    measures: list[Any] = []

    def counting_load(*args: Any, **kwargs: Any) -> LoadedConfig:
        measures.append(kwargs.get("user_data_size"))
        loads.append(load_config(*args, **kwargs))
        return loads[-1]

    def record(*_: Any, **kwargs: Any) -> None:
        built.append(kwargs.get("config") or kwargs["environments"])

    monkeypatch.setattr(app, "load_config", counting_load)
    monkeypatch.setattr(app, "EnvironmentStage", record)
    monkeypatch.setattr(app, "PipelineStack", record)

    app.build_app(cdk.App(context=context))

    (loaded,) = loads
    assert built == [loaded.environments if loaded.pipeline else loaded.base]
    # The config layer cannot import the renderer; the app hands it the renderer's measure, so
    # an oversized user-data is refused with the config's errors (config/loader.py).
    assert measures == [deployed_size]


def test_synth_warns_on_stderr_about_a_kubernetes_minor_past_eks_standard_support(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """1.34 left EKS standard support on 2026-12-02 (config/kubernetes_support.py): from then
    on, whatever the day the suite runs, synth says so."""
    print_config_warnings(load_config({"config.cluster.kubernetes_version": "1.34"}, REPO))
    assert "cluster.kubernetes_version 1.34" in capsys.readouterr().err


def test_each_warning_names_its_id_and_an_acknowledged_one_stays_quiet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Issue #53: the seed's warnings printed on every synth with no way to say "read, decided".
    print_config_warnings(load_config({}, REPO))
    err = capsys.readouterr().err
    assert "pinned by tag only" in err
    assert 'acknowledged_warnings ["images-pinned-by-tag"]' in err
    assert 'acknowledged_warnings ["no-cluster-admins"]' in err

    acknowledged = {"config.acknowledged_warnings": '["images-pinned-by-tag"]'}
    print_config_warnings(load_config(acknowledged, REPO))
    err = capsys.readouterr().err
    assert "pinned by tag only" not in err
    assert "cluster.admin_principal_arns is empty" in err  # the others still print

    both = {"config.acknowledged_warnings": '["images-pinned-by-tag", "no-cluster-admins"]'}
    print_config_warnings(load_config(both, REPO))
    assert capsys.readouterr().err == ""


def test_a_pipeline_environment_acknowledges_warnings_in_its_overrides(
    capsys: pytest.CaptureFixture[str],
) -> None:
    loaded = load_config({"config_file": PIPELINE_SAMPLE}, REPO)
    print_config_warnings(loaded)
    err = capsys.readouterr().err
    assert all(f"[Warning] {e.config.name}: " in err for e in loaded.environments)
    ids = json.dumps(sorted(SYNTH_WARNINGS))
    print_config_warnings(
        load_config({"config_file": PIPELINE_SAMPLE, "config.acknowledged_warnings": ids}, REPO)
    )
    assert capsys.readouterr().err == ""


def test_every_warning_of_the_app_has_a_known_id() -> None:
    # A synth_warnings entry with an unknown ID fails at its creation (SynthWarning).
    config = load_config(
        {
            "config.cluster.public_access_cidrs": '["0.0.0.0/0"]',
            "config.cluster.kubernetes_version": "1.33",
        },
        REPO,
    ).base
    ids = {warning.id for warning in config.synth_warnings(date(2027, 8, 1))}
    assert ids == {
        "kubernetes-version-past-extended-support",
        "no-cluster-admins",
        "endpoint-open-to-the-world",
        "images-pinned-by-tag",
    }
    assert ids <= set(SYNTH_WARNINGS)


def test_an_acknowledged_admin_warning_is_no_deploy_annotation_either() -> None:
    from stacks.cluster_props import eks_cluster_props

    def warns(context: dict[str, str]) -> bool:
        props = eks_cluster_props(load_config(context, REPO).base, vpc_id="vpc-1", node_subnets=[])
        return props.warn_without_admins

    assert warns({})
    assert not warns({"config.acknowledged_warnings": '["no-cluster-admins"]'})
