"""The one place that reads CDK context (cdk.json and `-c` values) and turns it into AppConfig.

Layers, later ones winning, merged key by key (lists are replaced whole):
1. the defaults in config.model (the seed deployment);
2. the `config` object in cdk.json context;
3. the JSON or YAML file named by the `config_file` context value (path relative to the app);
4. `-c config.<dotted.path>=<value>` overrides, e.g. `-c config.cluster.kubernetes_version=1.35`.

A `pipeline` section in that document switches the app to a CDK Pipeline (config.pipeline).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from config.model import AppConfig
from config.pipeline import PipelineConfig, PipelineEnvironmentConfig

CONFIG_KEY = "config"
CONFIG_FILE_KEY = "config_file"
OVERRIDE_PREFIX = "config."
PIPELINE_KEY = "pipeline"

ModelT = TypeVar("ModelT", bound=BaseModel)


class ConfigError(Exception):
    """Invalid configuration; the message names each offending field and how to fix it."""


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class PipelineEnvironment:
    settings: PipelineEnvironmentConfig
    config: AppConfig


@dataclass(frozen=True)
class LoadedConfig:
    """The base config, plus the pipeline and each environment's merged config if configured."""

    base: AppConfig
    pipeline: PipelineConfig | None
    environments: list[PipelineEnvironment]
    config_file: str | None


def _validate(model: type[ModelT], raw: Mapping[str, Any], source: str) -> ModelT:
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(describe_errors(error, source)) from None


def parse_config(raw: Mapping[str, Any], source: str = "config") -> AppConfig:
    return _validate(AppConfig, raw, source)


def describe_errors(error: ValidationError, source: str) -> str:
    lines = [f"Invalid {source}:"]
    for detail in error.errors():
        path = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in detail["loc"]
        ).lstrip(".")
        message = detail["msg"].removeprefix("Value error, ")
        if detail["type"] == "extra_forbidden":
            message = "unknown key (typo?); see config/model.py for the accepted keys"
        lines.append(f"  - {path or '(top level)'}: {message}")
    return "\n".join(lines)


def read_config_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config_file {path}: no such file")
    text = path.read_text(encoding="utf-8")
    try:
        loaded = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise ConfigError(f"config_file {path}: not valid JSON/YAML: {error}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"config_file {path}: must hold a mapping at the top level")
    return loaded


def _override_value(text: str) -> Any:
    """`-c` values arrive as strings; JSON objects, lists, booleans and integers are decoded.

    Decimals such as 1.35 stay strings so that versions keep their text.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return text if isinstance(value, float) else value


def overrides_from_context(context: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in context.items():
        if not key.startswith(OVERRIDE_PREFIX):
            continue
        *parents, leaf = key.removeprefix(OVERRIDE_PREFIX).split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = _override_value(value) if isinstance(value, str) else value
    return nested


def raw_config_from_context(context: Mapping[str, Any], base_dir: Path) -> dict[str, Any]:
    raw: dict[str, Any] = dict(context.get(CONFIG_KEY) or {})
    config_file = context.get(CONFIG_FILE_KEY)
    if config_file:
        raw = deep_merge(raw, read_config_file(base_dir / str(config_file)))
    return deep_merge(raw, overrides_from_context(context))


CDK_CLI_PACKAGE = "aws-cdk"
CDK_ASSETS_PACKAGE = "cdk-assets"
_EXACT_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


def pinned_npm_version(base_dir: Path, package_name: str) -> str:
    """The exact version package.json pins for a CLI (`make synth` runs the same with npx)."""
    package = json.loads((base_dir / "package.json").read_text(encoding="utf-8"))
    version = str(package.get("devDependencies", {}).get(package_name, ""))
    if not _EXACT_VERSION.fullmatch(version):
        raise ConfigError(
            f"package.json: devDependencies.{package_name} must be an exact version such as "
            f"1.2.3 (the pipeline installs the same one), got {version!r}"
        )
    return version


def load_config(context: Mapping[str, Any], base_dir: Path) -> LoadedConfig:
    raw = raw_config_from_context(context, base_dir)
    pipeline_raw = raw.pop(PIPELINE_KEY, None)
    base = parse_config(raw)
    config_file = context.get(CONFIG_FILE_KEY)
    if pipeline_raw is None:
        return LoadedConfig(base, None, [], config_file)
    pipeline = _validate(PipelineConfig, pipeline_raw, "pipeline config")
    environments = [
        PipelineEnvironment(settings, _environment_config(raw, settings, index))
        for index, settings in enumerate(pipeline.environments)
    ]
    _check_stack_names_unique(environments)
    return LoadedConfig(base, pipeline, environments, config_file)


def _check_stack_names_unique(environments: list[PipelineEnvironment]) -> None:
    """Stack, SSM parameter and cluster names are per account and region: two environments
    there need two app names and two cluster names."""
    for field, name_of in (
        ("name", lambda config: config.name),
        ("cluster name", lambda config: config.cluster_name),
    ):
        seen: dict[tuple[str | None, str, str], str] = {}
        for environment in environments:
            config = environment.config
            key = (config.account, config.region, name_of(config))
            if key in seen:
                fix = "overrides.name" if field == "name" else "overrides.cluster.name"
                raise ConfigError(
                    f"pipeline.environments: {seen[key]} and {environment.settings.name} deploy "
                    f"to {config.account}/{config.region} with the same {field} {key[2]!r}; set "
                    f"{fix} in one of them"
                )
            seen[key] = environment.settings.name


def _environment_config(
    base_raw: Mapping[str, Any], settings: PipelineEnvironmentConfig, index: int
) -> AppConfig:
    placement = {
        "account": settings.account,
        "region": settings.region,
        "availability_zones": settings.availability_zones,
    }
    raw = deep_merge(deep_merge(base_raw, settings.overrides), placement)
    return parse_config(raw, f"config of pipeline.environments[{index}] ({settings.name})")
