"""Lambda handler behind the AmiReleaseCheck custom resource (custom_resources.Provider).

Resource properties: ParameterName (the public SSM parameter Karpenter reads for the pinned
alias), AmiAlias, KubernetesVersion, ConfigField (the config key to name in the error).

- Create / Update: read the parameter; missing means the pinned AMI release has no image for
  the cluster's Kubernetes version, and the deploy fails with a message naming the config key.
  Only ParameterNotFound means that: throttling is retried (botocore's standard mode), and
  AccessDeniedException, which a policy still propagating returns right after CloudFormation
  updated it for a new parameter (IAM user guide, "Changes that I make are not always
  immediately visible"), is retried until ACCESS_DENIED_PATIENCE_SECONDS, then fails as what
  it is: a permission error, not a missing AMI.
- Delete: nothing to undo.
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

# Within the function's 30 s timeout, leaving time for the last attempt and the answer.
ACCESS_DENIED_PATIENCE_SECONDS = 20.0
ACCESS_DENIED_PAUSE_SECONDS = 2.0
RETRIES = Config(retries={"mode": "standard", "max_attempts": 3})


def on_event(
    event: dict[str, Any],
    _context: object = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    props = event["ResourceProperties"]
    name = props["ParameterName"]
    if event["RequestType"] == "Delete":
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    ssm = boto3.client("ssm", config=RETRIES)
    deadline = clock() + ACCESS_DENIED_PATIENCE_SECONDS
    while True:
        try:
            image_id = ssm.get_parameter(Name=name)["Parameter"]["Value"]
            break
        except ssm.exceptions.ParameterNotFound:
            raise RuntimeError(
                f"{props['ConfigField']} {props['AmiAlias']!r} has no AMI for Kubernetes "
                f"{props['KubernetesVersion']}: the SSM parameter {name} that Karpenter resolves "
                f"does not exist. Pick an AL2023 release that ships Kubernetes "
                f"{props['KubernetesVersion']} (awslabs/amazon-eks-ami releases) and set "
                f"{props['ConfigField']} to al2023@<that release>."
            ) from None
        except ClientError as error:
            if error.response["Error"]["Code"] != "AccessDeniedException":
                raise
            if clock() >= deadline:
                raise RuntimeError(
                    f"the AMI release check may not read {name} (AccessDeniedException after "
                    f"{ACCESS_DENIED_PATIENCE_SECONDS:.0f} s): this is a permission problem of "
                    "the check's own role, not a missing AMI. Deploy again; if it persists, "
                    "look for a permissions boundary or SCP that denies ssm:GetParameter on "
                    "public parameters."
                ) from error
            LOG.info("access to %s denied, retrying while IAM propagates", name)
            sleep(ACCESS_DENIED_PAUSE_SECONDS)
    LOG.info("%s resolves to %s", name, image_id)
    return {"PhysicalResourceId": name, "Data": {"ImageId": image_id}}
