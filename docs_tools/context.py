"""The CDK context a docs tool hands to config.load_config, built the way `cdk synth` builds it.

The CLI gives the app cdk.json's `context` with every `-c key=value` pair over it, values as
text; config.loader does the rest (config_file, `config.<path>` overrides), so a docs tool
given the same `-c` values sees exactly the config the app would deploy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from config import ConfigError, load_config
from config.loader import LoadedConfig
from node_bootstrap.renderer import deployed_size

REPO = Path(__file__).resolve().parents[1]


def cli_context(pairs: Sequence[str], repo: Path = REPO) -> dict[str, Any]:
    """cdk.json's context, then each `key=value` pair (text, as the CDK CLI passes it)."""
    context: dict[str, Any] = dict(json.loads((repo / "cdk.json").read_text())["context"])
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            raise ConfigError(
                f"-c {pair}: give a context value as key=value, for example "
                "-c config_file=examples/three-az-three-networks.json"
            )
        context[key] = value
    return context


def load_from_cli(pairs: Sequence[str], repo: Path = REPO) -> LoadedConfig:
    return load_config(cli_context(pairs, repo), repo, user_data_size=deployed_size)
