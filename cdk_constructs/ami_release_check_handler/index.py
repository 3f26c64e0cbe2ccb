"""Lambda handler behind the AmiReleaseCheck custom resource (custom_resources.Provider).

Resource properties: ParameterName (the public SSM parameter Karpenter reads for the pinned
alias), AmiAlias, KubernetesVersion, ConfigField (the config key to name in the error).

- Create / Update: read the parameter; missing means the pinned AMI release has no image for
  the cluster's Kubernetes version, and the deploy fails with a message naming the config key.
- Delete: nothing to undo.
"""

from __future__ import annotations

import logging
from typing import Any

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)


def on_event(event: dict[str, Any], _context: object = None) -> dict[str, Any]:
    props = event["ResourceProperties"]
    name = props["ParameterName"]
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    ssm = boto3.client("ssm")
    try:
        image_id = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        raise RuntimeError(
            f"{props['ConfigField']} {props['AmiAlias']!r} has no AMI for Kubernetes "
            f"{props['KubernetesVersion']}: the SSM parameter {name} that Karpenter resolves "
            f"does not exist. Pick an AL2023 release that ships Kubernetes "
            f"{props['KubernetesVersion']} (awslabs/amazon-eks-ami releases) and set "
            f"{props['ConfigField']} to al2023@<that release>."
        ) from None
    LOG.info("%s resolves to %s", name, image_id)
    return {"PhysicalResourceId": name, "Data": {"ImageId": image_id}}
