"""The AWS that the Karpenter box's controller reaches: the project's EC2 emulator for EC2, and
moto_server for IAM, SQS and EKS, with what moto lacks answered as AWS answers it.

Karpenter's AWS SDK (aws-sdk-go-v2) takes one endpoint per service from the environment
(AWS_ENDPOINT_URL_<SERVICE>, the SDK's "service-specific endpoints" setting), so EC2 goes through
the emulator's checking proxy (SigV4 and parameter names against botocore's model, every request
recorded) and the other services straight to moto_server, but for SSM, which goes to
`PublicParameters` here: moto refuses to store a parameter under /aws/ ("No access to reserved
parameter name"), and the pool's AMI alias resolves through the public parameters EKS
publishes (aws/karpenter-provider-aws pkg/providers/amifamily/al2023.go, resolvePath:
/aws/service/eks/optimized-ami/<minor>/amazon-linux-2023/<arch>/<variant>/<name>/image_id).
Every other SSM request is forwarded to moto.

Not modelled, and why: the pricing API (moto has none; the box runs Karpenter with
ISOLATED_VPC, which makes it use the on-demand prices compiled into it, as a cluster without
the pricing endpoint does), and the GPU variants of the AL2023 alias (nvidia, neuron): the
project's pools choose general-purpose families, so only the standard images are published.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The AL2023 variants the box publishes per architecture (Karpenter asks for each).
STANDARD_VARIANT = "standard"
ARCHITECTURES = ("x86_64", "arm64")
SHUTDOWN_POLL_SECONDS = 0.05


def al2023_parameter(kubernetes_minor: str, architecture: str, ami_version: str) -> str:
    """The public parameter an `al2023@<version>` alias reads for one architecture's standard
    image (Karpenter's resolvePath, above)."""
    name = (
        "recommended"
        if ami_version == "latest"
        else f"amazon-eks-node-al2023-{architecture}-{STANDARD_VARIANT}-"
        f"{kubernetes_minor}-{ami_version}"
    )
    return (
        f"/aws/service/eks/optimized-ami/{kubernetes_minor}/amazon-linux-2023/{architecture}/"
        f"{STANDARD_VARIANT}/{name}/image_id"
    )


@dataclass
class PublicParameters:
    """An SSM endpoint that answers GetParameter for the public parameters it holds, as SSM
    answers (JSON 1.1, `AmazonSSM.GetParameter`; ParameterNotFound for a name it lacks under
    /aws/service/), and forwards every other request to moto_server at `upstream`."""

    upstream: tuple[str, int]
    parameters: dict[str, str] = field(default_factory=dict)
    #: Names asked for, in order (a test reads which alias Karpenter resolved).
    asked: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(
            target=self._server.serve_forever, args=(SHUTDOWN_POLL_SECONDS,), daemon=True
        ).start()

    def publish(self, values: Mapping[str, str]) -> None:
        with self._lock:
            self.parameters.update(values)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, target: str, request: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """SSM's answer for a public parameter, or None to forward the request."""
        if target != "AmazonSSM.GetParameter":
            return None
        name = str(request.get("Name", ""))
        if not name.startswith("/aws/service/"):
            return None
        with self._lock:
            self.asked.append(name)
            value = self.parameters.get(name)
        if value is None:
            return 400, {"__type": "ParameterNotFound", "message": f"Parameter {name} not found."}
        return 200, {
            "Parameter": {
                "Name": name,
                "Type": "String",
                "Value": value,
                "Version": 1,
                "DataType": "aws:ec2:image",
                "ARN": f"arn:aws:ssm:us-west-2::parameter{name}",
            }
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        facade = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, message_format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                target = self.headers.get("X-Amz-Target", "")
                try:
                    request = json.loads(body or b"{}")
                except json.JSONDecodeError:
                    request = {}
                answer = facade._answer(target, request)
                if answer is None:
                    status, payload, content_type = self._forward(body)
                else:
                    status, payload = answer[0], json.dumps(answer[1]).encode()
                    content_type = "application/x-amz-json-1.1"
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _forward(self, body: bytes) -> tuple[int, bytes, str]:
                upstream = HTTPConnection(*facade.upstream, timeout=30)
                try:
                    headers = {
                        key: value
                        for key, value in self.headers.items()
                        if key.lower() not in ("host", "content-length")
                    }
                    upstream.request("POST", self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    content_type = response.getheader("Content-Type", "application/json")
                    return response.status, response.read(), content_type
                finally:
                    upstream.close()

        return Handler


def publish_al2023_alias(
    ec2: Any, parameters: PublicParameters, kubernetes_minor: str, ami_version: str
) -> dict[str, str]:
    """Publishes, for an `al2023@<ami_version>` alias, one AL2023 image per architecture:
    moto's newest Amazon Linux 2023 image of that architecture (moto's RegisterImage drops the
    Architecture, and Karpenter skips an image without one: amifamily/ami.go, List). Returns
    architecture -> image ID."""
    images = {}
    for architecture in ARCHITECTURES:
        found = ec2.describe_images(
            Filters=[
                {"Name": "architecture", "Values": [architecture]},
                {"Name": "name", "Values": ["al2023-ami-2023*"]},
            ]
        )["Images"]
        if not found:
            raise RuntimeError(f"moto has no Amazon Linux 2023 image for {architecture}")
        newest = max(found, key=lambda image: str(image["Name"]))
        images[architecture] = str(newest["ImageId"])
    parameters.publish(
        {
            al2023_parameter(kubernetes_minor, architecture, ami_version): image
            for architecture, image in images.items()
        }
    )
    return images


@dataclass
class FleetLaunches:
    """What EC2 does for the instances of a CreateFleet that moto does not: each gets the
    security groups of its launch template's primary network interface (or its
    SecurityGroupIds), where moto gives it the VPC's default group, and the tags EC2 puts on an
    instance launched from a template (aws:ec2launchtemplate:id and :version, EC2 User Guide,
    "Launch an instance from a launch template"). Karpenter compares an
    instance's groups with its EC2NodeClass's (pkg/cloudprovider/drift.go,
    areSecurityGroupsDrifted), so without this every node it launched would drift at once.
    An Ec2Proxy.on_answered hook."""

    ec2: Any
    #: Instance ID -> the name of the launch template it was launched from.
    templates: dict[str, str] = field(default_factory=dict)

    def user_data(self, instance_id: str) -> str:
        """The user data of the instance's launch template (what the instance boots)."""
        (version,) = self.ec2.describe_launch_template_versions(
            LaunchTemplateName=self.templates[instance_id], Versions=["$Latest"]
        )["LaunchTemplateVersions"]
        return base64.b64decode(version["LaunchTemplateData"].get("UserData", "")).decode()

    def __call__(self, action: str, params: dict[str, str], answer: bytes) -> None:
        if action != "CreateFleet" or params.get("DryRun") == "true":
            return
        instance_ids = re.findall(rb"<item>(i-[0-9a-f]+)</item>", answer)
        template = params.get(
            "LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName"
        )
        if not instance_ids or template is None:
            return
        (version,) = self.ec2.describe_launch_template_versions(
            LaunchTemplateName=template, Versions=["$Latest"]
        )["LaunchTemplateVersions"]
        data = version["LaunchTemplateData"]
        primary = [i for i in data.get("NetworkInterfaces", []) if i.get("DeviceIndex", 0) == 0]
        groups = primary[0].get("Groups", []) if primary else data.get("SecurityGroupIds", [])
        launch_tags = [
            {"Key": "aws:ec2launchtemplate:id", "Value": version["LaunchTemplateId"]},
            {"Key": "aws:ec2launchtemplate:version", "Value": str(version["VersionNumber"])},
        ]
        for instance_id in instance_ids:
            self.templates[instance_id.decode()] = template
            self.ec2.create_tags(Resources=[instance_id.decode()], Tags=launch_tags)
            if groups:
                self.ec2.modify_instance_attribute(InstanceId=instance_id.decode(), Groups=groups)
