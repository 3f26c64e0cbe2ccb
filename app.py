#!/usr/bin/env python3
"""CDK entry point: load the config from context, then build the direct stage or the pipeline."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import aws_cdk as cdk

from config import ConfigError, load_config
from config.loader import CDK_ASSETS_PACKAGE, CDK_CLI_PACKAGE, LoadedConfig, pinned_npm_version
from node_bootstrap.renderer import deployed_size
from stages.environment_stage import EnvironmentStage
from stages.pipeline_stack import PipelineStack


def build_app(app: cdk.App) -> cdk.App:
    base_dir = Path(__file__).parent
    loaded = load_config(app.node.get_all_context(), base_dir, user_data_size=deployed_size)
    print_config_warnings(loaded)
    if loaded.pipeline is None:
        EnvironmentStage(app, loaded.base.name, config=loaded.base)
        return app
    PipelineStack(
        app,
        loaded.pipeline.name,
        pipeline=loaded.pipeline,
        environments=loaded.environments,
        synth_context={"config_file": loaded.config_file} if loaded.config_file else {},
        cdk_cli_version=pinned_npm_version(base_dir, CDK_CLI_PACKAGE),
        cdk_assets_version=pinned_npm_version(base_dir, CDK_ASSETS_PACKAGE),
        env=cdk.Environment(
            account=loaded.pipeline.tooling_account, region=loaded.pipeline.tooling_region
        ),
        description="CDK Pipeline rolling the Karpenter + Multus EKS stage out per environment",
    )
    return app


def print_config_warnings(loaded: LoadedConfig) -> None:
    """To stderr: `cdk synth` does not print the warnings of stacks inside a Stage. Each ends
    with its ID; those the config's acknowledged_warnings lists stay quiet."""
    configs = [e.config for e in loaded.environments] if loaded.pipeline else [loaded.base]
    today = datetime.now(UTC).date()  # EKS's support dates are UTC
    for config in configs:
        for warning in config.unacknowledged_warnings(today):
            print(f"[Warning] {config.name}: {warning.printed}", file=sys.stderr)


def main(app: cdk.App | None = None) -> None:
    """Build and synthesize `app` (by default the CLI's: context from cdk.json and `-c`); bad
    config ends the process with its message and status 1, before any construct exists."""
    app = app or cdk.App()
    try:
        build_app(app)
    except ConfigError as error:
        print(error, file=sys.stderr)
        sys.exit(1)
    app.synth()


if __name__ == "__main__":
    main()
