"""The optional `pipeline` section: a CDK Pipeline that rolls one configuration out, in order,
to several accounts and regions. Each environment's AppConfig is the base config with the
environment's account, region, AZs and overrides merged over it."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from config import patterns
from config.aws_regions import region_problem
from config.model import ACCOUNT_PATTERN, StrictModel


class PipelineSourceConfig(StrictModel):
    connection_arn: str = Field(
        pattern=patterns.CONNECTION_ARN.regex,
        description="CodeStar/CodeConnections connection to the Git provider.",
    )
    repository: str = Field(pattern=patterns.REPOSITORY.regex, description="owner/name")
    branch: str = Field(default="main", min_length=1)


class PipelineEnvironmentConfig(StrictModel):
    name: str = Field(pattern=patterns.ENVIRONMENT_NAME.regex)
    account: str = Field(pattern=ACCOUNT_PATTERN)
    region: str
    availability_zones: list[str] = Field(min_length=2)
    manual_approval: bool = False
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="Any AppConfig keys, merged over the base config."
    )


class PipelineConfig(StrictModel):
    name: str = Field(default="karpenter-multus-pipeline", pattern=patterns.PIPELINE_NAME.regex)
    tooling_account: str = Field(pattern=ACCOUNT_PATTERN)
    tooling_region: str
    source: PipelineSourceConfig
    environments: list[PipelineEnvironmentConfig] = Field(min_length=1)

    @field_validator("tooling_region")
    @classmethod
    def _known_region(cls, region: str) -> str:
        problem = region_problem(region)
        if problem:
            raise ValueError(problem)
        return region

    @model_validator(mode="after")
    def _unique_environment_names(self) -> PipelineConfig:
        names = [environment.name for environment in self.environments]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"environments: names must be unique; repeated: {duplicates}")
        return self
