"""PipelineStack: CDK Pipelines rolling the same EnvironmentStage out to each environment."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Acknowledgment, Aspects, Duration, Stack, Validations, pipelines
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_constructs.accepted_lint_findings import RecordAcceptedLintFindings
from cdk_constructs.nag_findings import finding_text
from config.loader import PipelineEnvironment
from config.pipeline import PipelineConfig
from stages.environment_stage import EnvironmentStage

# The synth step runs the README's two commands: the whole test suite, then the synth itself.
TEST_COMMAND = "make test"
SYNTH_COMMAND = "make synth"
# Ubuntu 24.04, whose CNI plugins (1.1.1) the synth step's `make test` can run: standard:7.0's
# Ubuntu 22.04 has 0.9.1, whose host-local never answers once its ranges are used up (see the
# Makefile's cni-plugins). Every CodeBuild step (synth, self-mutation, asset publishing) runs
# these runtimes, not the image's defaults (Python 3.14 and Node 24 on standard:8.0): the Python
# the project supports and a Node.js release the pinned CDK CLI supports.
BUILD_IMAGE = codebuild.LinuxBuildImage.STANDARD_8_0
RUNTIME_VERSIONS = {"python": "3.11", "nodejs": "22"}


def synth_commands(synth_context: Mapping[str, str]) -> list[str]:
    """Commands of the synth step; `synth_context` is the `-c` selection to reproduce."""
    cdk_args = " ".join(
        f"-c {shlex.quote(f'{key}={value}')}" for key, value in synth_context.items()
    )
    synth = f"{SYNTH_COMMAND} CDK_ARGS={shlex.quote(cdk_args)}" if cdk_args else SYNTH_COMMAND
    return [TEST_COMMAND, synth]


class PipelineStack(Stack):
    """A CDK pipeline that deploys one EnvironmentStage per configured environment."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pipeline: PipelineConfig,
        environments: Sequence[PipelineEnvironment],
        synth_context: Mapping[str, str],
        cdk_cli_version: str,
        cdk_assets_version: str,
        **kwargs: Any,
    ) -> None:
        """cdk_cli_version / cdk_assets_version: what self-mutation and asset publishing
        install; package.json's pins, so every step runs the tools the synth step ran."""
        super().__init__(scope, construct_id, **kwargs)
        source = pipelines.CodePipelineSource.connection(
            pipeline.source.repository,
            pipeline.source.branch,
            connection_arn=pipeline.source.connection_arn,
        )
        artifact_bucket = self._artifact_bucket()
        self.pipeline = pipelines.CodePipeline(
            self,
            "Pipeline",
            pipeline_name=pipeline.name,
            artifact_bucket=artifact_bucket,
            cross_account_keys=True,
            enable_key_rotation=True,
            self_mutation=True,
            cli_version=cdk_cli_version,
            cdk_assets_cli_version=cdk_assets_version,
            synth=pipelines.ShellStep(
                "Synth",
                input=source,
                commands=synth_commands(synth_context),
                primary_output_directory="cdk.out",
            ),
            code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(
                    build_image=BUILD_IMAGE,
                    compute_type=codebuild.ComputeType.MEDIUM,
                ),
                partial_build_spec=codebuild.BuildSpec.from_object(
                    {"phases": {"install": {"runtime-versions": RUNTIME_VERSIONS}}}
                ),
            ),
        )
        self.stages = [self._add_environment(environment) for environment in environments]
        self.pipeline.build_pipeline()
        self._use_connection_under_its_own_prefix(pipeline.source.connection_arn)
        self._acknowledge_cdk_pipelines_grants(artifact_bucket)
        Aspects.of(self).add(RecordAcceptedLintFindings())

    def _use_connection_under_its_own_prefix(self, connection_arn: str) -> None:
        """CDK grants codestar-connections:UseConnection whatever the connection's ARN; IAM
        needs the action's prefix to match the ARN's service, and connections created since
        the CodeConnections rename have codeconnections ARNs."""
        service = connection_arn.split(":")[2]
        if service == "codestar-connections":
            return
        (policy,) = [
            child
            for child in self.pipeline.node.find_all()
            if isinstance(child, iam.CfnPolicy)
            and "/Source/" in child.node.path
            and child.node.path.endswith("/CodePipelineActionRole/DefaultPolicy/Resource")
        ]
        # CDK adds UseConnection first to the source action's role (see the pipeline tests).
        policy.add_property_override(
            "PolicyDocument.Statement.0.Action", f"{service}:UseConnection"
        )

    def _artifact_bucket(self) -> s3.Bucket:
        """KMS-encrypted (rotating key, shareable with target accounts) and access-logged."""
        access_logs = s3.Bucket(
            self,
            "ArtifactAccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(365))],
        )
        Validations.of(access_logs).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-S1",
                reason="This bucket is the access-log destination of the artifact bucket; "
                "logging it to itself would loop.",
            )
        )
        artifacts = s3.Bucket(
            self,
            "Artifacts",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=kms.Key(
                self,
                "ArtifactKey",
                description="Pipeline artifacts, shared with the target accounts' deploy roles",
                enable_key_rotation=True,
            ),
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="artifacts/",
        )
        return artifacts

    def _acknowledge_cdk_pipelines_grants(self, artifact_bucket: s3.Bucket) -> None:
        """CDK Pipelines writes these wildcard grants itself; each is bounded to the pipeline's
        artifact bucket and key, its CodeBuild projects' logs and reports, or the target
        accounts' CDK bootstrap roles. Acknowledged on the pipeline construct only, never on the
        environment stages."""
        findings = {
            **{
                f"Action::{action}": "CDK Pipelines' grant on the pipeline's own artifact bucket "
                "or key; the wildcard covers the multipart and versioned variants of one verb."
                for action in (
                    "s3:GetObject*",
                    "s3:GetBucket*",
                    "s3:List*",
                    "s3:DeleteObject*",
                    "s3:Abort*",
                    "kms:GenerateDataKey*",
                    "kms:ReEncrypt*",
                )
            },
            f"Resource::{finding_text(self, artifact_bucket.bucket_arn)}/*": "Objects "
            "of the pipeline's own artifact bucket.",
            f"Resource::arn:*:iam::{self.account}:role/*": "Self-mutation assumes the "
            "CDK bootstrap roles (cdk-*) of the tooling account to deploy the pipeline stack.",
            f"Resource::arn:<AWS::Partition>:logs:{self.region}:{self.account}:log-group:"
            "/aws/codebuild/*": "Asset publishing projects write to their own CodeBuild log "
            "groups, whose names CDK Pipelines generates.",
            f"Resource::arn:<AWS::Partition>:codebuild:{self.region}:{self.account}:"
            "report-group/*": "Asset publishing projects' CodeBuild report groups.",
        }
        for project in (self.pipeline.synth_project, self.pipeline.self_mutation_project):
            project_id = finding_text(self, project.project_name)
            findings[
                f"Resource::arn:<AWS::Partition>:logs:{self.region}:{self.account}:log-group:"
                f"/aws/codebuild/{project_id}:*"
            ] = "The CodeBuild project's own log streams."
            findings[
                f"Resource::arn:<AWS::Partition>:codebuild:{self.region}:{self.account}:"
                f"report-group/{project_id}-*"
            ] = "The CodeBuild project's own report groups."
        for support in self.pipeline.pipeline.cross_region_support.values():
            replication_bucket = self.resolve(support.replication_bucket.bucket_name)
            findings[f"Resource::arn:<AWS::Partition>:s3:::{replication_bucket}/*"] = (
                "Objects of the pipeline's cross-region artifact replication bucket."
            )
            Validations.of(support.replication_bucket).acknowledge(
                Acknowledgment(
                    id="AwsSolutions::AwsSolutions-S1",
                    reason="CDK Pipelines creates this cross-region replication bucket in its "
                    "support stack and offers no access-log option; it is KMS-encrypted and "
                    "holds only copies of the access-logged artifact bucket's objects.",
                )
            )
        Validations.of(self.pipeline).acknowledge(
            *(
                Acknowledgment(id=f"AwsSolutions::AwsSolutions-IAM5[{finding}]", reason=reason)
                for finding, reason in findings.items()
            )
        )
        self._acknowledge_unscoped_grants()

    def _acknowledge_unscoped_grants(self) -> None:
        """What each CDK Pipelines role may do on "*", and why it cannot be narrower."""
        replication_regions = sorted(self.pipeline.pipeline.cross_region_support)
        reasons = {
            "Pipeline/Pipeline/Role": "kms:Decrypt, DescribeKey, Encrypt, GenerateDataKey* and "
            "ReEncrypt* on *: CDK grants them for the artifact replication keys of the "
            f"cross-region support stacks ({', '.join(replication_regions) or 'none'}), whose "
            "ARNs a stack in another region cannot reference. Each of those keys' own policy "
            "admits only this account and the target accounts' CDK deploy roles; CDK offers "
            "explicit keys only as pre-existing bucket/key ARNs.",
            "Pipeline/UpdatePipeline/SelfMutation/Role": "cloudformation:DescribeStacks and "
            "s3:ListBucket on *: self-mutation (cdk deploy of this stack) looks up the CDK "
            "bootstrap stack and its staging bucket, whose names it learns only at run time.",
            "Pipeline/Assets/FileRole": "codebuild:BatchGetBuilds, StartBuild and StopBuild on "
            "*: the asset publishing role CDK Pipelines creates for its own asset projects.",
        }
        roles = {
            child.node.path.split(f"{self.node.id}/", 1)[1]: child
            for child in self.pipeline.node.find_all()
            if isinstance(child, iam.Role)
        }
        for path, reason in reasons.items():
            if path in roles:
                Validations.of(roles[path]).acknowledge(
                    Acknowledgment(id="AwsSolutions::AwsSolutions-IAM5[Resource::*]", reason=reason)
                )

    def _add_environment(self, environment: PipelineEnvironment) -> EnvironmentStage:
        settings = environment.settings
        stage = EnvironmentStage(self, settings.name, config=environment.config)
        approvals = (
            [
                pipelines.ManualApprovalStep(
                    f"Approve-{settings.name}",
                    comment=f"Deploy to {settings.name} ({settings.account}/{settings.region})?",
                )
            ]
            if settings.manual_approval
            else []
        )
        self.pipeline.add_stage(stage, pre=approvals)
        return stage
