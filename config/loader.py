"""The one place that reads CDK context (cdk.json and `-c` values) and turns it into AppConfig.

Layers, later ones winning, merged key by key (lists are replaced whole):
1. the defaults in config.model (the seed deployment);
2. the `config` object in cdk.json context;
3. the JSON or YAML file named by the `config_file` context value (path relative to the app);
4. `-c config.<dotted.path>=<value>` overrides, e.g. `-c config.cluster.kubernetes_version=1.35`.

A `pipeline` section in that document switches the app to a CDK Pipeline (config.pipeline).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from config.documents import load_document
from config.errors import ConfigError
from config.messages import describe_errors
from config.model import AppConfig
from config.node_bootstrap_plan import USER_DATA_SIZE, UserDataSize
from config.overrides import overrides_from_context
from config.pipeline import PipelineConfig, PipelineEnvironmentConfig

CONFIG_KEY = "config"
CONFIG_FILE_KEY = "config_file"
PIPELINE_KEY = "pipeline"

ModelT = TypeVar("ModelT", bound=BaseModel)


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
    """One pipeline environment: its settings and the app config merged with its overrides."""

    settings: PipelineEnvironmentConfig
    config: AppConfig


@dataclass(frozen=True)
class LoadedConfig:
    """The base config, plus the pipeline and each environment's merged config if configured."""

    base: AppConfig
    pipeline: PipelineConfig | None
    environments: list[PipelineEnvironment]
    config_file: str | None


def _validate(
    model: type[ModelT],
    raw: Mapping[str, Any],
    source: str,
    section: str = "",
    context: Mapping[str, Any] | None = None,
) -> ModelT:
    try:
        return model.model_validate(raw, context=context)
    except ValidationError as error:
        raise ConfigError(describe_errors(error, source, model, section)) from None


def parse_config(
    raw: Mapping[str, Any], source: str = "config", *, user_data_size: UserDataSize | None = None
) -> AppConfig:
    """The validated config. `user_data_size` measures a pool's node user-data (the app passes
    node_bootstrap.renderer.deployed_size; the config layer cannot import the renderer): with
    it, a pool whose user-data would not fit is refused with the rest of the config's errors."""
    return _validate(AppConfig, raw, source, context={USER_DATA_SIZE: user_data_size})


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"config_file {path}: no such file") from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"config_file {path}: not UTF-8 text (byte 0x{error.object[error.start]:02x} at "
            f"offset {error.start}); save the file as UTF-8"
        ) from None
    except OSError as error:
        raise ConfigError(f"config_file {path}: cannot be read ({error.strerror})") from None
    loaded = load_document(text, f"config_file {path}", is_json=path.suffix == ".json")
    if not isinstance(loaded, dict):
        raise ConfigError(
            f"config_file {path}: must hold a mapping at the top level (key: value lines such "
            "as region: us-west-2), not a list or a single value"
        )
    return loaded


def _config_object(value: Any) -> dict[str, Any]:
    """The `config` context value: an object in cdk.json, or JSON text from `-c config=...`."""
    if value is None:
        return {}
    if isinstance(value, str):
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(value)
    if not isinstance(value, dict):
        raise ConfigError(
            f"context value config must be a JSON object, not {value!r}; set single fields "
            "with -c config.<path>=<value> (for example -c config.region=eu-central-1) or give "
            'the object: -c \'config={"region": "eu-central-1"}\''
        )
    return value


def raw_config_from_context(context: Mapping[str, Any], base_dir: Path) -> dict[str, Any]:
    raw = _config_object(context.get(CONFIG_KEY))
    config_file = context.get(CONFIG_FILE_KEY)
    if config_file:
        if not isinstance(config_file, str):
            raise ConfigError(
                f"config_file must be a path, not {config_file!r}; for example "
                "-c config_file=examples/three-az-three-networks.json"
            )
        raw = deep_merge(raw, read_config_file(base_dir / config_file))
    current = deep_merge(AppConfig().model_dump(mode="json", exclude_none=True), raw)
    return deep_merge(raw, overrides_from_context(context, current))


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


def load_config(
    context: Mapping[str, Any], base_dir: Path, *, user_data_size: UserDataSize | None = None
) -> LoadedConfig:
    """The app's config from CDK context; `user_data_size` as for parse_config (app.py and the
    docs tools pass the renderer's)."""
    raw = raw_config_from_context(context, base_dir)
    pipeline_raw = raw.pop(PIPELINE_KEY, None)
    base = parse_config(raw, user_data_size=user_data_size)
    config_file = context.get(CONFIG_FILE_KEY)
    if pipeline_raw is None:
        return LoadedConfig(base, None, [], config_file)
    pipeline = _validate(PipelineConfig, pipeline_raw, "pipeline config", PIPELINE_KEY)
    environments = [
        PipelineEnvironment(settings, _environment_config(raw, settings, index, user_data_size))
        for index, settings in enumerate(pipeline.environments)
    ]
    _check_stack_names_unique(environments)
    return LoadedConfig(base, pipeline, environments, config_file)


def _check_stack_names_unique(environments: list[PipelineEnvironment]) -> None:
    """Stack names and EKS cluster names are per account and region: two environments
    there need two app names and two cluster names."""
    names: tuple[tuple[str, Callable[[AppConfig], str]], ...] = (
        ("name", lambda config: config.name),
        ("cluster name", lambda config: config.cluster_name),
    )
    for field, name_of in names:
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
    base_raw: Mapping[str, Any],
    settings: PipelineEnvironmentConfig,
    index: int,
    user_data_size: UserDataSize | None,
) -> AppConfig:
    placement = {
        "account": settings.account,
        "region": settings.region,
        "availability_zones": settings.availability_zones,
    }
    raw = deep_merge(deep_merge(base_raw, settings.overrides), placement)
    source = f"config of pipeline.environments[{index}] ({settings.name})"
    return parse_config(raw, source, user_data_size=user_data_size)
