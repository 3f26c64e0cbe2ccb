"""IAM's size limit on a role's inline policies, checked at synth: IAM refuses PutRolePolicy
past it, so the stack's deploy would fail (and roll back) at the policy.

Source: IAM User Guide, "IAM and AWS STS quotas": "Role policy size: 10,240 characters" for the
aggregate of all inline policies of a role, "IAM doesn't count white space when calculating the
size of a policy against these limits". A template holds the document with tokens (the
partition, the account, other stacks' resource IDs); the size counts each with the longest value
it can take, so a check that passes here passes in every partition and account.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam

from config.aws_regions import AVAILABILITY_ZONE_LETTERS
from config.errors import ConfigError

ROLE_INLINE_POLICIES_LIMIT = 10_240
#: The longest value of each pseudo parameter ("aws-us-gov": the longest partition name; the
#: longest Region this project knows).
_PSEUDO_PARAMETERS = {
    "AWS::Partition": "aws-us-gov",
    "AWS::AccountId": "123456789012",
    "AWS::Region": max(AVAILABILITY_ZONE_LETTERS, key=len),
    "AWS::URLSuffix": "amazonaws.com.cn",
}
#: Any other reference (Ref, Fn::GetAtt, a cross-stack output): an EC2 resource ID at its
#: longest, the type's prefix and 17 hex digits (subnet- is the longest prefix the policies use).
_RESOURCE_ID = "subnet-0123456789abcdef0"
_WHITESPACE = re.compile(r"\s")


def deployed_characters(resolved: Any) -> int:
    """The characters IAM counts of a resolved policy document (whitespace not counted), each
    token at its longest."""
    text = json.dumps(_with_values(resolved), separators=(",", ":"))
    return len(_WHITESPACE.sub("", text))


def _with_values(node: Any) -> Any:
    if isinstance(node, list):
        return [_with_values(item) for item in node]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        ((key, value),) = node.items()
        if key == "Ref":
            return _PSEUDO_PARAMETERS.get(value, _RESOURCE_ID)
        if key == "Fn::Join":
            delimiter, parts = value
            return delimiter.join(str(_with_values(part)) for part in parts)
        if key.startswith("Fn::"):
            return _RESOURCE_ID
    return {key: _with_values(value) for key, value in node.items()}


def inline_policy_characters(stack: Stack, role: iam.IRole) -> dict[str, int]:
    """Path of each inline policy of `role` in `stack` -> its characters as IAM counts them."""
    role_ref = stack.resolve(role.role_name)
    sizes = {}
    for construct in stack.node.find_all():
        if not isinstance(construct, iam.CfnPolicy):
            continue
        if role_ref not in (stack.resolve(construct.roles) or []):
            continue
        sizes[construct.node.path] = deployed_characters(stack.resolve(construct.policy_document))
    return sizes


def check_role_inline_policies(stack: Stack, role: iam.IRole, what_grows: str) -> None:
    """Stop synth, naming the policies, their size and `what_grows` (what makes them larger),
    when the role's inline policies exceed IAM's limit."""
    sizes = inline_policy_characters(stack, role)
    total = sum(sizes.values())
    if total <= ROLE_INLINE_POLICIES_LIMIT:
        return
    each = ", ".join(f"{path} {size:,}" for path, size in sorted(sizes.items()))
    raise ConfigError(
        f"the inline policies of {role.node.path} take up to {total:,} characters ({each}), "
        f"more than the {ROLE_INLINE_POLICIES_LIMIT:,} IAM allows a role's inline policies "
        '(IAM User Guide, "IAM and AWS STS quotas": role policy size, whitespace not counted), '
        f"so IAM would refuse them at deploy; {what_grows}"
    )
