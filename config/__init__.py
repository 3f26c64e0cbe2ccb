"""Typed, validated configuration (model) and the one loader of CDK context (loader)."""

from config.errors import ConfigError
from config.loader import load_config, parse_config
from config.model import AppConfig

__all__ = ["AppConfig", "ConfigError", "load_config", "parse_config"]
