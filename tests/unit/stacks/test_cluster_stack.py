"""ClusterStack: EKS, add-ons, system node group, Karpenter IAM, queue, rules, Helm, outputs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from config import parse_config
from config.eks_addons import ADDON_VERSIONS, version_parts
from tests.conftest import SynthesizedApp, cdk_json_context, synthesize
from tests.helpers import (
    TOKEN,
    joined_text,
    logical_id,
    only,
    resources,
    shared_reference,
    sub_notation,
    waits_for,
)

SEED = parse_config({})
CLUSTER = SEED.cluster_name
REFERENCE_TEMPLATE = "karpenter-v1.14.1/cloudformation.yaml"
ADMIN_ARN = "arn:aws:iam::123456789012:role/platform-admins"
OPERATOR_CIDR = "198.51.100.0/24"
CONTROLLER_TAINT = {"key": "karpenter.sh/controller", "value": "true"}
SCOPED_ACTIONS = {"ec2:RunInstances", "ec2:TerminateInstances", "ec2:CreateFleet", "iam:PassRole"}


@pytest.fixture(scope="module")
def cluster(default_app: SynthesizedApp) -> dict[str, Any]:
    return default_app.template_json(default_app.stage.cluster)


@pytest.fixture(scope="module")
def variant(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One non-default synth: admin principal, public endpoint for one CIDR, Spot
    service-linked role, Kubernetes 1.36."""
    overrides = {
        "cluster": {
            "kubernetes_version": "1.36",
            "admin_principal_arns": [ADMIN_ARN],
            "public_access_cidrs": [OPERATOR_CIDR],
        },
        "karpenter": {"spot_service_linked_role": True},
    }
    app = synthesize(tmp_path_factory.mktemp("variant"), cdk_json_context(config=overrides))
    return app.template_json(app.stage.cluster)


