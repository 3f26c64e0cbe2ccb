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
    """The Git repository the pipeline builds from."""

    connection_arn: str = Field(
        pattern=patterns.CONNECTION_ARN.regex,
        description="CodeStar/CodeConnections connection to the Git provider.",
    )
    repository: str = Field(pattern=patterns.REPOSITORY.regex, description="owner/name")
    branch: str = Field(default="main", min_length=1, description="Branch the pipeline builds.")


class PipelineEnvironmentConfig(StrictModel):
    """One deploy target of the pipeline: the base config placed in an account and region."""

    name: str = Field(
        pattern=patterns.ENVIRONMENT_NAME.regex, description="Environment (pipeline stage) name."
    )
    account: str = Field(pattern=ACCOUNT_PATTERN, description="12-digit target account.")
    region: str = Field(description="Target Region.")
    availability_zones: list[str] = Field(
        min_length=2, description="AZs in that Region; per-AZ lists follow this order."
    )
    manual_approval: bool = Field(
        default=False, description="Wait for a manual approval before deploying here."
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="Any AppConfig keys, merged over the base config."
    )


class PipelineConfig(StrictModel):
    """A CDK Pipeline in a tooling account that deploys the stage to each environment."""

    name: str = Field(
        default="karpenter-multus-pipeline",
        pattern=patterns.PIPELINE_NAME.regex,
        description="Name of the pipeline stack and of the CodePipeline.",
    )
    tooling_account: str = Field(
        pattern=ACCOUNT_PATTERN, description="12-digit account the pipeline runs in."
    )
    tooling_region: str = Field(description="Region the pipeline runs in.")
    source: PipelineSourceConfig
    environments: list[PipelineEnvironmentConfig] = Field(
        min_length=1, description="Deploy targets, in rollout order."
    )

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
