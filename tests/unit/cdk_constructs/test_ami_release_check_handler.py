"""The AMI release check's handler on moto's SSM: a release that exists for the Kubernetes
version passes, one that does not fails with a message naming node_pool.ami_alias."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.core.models import DEFAULT_ACCOUNT_ID, MockAWS
from moto.core.utils import utcnow
from moto.ssm.models import Parameter, ssm_backends

from cdk_constructs.ami_release_check import al2023_image_parameter
from cdk_constructs.ami_release_check_handler import index as handler
from tests.moto_helpers import moto_for_module

REGION = "us-west-2"
PUBLISHED = al2023_image_parameter("1.34", "al2023@v20261112")
IMAGE_ID = "ami-0123456789abcdef0"


@pytest.fixture(scope="module")
def aws() -> Iterator[MockAWS]:
    with moto_for_module(REGION) as mock:
        yield mock


@pytest.fixture
def ssm(aws: MockAWS) -> Any:
    aws.reset()  # every test starts from an empty account
    # AWS publishes /aws/service/... parameters; nobody may put one (moto refuses too), so
    # it is planted in moto's store the way moto loads its own public parameters.
    ssm_backends[DEFAULT_ACCOUNT_ID][REGION]._parameters[PUBLISHED].append(
        # moto declares CloudFormation hooks abstract that its own SSM backend never calls.
        Parameter(  # type: ignore[abstract]
            account_id=DEFAULT_ACCOUNT_ID,
            name=PUBLISHED,
            value=IMAGE_ID,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=utcnow(),
            version=1,
            data_type="aws:ec2:image",
        )
    )
    return boto3.client("ssm", region_name=REGION)


def event(request: str, kubernetes: str, alias: str) -> dict[str, Any]:
    return {
        "RequestType": request,
        "PhysicalResourceId": "previous",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-west-2:123456789012:function:x",
            "ParameterName": al2023_image_parameter(kubernetes, alias),
            "AmiAlias": alias,
            "KubernetesVersion": kubernetes,
            "ConfigField": "node_pool.ami_alias",
        },
    }


def test_parameter_is_the_one_karpenter_resolves_for_a_pinned_alias() -> None:
    # Karpenter v1.14.1 pkg/providers/amifamily/al2023.go resolvePath, x86_64 standard variant.
    assert PUBLISHED == (
        "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/"
        "amazon-eks-node-al2023-x86_64-standard-1.34-v20261112/image_id"
    )
    with pytest.raises(ValueError, match="not a pinned"):
        al2023_image_parameter("1.34", "al2023@latest")


@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_existing_release_passes_and_reports_the_image(ssm: Any, request_type: str) -> None:
    assert ssm.get_parameter(Name=PUBLISHED)["Parameter"]["Value"] == IMAGE_ID
    result = handler.on_event(event(request_type, "1.34", "al2023@v20261112"))
    assert result == {"PhysicalResourceId": PUBLISHED, "Data": {"ImageId": IMAGE_ID}}


@pytest.mark.parametrize(
    ("kubernetes", "alias"),
    [("1.36", "al2023@v20261112"), ("1.34", "al2023@v20990101")],
    ids=["release-without-this-kubernetes-version", "release-that-does-not-exist"],
)
@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_missing_release_fails_naming_the_config_field(
    ssm: Any, kubernetes: str, alias: str, request_type: str
) -> None:
    with pytest.raises(RuntimeError) as raised:
        handler.on_event(event(request_type, kubernetes, alias))
    message = str(raised.value)
    assert message.startswith(
        f"node_pool.ami_alias '{alias}' has no AMI for Kubernetes {kubernetes}"
    )
    assert al2023_image_parameter(kubernetes, alias) in message


def test_delete_never_fails(ssm: Any) -> None:
    result = handler.on_event(event("Delete", "1.36", "al2023@v20990101"))
    assert result == {"PhysicalResourceId": "previous"}