def statements(template: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every IAM statement of the template's roles (inline) and policies."""
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::IAM::Role":
            for policy in resource["Properties"].get("Policies", []):
                yield from policy["PolicyDocument"]["Statement"]
        if resource["Type"] == "AWS::IAM::Policy":
            yield from resource["Properties"]["PolicyDocument"]["Statement"]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def controller_role(template: dict[str, Any]) -> dict[str, Any]:
    role: dict[str, Any] = template["Resources"][
        logical_id(template, "AWS::IAM::Role", "KarpenterControllerRole")
    ]
    return role


def controller_statements(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (policy,) = controller_role(template)["Properties"]["Policies"]
    return {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}


def helm_chart(template: dict[str, Any], release: str) -> dict[str, Any]:
    chart: dict[str, Any]
    (chart,) = [
        r["Properties"]
        for r in resources(template, "Custom::AWSCDK-EKS-HelmChart").values()
        if r["Properties"]["Release"] == release
    ]
    return chart


def helm_values(template: dict[str, Any], release: str) -> dict[str, Any]:
    """The chart values, with CloudFormation references replaced by TOKEN."""
    return dict(json.loads(joined_text(helm_chart(template, release)["Values"])))


# --- the cluster -------------------------------------------------------------------------------


def test_cluster_name_version_endpoint_logs_and_api_auth(cluster: dict[str, Any]) -> None:
    props = only(cluster, "AWS::EKS::Cluster")["Properties"]
    assert props["Name"] == CLUSTER
    assert props["Version"] == "1.35"  # the default
    vpc = props["ResourcesVpcConfig"]
    assert vpc["EndpointPrivateAccess"] is True
    assert vpc["EndpointPublicAccess"] is False
    assert "PublicAccessCidrs" not in vpc
    assert sorted(t["Type"] for t in props["Logging"]["ClusterLogging"]["EnabledTypes"]) == [
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    ]
    assert props["AccessConfig"] == {
        "AuthenticationMode": "API",
        "BootstrapClusterCreatorAdminPermissions": False,
    }
    assert props["BootstrapSelfManagedAddons"] is False
    assert props["ComputeConfig"] == {"Enabled": False}  # no Auto Mode


def test_cluster_lives_in_the_node_subnets_only(
    default_app: SynthesizedApp, cluster: dict[str, Any]
) -> None:
    network = default_app.template_json(default_app.stage.network)
    node_subnets = {
        key
        for key, r in network["Resources"].items()
        if r["Type"] == "AWS::EC2::Subnet"
        and {"Key": "aws-cdk:subnet-name", "Value": "Nodes"} in r["Properties"]["Tags"]
    }
    reads = only(cluster, "AWS::EKS::Cluster")["Properties"]["ResourcesVpcConfig"]["SubnetIds"]
    outputs = {name: output["Value"].get("Ref") for name, output in network["Outputs"].items()}
    # weak cross-stack references: outputs read with Fn::GetStackOutput
    assert {outputs[r["Fn::GetStackOutput"]["OutputName"]] for r in reads} == node_subnets


def test_cluster_does_not_tag_multus_subnets_for_load_balancers(
    default_app: SynthesizedApp,
) -> None:
    network = default_app.template_json(default_app.stage.network)
    for subnet in resources(network, "AWS::EC2::Subnet").values():
        tags = {t["Key"]: t["Value"] for t in subnet["Properties"]["Tags"]}
        if tags["aws-cdk:subnet-name"].startswith("multus"):
            assert "kubernetes.io/role/internal-elb" not in tags


def test_secrets_are_encrypted_with_a_rotating_key(cluster: dict[str, Any]) -> None:
    (encryption,) = only(cluster, "AWS::EKS::Cluster")["Properties"]["EncryptionConfig"]
    assert encryption["Resources"] == ["secrets"]
    key_id = encryption["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    key = cluster["Resources"][key_id]
    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["EnableKeyRotation"] is True


def test_kubectl_layer_matches_the_kubernetes_version(
    cluster: dict[str, Any], variant: dict[str, Any]
) -> None:
    for template, version in ((cluster, "1.35"), (variant, "1.36")):
        layers = [
            r["Properties"]["Description"]
            for r in resources(template, "AWS::Lambda::LayerVersion").values()
        ]
        assert any(f"/opt/kubectl/kubectl {version}." in d for d in layers), layers
        assert only(template, "AWS::EKS::Cluster")["Properties"]["Version"] == version


def test_no_admin_access_entry_unless_configured(
    cluster: dict[str, Any], variant: dict[str, Any]
) -> None:
    def principals(template: dict[str, Any]) -> list[Any]:
        return [
            r["Properties"]["PrincipalArn"]
            for r in resources(template, "AWS::EKS::AccessEntry").values()
            if any(
                "AmazonEKSClusterAdminPolicy" in json.dumps(p["PolicyArn"])
                for p in r["Properties"].get("AccessPolicies", [])
            )
        ]

    # Only the kubectl handler's role (a GetAtt) is an admin by default.
    assert all(isinstance(p, dict) for p in principals(cluster))
    assert ADMIN_ARN in principals(variant)


def test_managed_addons_and_core_dns_tolerates_the_controller_taint(
    cluster: dict[str, Any],
) -> None:
    addons = {
        r["Properties"]["AddonName"]: r for r in resources(cluster, "AWS::EKS::Addon").values()
    }
    assert set(addons) == {"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"}
    assert "PodIdentityAssociations" not in addons["kube-proxy"]["Properties"]
    config = json.loads(addons["coredns"]["Properties"]["ConfigurationValues"])
    assert {**CONTROLLER_TAINT, "operator": "Equal", "effect": "NoSchedule"} in config[
        "tolerations"
    ]


def addon_versions(template: dict[str, Any]) -> dict[str, str | None]:
    return {
        addon["Properties"]["AddonName"]: addon["Properties"].get("AddonVersion")
        for addon in resources(template, "AWS::EKS::Addon").values()
    }


def test_every_addon_of_the_default_app_has_a_pinned_version(
    default_app: SynthesizedApp,
) -> None:
    # Not EKS's default of the day: two accounts of one pipeline run the same versions.
    pinned = {
        name: addon_versions(template)
        for name, template in default_app.templates_by_stack_name().items()
        if resources(template, "AWS::EKS::Addon")
    }
    assert list(pinned) == [default_app.stage.cluster.stack_name]
    (versions,) = pinned.values()
    assert len(versions) == 4 and all(versions.values()), versions
    row = ADDON_VERSIONS[SEED.cluster.kubernetes_version]
    assert versions == row


def test_the_default_vpc_cni_counts_the_multus_enis_right(cluster: dict[str, Any]) -> None:
    # v1.20.0 to v1.22.4 count no_manage ENIs again on every reconcile (amazon-vpc-cni-k8s#3544).
    version = addon_versions(cluster)["vpc-cni"]
    assert version is not None
    parts = version_parts(version)
    assert parts is not None and parts[:3] >= (1, 23, 0), version


def test_a_cluster_on_another_minor_runs_that_minors_addons(variant: dict[str, Any]) -> None:
    assert addon_versions(variant) == ADDON_VERSIONS["1.36"]


def test_addons_and_node_group_come_up_in_order(cluster: dict[str, Any]) -> None:
    def depends_on(prefix: str, kind: str) -> set[str]:
        return set(cluster["Resources"][logical_id(cluster, kind, prefix)].get("DependsOn", []))

    nodegroup = logical_id(cluster, "AWS::EKS::Nodegroup", "SystemNodes")
    assert {logical_id(cluster, "AWS::EKS::Addon", p) for p in ("EksVpcCni", "EksKubeProxy")} <= (
        depends_on("SystemNodes", "AWS::EKS::Nodegroup")
    )
    assert nodegroup in depends_on("EksCoreDns", "AWS::EKS::Addon")


# --- system node group ---------------------------------------------------------------------------


def test_system_node_group_is_al2023_labelled_tainted_and_sized(cluster: dict[str, Any]) -> None:
    props = only(cluster, "AWS::EKS::Nodegroup")["Properties"]
    group = SEED.cluster.system_node_group
    assert props["AmiType"] == "AL2023_x86_64_STANDARD"
    assert props["InstanceTypes"] == group.instance_types
    assert props["ScalingConfig"] == {
        "MinSize": group.min_size,
        "DesiredSize": group.desired_size,
        "MaxSize": group.max_size,
    }
    assert props["Labels"] == {"karpenter.sh/controller": "true"}
    assert props["Taints"] == [
        {"Key": "karpenter.sh/controller", "Value": "true", "Effect": "NO_SCHEDULE"}
    ]
    assert "DiskSize" not in props  # the launch template owns the root volume
    assert len(props["Subnets"]) == len(SEED.availability_zones)


def test_system_nodes_require_imdsv2_and_an_encrypted_gp3_root(cluster: dict[str, Any]) -> None:
    data = only(cluster, "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    # One hop: pods (one hop further than the host) cannot reach the node role's credentials.
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    (root,) = data["BlockDeviceMappings"]
    assert root["DeviceName"] == "/dev/xvda"
    assert root["Ebs"]["Encrypted"] is True
    assert root["Ebs"]["VolumeType"] == "gp3"
    assert root["Ebs"]["VolumeSize"] == SEED.cluster.system_node_group.root_volume_gib
    assert "ImageId" not in data and "UserData" not in data


# --- Karpenter IAM -------------------------------------------------------------------------------


def test_node_role_has_three_policies_none_for_the_cni_and_an_ec2_linux_access_entry(
    cluster: dict[str, Any],
) -> None:
    role_id = logical_id(cluster, "AWS::IAM::Role", "KarpenterNodeRole")
    role = cluster["Resources"][role_id]["Properties"]
    policies = {json.dumps(p).rsplit("/", 1)[-1].strip('"]}') for p in role["ManagedPolicyArns"]}
    assert policies == {
        "AmazonEKSWorkerNodePolicy",
        "AmazonEC2ContainerRegistryPullOnly",
        "AmazonSSMManagedInstanceCore",
    }
    (entry,) = [
        r["Properties"]
        for r in resources(cluster, "AWS::EKS::AccessEntry").values()
        if r["Properties"]["PrincipalArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    ]
    assert entry["Type"] == "EC2_LINUX"
    assert "AccessPolicies" not in entry or entry["AccessPolicies"] == []


def test_node_role_may_assign_pod_ips_only_on_cluster_enis_in_the_multus_subnets(
    cluster: dict[str, Any],
) -> None:
    role_id = logical_id(cluster, "AWS::IAM::Role", "KarpenterNodeRole")
    statements = [
        statement
        for policy in resources(cluster, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    (manage,) = [s for s in statements if "ec2:AssignPrivateIpAddresses" in s["Action"]]
    conditions = manage["Condition"]["StringEquals"]
    assert set(conditions) == {"ec2:ResourceTag/multus-eni/cluster", "ec2:SourceInstanceARN"}
    assert conditions["ec2:ResourceTag/multus-eni/cluster"] == SEED.cluster_name  # owner tag
    # only the calling node's own ENIs (the tag the bootstrap writes with the instance's ID)
    assert json.dumps(conditions["ec2:SourceInstanceARN"]).endswith(
        ':instance/${aws:ResourceTag/multus-eni/instance-id}"]]}'
    )
    subnets = manage["Condition"]["ArnEquals"]["ec2:Subnet"]
    assert len(subnets) == 4  # 2 Multus networks x 2 AZs, nothing else
    assert all("subnet/" in json.dumps(subnet) for subnet in subnets)


def test_controller_uses_pod_identity_for_its_service_account(cluster: dict[str, Any]) -> None:
    trust = controller_role(cluster)["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [
        {
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
        }
    ]
    association = only(cluster, "AWS::EKS::PodIdentityAssociation")["Properties"]
    assert association["Namespace"] == SEED.karpenter.namespace
    assert association["ServiceAccount"] == "karpenter"
    role_id = logical_id(cluster, "AWS::IAM::Role", "KarpenterControllerRole")
    assert association["RoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}


def load_reference() -> dict[str, Any]:
    reference_template = shared_reference(REFERENCE_TEMPLATE)

    class CloudFormationLoader(yaml.SafeLoader):
        """Reads !Sub/!Ref/!GetAtt... as plain values."""

    def any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return loader.construct_scalar(node)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node)
        return loader.construct_mapping(node)  # type: ignore[arg-type]

    CloudFormationLoader.add_multi_constructor("!", any_tag)
    return dict(yaml.load(reference_template.read_text(), Loader=CloudFormationLoader))


def reference_controller_statements() -> dict[str, dict[str, Any]]:
    """The reference's controller policies (JSON inside !Sub), ${...} left as written."""
    found: dict[str, dict[str, Any]] = {}
    for resource in load_reference()["Resources"].values():
        if resource["Type"] == "AWS::IAM::ManagedPolicy":
            document = json.loads(resource["Properties"]["PolicyDocument"])
            found.update({s["Sid"]: s for s in document["Statement"]})
    return found


def test_controller_actions_equal_the_reference(cluster: dict[str, Any]) -> None:
    ours = controller_statements(cluster)
    reference = reference_controller_statements()
    assert set(ours) == set(reference)
    for sid, statement in reference.items():
        assert sorted(as_list(ours[sid]["Action"])) == sorted(as_list(statement["Action"])), sid


def test_controller_conditions_equal_the_reference_for_this_cluster(
    cluster: dict[str, Any],
) -> None:
    ours = controller_statements(cluster)
    for sid, statement in reference_controller_statements().items():
        expected = json.loads(
            json.dumps(statement.get("Condition", {}))
            .replace("${ClusterName}", CLUSTER)
            .replace("${AWS::Region}", SEED.region)
        )
        actual = ours[sid].get("Condition", {})
        if sid == "AllowZonalShiftStatusReadOnly":  # the cluster ARN is a GetAtt here
            assert set(actual["StringEquals"]) == {"arc-zonal-shift:ResourceIdentifier"}
            continue
        assert normalised(actual) == normalised(expected), sid


def normalised(condition: dict[str, Any]) -> dict[str, Any]:
    """A condition block with its list values sorted: their order is not meaningful."""
    return {op: {k: sorted(as_list(v)) for k, v in body.items()} for op, body in condition.items()}


def test_controller_resources_equal_the_reference_in_this_region(cluster: dict[str, Any]) -> None:
    ours = controller_statements(cluster)
    for sid, statement in reference_controller_statements().items():
        expected = sorted(as_list(statement["Resource"]))
        if any("Arn}" in r or "cluster/" in r for r in expected):
            continue  # references to our own resources: checked by the next test
        actual = sorted(
            sub_notation(r).replace(f":{SEED.region}:", ":${AWS::Region}:")
            for r in as_list(ours[sid]["Resource"])
        )
        assert actual == expected, sid


def test_controller_may_pass_only_the_node_role_and_use_only_its_queue_and_cluster(
    cluster: dict[str, Any],
) -> None:
    ours = controller_statements(cluster)
    node_role = logical_id(cluster, "AWS::IAM::Role", "KarpenterNodeRole")
    queue = logical_id(cluster, "AWS::SQS::Queue", "KarpenterInterruption")
    eks_cluster = logical_id(cluster, "AWS::EKS::Cluster", "EksCluster")
    assert ours["AllowPassingInstanceRole"]["Resource"] == {"Fn::GetAtt": [node_role, "Arn"]}
    assert ours["AllowInterruptionQueueActions"]["Resource"] == {"Fn::GetAtt": [queue, "Arn"]}
    assert ours["AllowAPIServerEndpointDiscovery"]["Resource"] == {
        "Fn::GetAtt": [eks_cluster, "Arn"]
    }


def test_launch_terminate_and_pass_role_are_never_granted_on_everything(
    cluster: dict[str, Any],
) -> None:
    """In every statement of the stack: never on "*"; on instances, fleets, launch templates,
    volumes or Spot requests only with this cluster's ownership tag in a condition (launch
    inputs such as AMIs and subnets need none, as in the reference); PassRole: the node role."""
    owned = f"kubernetes.io/cluster/{CLUSTER}"
    created = ("instance/*", "fleet/*", "launch-template/*", "volume/*", "spot-instances-request")
    node_role = logical_id(cluster, "AWS::IAM::Role", "KarpenterNodeRole")
    checked = 0
    for statement in statements(cluster):
        actions = set(as_list(statement["Action"])) & SCOPED_ACTIONS
        if statement["Effect"] != "Allow" or not actions:
            continue
        checked += 1
        targets = [sub_notation(r) for r in as_list(statement["Resource"])]
        assert "*" not in targets, statement
        if "iam:PassRole" in actions:
            assert targets == ["${" + node_role + ".Arn}"], statement
        if any(kind in target for target in targets for kind in created):
            assert owned in json.dumps(statement.get("Condition", {})), statement
    # the reference's four launch/terminate statements + PassRole, and the teardown's terminate
    assert checked == 6


# --- interruption queue --------------------------------------------------------------------------


def test_interruption_queue_is_encrypted_short_lived_and_tls_only(cluster: dict[str, Any]) -> None:
    queue = only(cluster, "AWS::SQS::Queue")["Properties"]
    assert queue["MessageRetentionPeriod"] == 300
    assert queue["SqsManagedSseEnabled"] is True
    policy = only(cluster, "AWS::SQS::QueuePolicy")["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny"
        and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        and s["Principal"] == {"AWS": "*"}
        for s in policy
    )
    senders = [s for s in policy if s["Effect"] == "Allow"]
    assert all(s["Principal"] == {"Service": "events.amazonaws.com"} for s in senders)
    assert len(senders) == len(interruption_rules(cluster))


def interruption_rules(cluster: dict[str, Any]) -> dict[str, Any]:
    """Karpenter's event rules (the other one is the Multus ENI sweeper's schedule)."""
    return {
        rule_id: rule
        for rule_id, rule in resources(cluster, "AWS::Events::Rule").items()
        if rule_id.startswith("KarpenterInterruption")
    }


def test_the_only_other_rule_is_the_multus_eni_sweepers_schedule(cluster: dict[str, Any]) -> None:
    others = {
        rule_id: rule
        for rule_id, rule in resources(cluster, "AWS::Events::Rule").items()
        if rule_id not in interruption_rules(cluster)
    }
    ((rule_id, rule),) = others.items()
    assert rule_id.startswith("MultusEniSweeperSchedule")
    assert rule["Properties"]["ScheduleExpression"] == "rate(15 minutes)"
    ((target),) = rule["Properties"]["Targets"]
    function = logical_id(cluster, "AWS::Lambda::Function", "MultusEniSweeperHandler")
    assert target["Arn"] == {"Fn::GetAtt": [function, "Arn"]}


def test_eventbridge_rules_send_every_interruption_event_to_the_queue(
    cluster: dict[str, Any],
) -> None:
    queue = logical_id(cluster, "AWS::SQS::Queue", "KarpenterInterruption")
    patterns = set()
    for rule in interruption_rules(cluster).values():
        props = rule["Properties"]
        ((target),) = props["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [queue, "Arn"]}
        pattern = props["EventPattern"]
        patterns.add((pattern["source"][0], pattern["detail-type"][0]))
    assert patterns >= {
        ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
        ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
        ("aws.ec2", "EC2 Instance State-change Notification"),
        ("aws.health", "AWS Health Event"),
    }


def test_rules_match_the_reference(cluster: dict[str, Any]) -> None:
    reference = {
        (
            r["Properties"]["EventPattern"]["source"][0],
            r["Properties"]["EventPattern"]["detail-type"][0],
        )
        for r in load_reference()["Resources"].values()
        if r["Type"] == "AWS::Events::Rule"
    }
    ours = {
        (
            r["Properties"]["EventPattern"]["source"][0],
            r["Properties"]["EventPattern"]["detail-type"][0],
        )
        for r in interruption_rules(cluster).values()
    }
    assert ours == reference


# --- Helm ----------------------------------------------------------------------------------------


def test_crd_chart_then_controller_chart_at_the_pinned_version(cluster: dict[str, Any]) -> None:
    crds = helm_chart(cluster, "karpenter-crd")
    controller = helm_chart(cluster, "karpenter")
    for chart, name in ((crds, "karpenter-crd"), (controller, "karpenter")):
        assert chart["Repository"] == f"oci://public.ecr.aws/karpenter/{name}"
        assert chart["Chart"] == name
        assert chart["Version"] == SEED.karpenter.version
        assert chart["Namespace"] == SEED.karpenter.namespace
    assert controller["SkipCrds"] is True
    assert "SkipCrds" not in crds
    controller_id = logical_id(cluster, "Custom::AWSCDK-EKS-HelmChart", "KarpenterController")
    depends = set(cluster["Resources"][controller_id]["DependsOn"])
    assert {
        logical_id(cluster, "Custom::AWSCDK-EKS-HelmChart", "KarpenterCrds"),
        logical_id(cluster, "AWS::EKS::PodIdentityAssociation", "Karpenter"),
        logical_id(cluster, "AWS::EKS::Nodegroup", "SystemNodes"),
        logical_id(cluster, "AWS::EKS::Addon", "EksClusterEksPodIdentityAgent"),
    } <= depends


def test_controller_values(cluster: dict[str, Any]) -> None:
    values = helm_values(cluster, "karpenter")
    # reservedENIs: the seed's two Multus networks (docs/node-capacity.md).
    assert values["settings"] == {
        "clusterName": CLUSTER,
        "interruptionQueue": TOKEN,
        "reservedENIs": "2",
    }
    assert "image" not in values["controller"]  # the chart's own pinned image
    assert values["replicas"] == SEED.karpenter.replicas == 2
    assert values["podDisruptionBudget"] == {"name": "karpenter", "maxUnavailable": 1}
    assert values["serviceAccount"] == {"create": True, "name": "karpenter"}
    assert {**CONTROLLER_TAINT, "operator": "Equal", "effect": "NoSchedule"} in values[
        "tolerations"
    ]
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {"key": "karpenter.sh/controller", "operator": "In", "values": ["true"]} in term[
        "matchExpressions"
    ]
    assert values["controller"]["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"memory": "1Gi"},
    }


def test_interruption_queue_name_reaches_the_chart(cluster: dict[str, Any]) -> None:
    raw = helm_chart(cluster, "karpenter")["Values"]
    queue = logical_id(cluster, "AWS::SQS::Queue", "KarpenterInterruption")
    assert {"Fn::GetAtt": [queue, "QueueName"]} in raw["Fn::Join"][1]


# --- Spot service-linked role ---------------------------------------------------------------------


def test_spot_service_linked_role_only_when_enabled(
    cluster: dict[str, Any], variant: dict[str, Any]
) -> None:
    assert resources(cluster, "AWS::IAM::ServiceLinkedRole") == {}
    assert only(variant, "AWS::IAM::ServiceLinkedRole")["Properties"]["AWSServiceName"] == (
        "spot.amazonaws.com"
    )


# --- outputs and attributes ----------------------------------------------------------------------


def test_outputs(cluster: dict[str, Any]) -> None:
    outputs = cluster["Outputs"]
    cluster_id = logical_id(cluster, "AWS::EKS::Cluster", "EksCluster")
    assert outputs["ClusterName"]["Value"] == {"Ref": cluster_id}
    assert outputs["UpdateKubeconfigCommand"]["Value"] == {
        "Fn::Join": [
            "",
            ["aws eks update-kubeconfig --name ", {"Ref": cluster_id}, f" --region {SEED.region}"],
        ]
    }
    queue = logical_id(cluster, "AWS::SQS::Queue", "KarpenterInterruption")
    assert outputs["InterruptionQueueName"]["Value"] == {"Fn::GetAtt": [queue, "QueueName"]}
    node_role = logical_id(cluster, "AWS::IAM::Role", "KarpenterNodeRole")
    assert outputs["KarpenterNodeRoleName"]["Value"] == {"Ref": node_role}


def test_public_attributes_for_the_next_constructs(default_app: SynthesizedApp) -> None:
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk import aws_iam as iam

    stack = default_app.stage.cluster
    assert isinstance(stack.cluster, eks.Cluster)
    assert isinstance(stack.karpenter_node_role, iam.Role)
    assert isinstance(stack.karpenter_release, eks.HelmChart)
    assert isinstance(stack.karpenter_crds, eks.HelmChart)


# --- IAM hygiene: the VPC CNI's own role, endpoint, admins ---------------------------------------


def managed_policy_names(role: dict[str, Any]) -> set[str]:
    return {
        json.dumps(p).rsplit("/", 1)[-1].strip('"]}')
        for p in role["Properties"].get("ManagedPolicyArns", [])
    }


def test_only_the_vpc_cni_role_carries_the_cni_policy_through_pod_identity(
    cluster: dict[str, Any],
) -> None:
    addons = {
        r["Properties"]["AddonName"]: r for r in resources(cluster, "AWS::EKS::Addon").values()
    }
    (association,) = addons["vpc-cni"]["Properties"]["PodIdentityAssociations"]
    assert association["ServiceAccount"] == "aws-node"
    cni_role_id = association["RoleArn"]["Fn::GetAtt"][0]
    holders = {
        key
        for key, r in cluster["Resources"].items()
        if r["Type"] == "AWS::IAM::Role" and "AmazonEKS_CNI_Policy" in managed_policy_names(r)
    }
    assert holders == {cni_role_id}
    trust = cluster["Resources"][cni_role_id]["Properties"]["AssumeRolePolicyDocument"]
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]


def test_vpc_cni_waits_for_the_pod_identity_agent_and_nodes_for_the_vpc_cni(
    cluster: dict[str, Any],
) -> None:
    addon_ids = {
        r["Properties"]["AddonName"]: k
        for k, r in cluster["Resources"].items()
        if r["Type"] == "AWS::EKS::Addon"
    }
    vpc_cni = cluster["Resources"][addon_ids["vpc-cni"]]
    assert addon_ids["eks-pod-identity-agent"] in vpc_cni.get("DependsOn", [])
    nodegroup = only(cluster, "AWS::EKS::Nodegroup")
    assert addon_ids["vpc-cni"] in nodegroup.get("DependsOn", [])


def test_system_node_role_has_no_cni_policy(cluster: dict[str, Any]) -> None:
    role_arn = only(cluster, "AWS::EKS::Nodegroup")["Properties"]["NodeRole"]
    role = cluster["Resources"][role_arn["Fn::GetAtt"][0]]
    assert managed_policy_names(role) == {
        "AmazonEKSWorkerNodePolicy",
        "AmazonEC2ContainerRegistryPullOnly",
    }


def test_public_endpoint_only_for_the_listed_cidrs(variant: dict[str, Any]) -> None:
    vpc = only(variant, "AWS::EKS::Cluster")["Properties"]["ResourcesVpcConfig"]
    assert vpc["EndpointPrivateAccess"] is True
    assert vpc["EndpointPublicAccess"] is True
    assert vpc["PublicAccessCidrs"] == [OPERATOR_CIDR]


def test_karpenter_controller_gets_its_region_without_imds(cluster: dict[str, Any]) -> None:
    env = helm_values(cluster, "karpenter")["controller"]["env"]
    assert {"name": "AWS_REGION", "value": SEED.region} in env


# --- the Multus ENIs' security groups ----------------------------------------------------------


def eni_policy_group_outputs(template: dict[str, Any]) -> list[str]:
    """The network-stack outputs (one per group ID) the ENI policy's security-group ARNs name."""
    (policy,) = [
        r["Properties"]
        for k, r in resources(template, "AWS::IAM::Policy").items()
        if k.startswith("MultusEniPolicy")
    ]
    (create,) = [
        s
        for s in policy["PolicyDocument"]["Statement"]
        if s.get("Sid") == "CreateMultusEniInMultusSubnets"
    ]
    return [
        part["Fn::GetStackOutput"]["OutputName"]
        for arn in create["Resource"]
        if ":security-group/" in json.dumps(arn)
        for part in arn["Fn::Join"][1]
        if isinstance(part, dict) and "Fn::GetStackOutput" in part
    ]


@pytest.mark.parametrize("app_fixture", ["default_app", "per_network_rules_app"])
def test_the_eni_policy_names_every_multus_group_and_nothing_else(
    app_fixture: str, request: pytest.FixtureRequest
) -> None:
    """CreateNetworkInterface authorizes each security group it names (Service Authorization
    Reference, Amazon EC2: CreateNetworkInterface, resource type security-group): every
    network's group, and no other, must be in the statement."""
    app: SynthesizedApp = request.getfixturevalue(app_fixture)
    network = app.template_json(app.stage.network)
    group_ids = {
        logical_id
        for logical_id, group in resources(network, "AWS::EC2::SecurityGroup").items()
        if group["Properties"]["GroupDescription"].startswith("Multus ENIs")
    }
    assert len(group_ids) == 2
    named = [
        network["Outputs"][output]["Value"]["Fn::GetAtt"][0]
        for output in eni_policy_group_outputs(app.template_json(app.stage.cluster))
    ]
    assert sorted(named) == sorted(group_ids)


def test_the_node_pool_waits_for_the_eni_policy(cluster: dict[str, Any]) -> None:
    """A node of a changed EC2NodeClass creates ENIs in groups only the updated policy allows."""
    node_pool = logical_id(
        cluster, "Custom::AWSCDK-EKS-KubernetesResource", "EksClusterkarpenternodepoolmultus"
    )
    assert logical_id(cluster, "AWS::IAM::Policy", "MultusEniPolicy") in waits_for(
        cluster, node_pool
    )
