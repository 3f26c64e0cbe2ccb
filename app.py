#!/usr/bin/env python3
"""CDK entry point: load the config from context, then build the stage(s)."""

from __future__ import annotations

import sys
from pathlib import Path

import aws_cdk as cdk

from config import ConfigError, load_config
from stages.environment_stage import EnvironmentStage


def build_app(app: cdk.App) -> cdk.App:
    config = load_config(app.node.get_all_context(), Path(__file__).parent)
    EnvironmentStage(app, config.name, config=config)
    return app


def main() -> None:
    app = cdk.App()
    try:
        build_app(app)
    except ConfigError as error:
        print(error, file=sys.stderr)
        sys.exit(1)
    app.synth()


if __name__ == "__main__":
    main()
