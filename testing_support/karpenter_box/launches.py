"""`python -m testing_support.karpenter_box.launches` inside `make cluster-box CONFIG=... CMD=...`:
which instances the real Karpenter launches for each node pool of the config, before any deploy.

For each NodePool in the box it creates a pod of the pool's kind (it selects the pool and its
networks' node labels, tolerates the pool's taints, asks for --cpu and --memory), waits for the
NodeClaim Karpenter launches for it, and prints, read back from the emulator through
AWS_ENDPOINT_URL as EC2 shows them, the instance type, zone, subnet (and whether it is a node
subnet, never a Multus one), security groups, AMI, and the MIME parts of the launch template's
user data; --json prints the same as JSON. Exit status 1 when a pool gets no instance in time.
"""

from __future__ import annotations

import argparse
import base64
import email
import json
import os
import subprocess
import sys
import time
from typing import Any

import boto3

NODEPOOL_LABEL = "karpenter.sh/nodepool"
NETWORK_LABEL_PREFIX = "multus.network/"


def kubectl(*args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["kubectl", *args], input=stdin, capture_output=True, text=True, check=True
    ).stdout


def node_pools() -> list[dict[str, Any]]:
    return list(json.loads(kubectl("get", "nodepools", "-o", "json"))["items"])


def pod_for(pool: dict[str, Any], cpu: str, memory: str) -> dict[str, Any]:
    template = pool["spec"]["template"]
    labels = template.get("metadata", {}).get("labels", {})
    selector = {key: value for key, value in labels.items() if key.startswith(NETWORK_LABEL_PREFIX)}
    tolerations = [
        {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]}
        for taint in template["spec"].get("taints", [])
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"launch-{pool['metadata']['name']}", "namespace": "default"},
        "spec": {
            "nodeSelector": {NODEPOOL_LABEL: pool["metadata"]["name"], **selector},
            "tolerations": tolerations,
            "containers": [
                {
                    "name": "probe",
                    "image": "public.ecr.aws/docker/library/busybox:1.37.0",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
    }


def launched_claim(pool: str, timeout: float) -> dict[str, Any] | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        claims = json.loads(
            kubectl("get", "nodeclaims", "-l", f"{NODEPOOL_LABEL}={pool}", "-o", "json")
        )
        for claim in claims["items"]:
            if claim.get("status", {}).get("providerID"):
                return dict(claim)
        time.sleep(2)
    return None


def describe(claim: dict[str, Any]) -> dict[str, Any]:
    """The claim's instance as EC2 shows it, through AWS_ENDPOINT_URL."""
    ec2 = boto3.client("ec2", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    instance_id = claim["status"]["providerID"].rsplit("/", 1)[-1]
    instance = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    subnet = ec2.describe_subnets(SubnetIds=[instance["SubnetId"]])["Subnets"][0]
    tags = {tag["Key"]: tag["Value"] for tag in instance.get("Tags", [])}
    template_id = tags.get("aws:ec2launchtemplate:id")
    user_data = _launch_template_user_data(ec2, template_id)
    parts = [part.get_content_type() for part in email.message_from_string(user_data).walk()]
    return {
        "pool": claim["metadata"]["labels"][NODEPOOL_LABEL],
        "nodeclaim": claim["metadata"]["name"],
        "instance": instance_id,
        "instance_type": instance["InstanceType"],
        "zone": instance["Placement"]["AvailabilityZone"],
        "subnet": instance["SubnetId"],
        "subnet_cidr": subnet["CidrBlock"],
        "security_groups": [group["GroupId"] for group in instance["SecurityGroups"]],
        "image": instance["ImageId"],
        "user_data_parts": [kind for kind in parts if not kind.startswith("multipart/")],
    }


def _launch_template_user_data(ec2: Any, template_id: str | None) -> str:
    """The user data of the launch template the instance came from (its
    aws:ec2launchtemplate:id tag, which EC2 sets)."""
    if not template_id:
        return ""
    versions = ec2.describe_launch_template_versions(LaunchTemplateId=template_id)
    data = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    return base64.b64decode(data.get("UserData", "")).decode()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", default="1", help="CPU the probe pod requests (default 1)")
    parser.add_argument("--memory", default="1Gi", help="memory it requests (default 1Gi)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per pool")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    options = parser.parse_args(argv)
    pools = node_pools()
    for pool in pools:
        kubectl("apply", "-f", "-", stdin=json.dumps(pod_for(pool, options.cpu, options.memory)))
    rows, missing = [], []
    for pool in pools:
        claim = launched_claim(pool["metadata"]["name"], options.timeout)
        if claim is None:
            missing.append(pool["metadata"]["name"])
        else:
            rows.append(describe(claim))
    if options.json:
        print(json.dumps({"launches": rows, "no_launch": missing}, indent=2))
    else:
        for row in rows:
            print(
                f"{row['pool']:<12} {row['instance_type']:<14} {row['zone']:<12} "
                f"{row['subnet']} ({row['subnet_cidr']}) groups {','.join(row['security_groups'])} "
                f"image {row['image']} user data {' + '.join(row['user_data_parts'])}"
            )
        for pool_name in missing:
            print(f"{pool_name:<12} no instance within {options.timeout:g} s", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
