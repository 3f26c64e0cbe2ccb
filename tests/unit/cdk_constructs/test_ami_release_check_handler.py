"""The AMI release check's handler on moto's SSM: a release that exists for the Kubernetes
version passes, one that does not fails with a message naming node_pool.ami_alias; on a stubbed
client, a refused read is retried and then named as a permission error, never as a missing AMI."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
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


class FakeClock:
    """time.monotonic and time.sleep for the handler: sleeping moves the clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def stubbed_ssm(monkeypatch: pytest.MonkeyPatch, denials: int, then_value: bool) -> Stubber:
    """An SSM client that answers AccessDeniedException `denials` times, then the image."""
    client = boto3.client("ssm", region_name=REGION)
    stubber = Stubber(client)
    for _ in range(denials):
        stubber.add_client_error(
            "get_parameter", service_error_code="AccessDeniedException", http_status_code=400
        )
    if then_value:
        stubber.add_response(
            "get_parameter",
            {"Parameter": {"Name": PUBLISHED, "Value": IMAGE_ID, "Type": "String"}},
            {"Name": PUBLISHED},
        )
    stubber.activate()
    monkeypatch.setattr(boto3, "client", lambda *_args, **_kwargs: client)
    return stubber


def test_access_denied_while_iam_propagates_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after CloudFormation updated the check's policy for a new Kubernetes version, IAM
    may still refuse the new parameter for a few seconds (IAM user guide, "Troubleshooting
    IAM": changes are eventually consistent)."""
    stubber = stubbed_ssm(monkeypatch, denials=3, then_value=True)
    clock = FakeClock()
    result = handler.on_event(
        event("Update", "1.34", "al2023@v20261112"), sleep=clock.sleep, clock=clock
    )
    assert result["Data"] == {"ImageId": IMAGE_ID}
    stubber.assert_no_pending_responses()
    assert clock.now == 3 * handler.ACCESS_DENIED_PAUSE_SECONDS


def test_lasting_access_denied_is_a_permission_error_not_a_missing_ami(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stubbed_ssm(monkeypatch, denials=100, then_value=False)
    clock = FakeClock()
    with pytest.raises(RuntimeError) as raised:
        handler.on_event(
            event("Create", "1.34", "al2023@v20261112"), sleep=clock.sleep, clock=clock
        )
    message = str(raised.value)
    assert "permission problem" in message and PUBLISHED in message
    assert "has no AMI" not in message
    assert handler.ACCESS_DENIED_PATIENCE_SECONDS <= clock.now < 30  # the function's timeout


def test_throttling_is_not_read_as_a_missing_ami(monkeypatch: pytest.MonkeyPatch) -> None:
    """Throttling goes to botocore's standard retry mode (the client's config); what is left
    after its attempts fails as the error it is."""
    client = boto3.client("ssm", region_name=REGION)
    stubber = Stubber(client)
    stubber.add_client_error(
        "get_parameter", service_error_code="ThrottlingException", http_status_code=400
    )
    stubber.activate()
    configs: list[Any] = []

    def client_factory(*_args: Any, **kwargs: Any) -> Any:
        configs.append(kwargs.get("config"))
        return client

    monkeypatch.setattr(boto3, "client", client_factory)
    with pytest.raises(ClientError, match="ThrottlingException"):
        handler.on_event(event("Create", "1.34", "al2023@v20261112"))
    assert configs[0].retries["mode"] == "standard"
