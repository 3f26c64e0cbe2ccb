"""Lambda handler behind the VpcDnsCheck custom resource (custom_resources.Provider).

Resource properties: VpcId, ConfigField (the config key to name in the error).

- Create / Update: the cluster's private API endpoint resolves only in a VPC whose DNS support
  and DNS hostnames are on and whose DHCP options hand out AmazonProvidedDNS (EKS user guide,
  "Cluster API server endpoint", Cluster private endpoint): each that is not fails the deploy,
  naming the config key and the command that fixes it.
- Delete: nothing to undo.

Every EC2 call is retried while IAM still refuses it (UnauthorizedOperation right after
CloudFormation created the handler's policy), up to ACCESS_DENIED_PATIENCE_SECONDS; then it
fails as the permission problem it is, not as a VPC setting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)
RETRIES = Config(retries={"mode": "standard", "max_attempts": 3})
# Within the function's 30 s timeout, leaving time for the last attempt and the answer.
ACCESS_DENIED_PATIENCE_SECONDS = 20.0
AMAZON_DNS = "AmazonProvidedDNS"
# attribute of DescribeVpcAttribute -> its answer's key, the modify-vpc-attribute flag
ATTRIBUTES = {
    "enableDnsSupport": ("EnableDnsSupport", "--enable-dns-support"),
    "enableDnsHostnames": ("EnableDnsHostnames", "--enable-dns-hostnames"),
}


# A role CloudFormation has just created or changed may be refused for a while: IAM is
# eventually consistent (IAM user guide, "Changes that I make are not always immediately
# visible"). EC2 says UnauthorizedOperation, IAM-style services AccessDenied(Exception). The
# AMI release check does the same for SSM (ami_release_check_handler).
PROPAGATION_CODES = frozenset({"UnauthorizedOperation", "AccessDenied", "AccessDeniedException"})
ACCESS_DENIED_PAUSE_SECONDS = 2.0


class PatientClient:
    """A boto3 client whose calls are retried while IAM refuses them, until `patience`
    seconds after the client was made; then the refusal fails as what it is, a permission
    problem of the handler's own role."""

    def __init__(
        self,
        client: Any,
        patience: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._patience = patience
        self._sleep = sleep
        self._clock = clock
        self._deadline = clock() + patience

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if not callable(method):
            return method

        def patient(*args: Any, **kwargs: Any) -> Any:
            while True:
                try:
                    return method(*args, **kwargs)
                except ClientError as error:
                    code = error.response["Error"]["Code"]
                    if code not in PROPAGATION_CODES:
                        raise
                    if self._clock() >= self._deadline:
                        raise RuntimeError(
                            f"EC2 refused {name} with {code} for {self._patience:.0f} s: a "
                            "permission problem of this handler's own role, not of the "
                            "request (IAM had time to propagate a new policy). Deploy again; "
                            "if it persists, look for a permissions boundary or SCP that "
                            "denies it."
                        ) from error
                    LOG.info("%s: %s, retrying while IAM propagates", name, code)
                    self._sleep(ACCESS_DENIED_PAUSE_SECONDS)

        return patient


def on_event(event: dict[str, Any], _context: object = None) -> dict[str, Any]:
    props = event["ResourceProperties"]
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    vpc_id = props["VpcId"]
    ec2 = PatientClient(boto3.client("ec2", config=RETRIES), ACCESS_DENIED_PATIENCE_SECONDS)
    problems = []
    for attribute, (key, flag) in ATTRIBUTES.items():
        if not ec2.describe_vpc_attribute(VpcId=vpc_id, Attribute=attribute)[key]["Value"]:
            problems.append(
                f"{attribute} is off (aws ec2 modify-vpc-attribute --vpc-id {vpc_id} "
                f"{flag} '{{\"Value\":true}}')"
            )
    (vpc,) = ec2.describe_vpcs(VpcIds=[vpc_id])["Vpcs"]
    options_id = vpc.get("DhcpOptionsId", "default")
    if options_id != "default":
        (options,) = ec2.describe_dhcp_options(DhcpOptionsIds=[options_id])["DhcpOptions"]
        servers = [
            value["Value"]
            for entry in options["DhcpConfigurations"]
            if entry["Key"] == "domain-name-servers"
            for value in entry["Values"]
        ]
        if AMAZON_DNS not in servers:
            problems.append(
                f"its DHCP options {options_id} give the name servers {servers} without "
                f"{AMAZON_DNS} (associate options that include it)"
            )
    if problems:
        raise RuntimeError(
            f"{props['ConfigField']} {vpc_id}: the cluster's private API endpoint resolves "
            "only in a VPC with DNS support, DNS hostnames and AmazonProvidedDNS (EKS user "
            f"guide, Cluster API server endpoint), but {'; '.join(problems)}. The network team "
            "owns the VPC: ask them to change it, then deploy again."
        )
    LOG.info("%s resolves the private endpoint", vpc_id)
    return {"PhysicalResourceId": vpc_id}
