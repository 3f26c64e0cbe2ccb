"""A digest of the network stack's template in the cluster stack's template.

The cluster stack reads the network stack's IDs with weak references (Fn::GetStackOutput),
which CloudFormation resolves only when the reading stack is created or updated (CloudFormation
template reference, Fn::GetStackOutput). The CDK CLI skips a stack whose template text, tags and
parameters equal the deployed ones ("no changes"; aws-cdk CLI, deploy-stack canSkipDeploy). A
network change that replaces a subnet or security group leaves the cluster template's text as it
was, so `cdk deploy` would skip the cluster stack and it would keep the old IDs.

With the network template's digest in the cluster template's Metadata, every network template
change makes the cluster template differ, so the CLI hands it to CloudFormation, which resolves
the outputs again and updates what reads a new ID. When no ID changed, the change set has no
resource changes and nothing is updated. Metadata, not a tag: a stack tag would be copied onto
every resource and update them all.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsii
from aws_cdk import IStableStringProducer, Lazy, Stack, Stage

NETWORK_DIGEST_KEY = "NetworkTemplateSha256"


def template_digest(template: object) -> str:
    """SHA-256 of a template in a canonical JSON form (key order does not count)."""
    canonical = json.dumps(template, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


@jsii.implements(IStableStringProducer)
class _NetworkTemplateDigest:
    def __init__(self, network: Stack) -> None:
        self._network = network

    def produce(self) -> str:
        # CDK writes each stack's template in construct order, a post-order walk of the tree
        # (aws-cdk-lib core/lib/private/synthesis.ts, synthesizeTree): the stage creates the
        # network stack first, so its template is on disk when this stack's template renders.
        stage = Stage.of(self._network)
        assert stage is not None  # every stack has one: the App is a Stage
        path = Path(stage.outdir) / self._network.template_file
        if not path.exists():
            raise RuntimeError(
                f"{self._network.stack_name} must be synthesized before the stacks that read it"
            )
        return template_digest(json.loads(path.read_text()))


def record_network_digest(reader: Stack, network: Stack) -> None:
    """Put the digest of `network`'s template into `reader`'s template Metadata."""
    reader.add_metadata(NETWORK_DIGEST_KEY, Lazy.string(_NetworkTemplateDigest(network)))
