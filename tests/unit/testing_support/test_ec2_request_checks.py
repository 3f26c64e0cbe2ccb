"""The emulator's stand-ins for what moto does not check: SigV4 signatures, parameter names."""

from __future__ import annotations

from email.message import Message

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from testing_support.multus_emulator import (
    NODE_CREDENTIALS,
    REGION,
    ec2_request_error,
    signature_error,
    unknown_parameters,
)

URL = "http://127.0.0.1:8080/"
BODY = b"Action=DeleteNetworkInterface&Version=2016-11-15&NetworkInterfaceId=eni-0abc"


def signed_headers(credentials: Credentials, body: bytes = BODY) -> Message:
    request = AWSRequest(method="POST", url=URL, data=body)
    SigV4Auth(credentials, "ec2", REGION).add_auth(request)
    headers = Message()
    for key, value in request.headers.items():
        headers[key] = value
    return headers


def test_a_request_signed_with_the_node_credentials_passes() -> None:
    assert signature_error(URL, signed_headers(NODE_CREDENTIALS), BODY, NODE_CREDENTIALS) == ""


def test_a_body_changed_after_signing_is_refused() -> None:
    headers = signed_headers(NODE_CREDENTIALS)
    tampered = BODY.replace(b"eni-0abc", b"eni-0def")
    assert signature_error(URL, headers, tampered, NODE_CREDENTIALS) == "signature does not match"


def test_a_request_signed_with_another_secret_is_refused() -> None:
    other = Credentials(NODE_CREDENTIALS.access_key, "other-secret", NODE_CREDENTIALS.token)
    headers = signed_headers(other)
    assert signature_error(URL, headers, BODY, NODE_CREDENTIALS) == "signature does not match"


def test_a_request_without_the_session_token_is_refused() -> None:
    headers = signed_headers(NODE_CREDENTIALS)
    del headers["X-Amz-Security-Token"]
    assert "X-Amz-Security-Token" in signature_error(URL, headers, BODY, NODE_CREDENTIALS)


def test_an_unsigned_request_is_refused() -> None:
    assert (
        signature_error(URL, Message(), BODY, NODE_CREDENTIALS) == "no SigV4 Authorization header"
    )


@pytest.mark.parametrize(
    ("action", "params", "unknown"),
    [
        (
            "CreateNetworkInterface",
            {
                "SubnetId": "subnet-1",
                "SecurityGroupId.2": "sg-2",
                "TagSpecification.1.ResourceType": "network-interface",
                "TagSpecification.1.Tag.4.Value": "true",
                "ClientToken": "token",
            },
            [],
        ),
        ("CreateNetworkInterface", {"SecurityGroupIds.1": "sg-1"}, ["SecurityGroupIds.1"]),
        (
            "CreateNetworkInterface",
            {"TagSpecification.1.Tag.Key": "k"},
            ["TagSpecification.1.Tag.Key"],
        ),
        (
            "ModifyNetworkInterfaceAttribute",
            {"Attachment.AttachmentId": "eni-attach-1", "Attachment.DeleteOnTermination": "true"},
            [],
        ),
        ("ModifyNetworkInterfaceAttribute", {"SourceDestCheck": "false"}, ["SourceDestCheck"]),
        ("AttachNetworkInterface", {"DeviceIndex": "1", "Action": "x", "Version": "y"}, []),
    ],
)
def test_parameter_names_are_checked_against_the_ec2_model(
    action: str, params: dict[str, str], unknown: list[str]
) -> None:
    assert unknown_parameters(action, params) == unknown


ASSIGN = {"Action": "AssignPrivateIpAddresses", "Version": "2016-11-15"}


@pytest.mark.parametrize(
    ("params", "refusal"),
    [
        ({**ASSIGN, "NetworkInterfaceId": "eni-1", "PrivateIpAddress.1": "10.0.4.33"}, ""),
        # EC2 API reference, AssignPrivateIpAddresses: NetworkInterfaceId is required.
        ({**ASSIGN, "PrivateIpAddress.1": "10.0.4.33"}, "MissingParameter NetworkInterfaceId"),
        ({**ASSIGN, "NetworkInterfaceId": "eni-1", "Force": "true"}, "UnknownParameter Force"),
        ({**ASSIGN, "Version": "2014-01-01", "NetworkInterfaceId": "eni-1"}, "InvalidAction"),
        ({"Action": "AssignPodAddress", "Version": "2016-11-15"}, "InvalidAction"),
        # A required list (DescribeInstanceTypes has none; TerminateInstances: InstanceId.N).
        ({"Action": "TerminateInstances", "Version": "2016-11-15"}, "MissingParameter"),
        ({"Action": "TerminateInstances", "Version": "2016-11-15", "InstanceId.1": "i-1"}, ""),
    ],
)
def test_requests_ec2_refuses_before_acting_are_named_by_their_error_code(
    params: dict[str, str], refusal: str
) -> None:
    error = ec2_request_error(params)

    assert error.startswith(refusal) and bool(error) == bool(refusal), error
