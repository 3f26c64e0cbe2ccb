"""Stack base class that answers availability-zone questions from the config."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Stack
from constructs import Construct


class ConfiguredAzStack(Stack):
    """A Stack whose AZs come from the config, so synth never looks them up in an account.

    Without this, an account-specific stack asks the AZ context provider (needs credentials)
    and an environment-agnostic one gets Fn::GetAZs, whose order and count we don't control.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        availability_zones: Sequence[str],
        **kwargs: Any,
    ) -> None:
        self._configured_azs = list(availability_zones)
        super().__init__(scope, construct_id, **kwargs)

    @property
    def availability_zones(self) -> list[str]:
        return self._configured_azs
