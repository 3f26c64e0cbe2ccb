"""Lambda handler behind the VpcDnsCheck custom resource (custom_resources.Provider).

Resource properties: VpcId, ConfigField (the config key to name in the error).

- Create / Update: the cluster's private API endpoint resolves only in a VPC whose DNS support
  and DNS hostnames are on and whose DHCP options hand out AmazonProvidedDNS (EKS user guide,
  "Cluster API server endpoint", Cluster private endpoint): each that is not fails the deploy,
  naming the config key and the command that fixes it.
- Delete: nothing to undo.
"""

from __future__ import annotations

import logging
from typing import Any

import boto3
from botocore.config import Config

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)
RETRIES = Config(retries={"mode": "standard", "max_attempts": 3})
AMAZON_DNS = "AmazonProvidedDNS"
# attribute of DescribeVpcAttribute -> its answer's key, the modify-vpc-attribute flag
ATTRIBUTES = {
    "enableDnsSupport": ("EnableDnsSupport", "--enable-dns-support"),
    "enableDnsHostnames": ("EnableDnsHostnames", "--enable-dns-hostnames"),
}


def on_event(event: dict[str, Any], _context: object = None) -> dict[str, Any]:
    props = event["ResourceProperties"]
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    vpc_id = props["VpcId"]
    ec2 = boto3.client("ec2", config=RETRIES)
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
