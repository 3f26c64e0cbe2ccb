"""Synthesize the app for a config and return its templates keyed by CloudFormation stack name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from app import build_app
from stages.environment_stage import EnvironmentStage
from tests.conftest import cdk_json_context

Templates = dict[str, dict[str, Any]]


def synth_templates(outdir: Path, config: dict[str, Any]) -> Templates:
    """The real app (app.build_app) for `config` (the cdk.json `config` object), no cdk-nag."""
    app = cdk.App(outdir=str(outdir), context=cdk_json_context(config=config))
    build_app(app)
    app.synth()
    stage = next(child for child in app.node.children if isinstance(child, EnvironmentStage))
    return {
        stack.stack_name: json.loads((Path(stage.outdir) / stack.template_file).read_text())
        for stack in (stage.network, stage.cluster)
    }
