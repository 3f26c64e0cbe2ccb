"""The one error type of config loading: app.py prints it and exits with status 1."""


class ConfigError(Exception):
    """Invalid configuration; the message names each offending field and how to fix it."""
