"""Upgrading a deployment of the shared Multus security group to a group per network.

Before, every Multus ENI carried one group, MultusSecurityGroup; the cluster stack read its ID
through the network stack's output PublishOutputFnGetAttMultusSecurityGroup0FEC33EFGroupId...
(a weak reference, Fn::GetStackOutput: no export). The running nodes' ENIs keep that group
until Karpenter replaces the nodes (the user-data changes, so their EC2NodeClass drifts). EC2
refuses to delete a group that a network interface uses (EC2 user guide, "Delete a security
group"), so the update must neither replace nor remove it, and the output must stay while the
cluster stack of before still reads it.
"""

from __future__ import annotations

from typing import Any

from testing_support.cloudformation_changes import compare, reference_problems
from tests.conftest import SynthesizedApp

NETWORK = "karpenterwithmultus-network"
LEGACY_GROUP = "MultusSecurityGroup0FEC33EF"
LEGACY_OUTPUT = "PublishOutputFnGetAttMultusSecurityGroup0FEC33EFGroupId8EE93055"
# The shared group as the default synth rendered it before (commit c154946), and the output the
# cluster stack read it through.
BEFORE: dict[str, Any] = {
    "Resources": {
        LEGACY_GROUP: {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": "Multus ENIs: traffic from the configured sources",
                "SecurityGroupEgress": [
                    {
                        "CidrIp": "0.0.0.0/0",
                        "Description": "Allow all outbound traffic by default",
                        "IpProtocol": "-1",
                    }
                ],
                "SecurityGroupIngress": [
                    {"CidrIp": "10.0.0.0/16", "Description": "from 10.0.0.0/16", "IpProtocol": "-1"}
                ],
                "VpcId": {"Ref": "NetworkVpc7FB7348F"},
            },
        }
    },
    "Outputs": {LEGACY_OUTPUT: {"Value": {"Fn::GetAtt": [LEGACY_GROUP, "GroupId"]}}},
}


def after(default_app: SynthesizedApp) -> dict[str, Any]:
    return default_app.template_json(default_app.stage.network)


def test_the_shared_group_is_updated_in_place_not_replaced(default_app: SynthesizedApp) -> None:
    """createOnly properties of AWS::EC2::SecurityGroup (GroupDescription, GroupName, VpcId)
    from its CloudFormation resource schema: only its Name tag is new."""
    changes = compare({NETWORK: BEFORE}, {NETWORK: after(default_app)}).stacks[NETWORK]
    assert LEGACY_GROUP not in changes.replaced
    assert LEGACY_GROUP not in changes.removed
    assert LEGACY_GROUP in changes.updated
    old = BEFORE["Resources"][LEGACY_GROUP]["Properties"]
    new = after(default_app)["Resources"][LEGACY_GROUP]["Properties"]
    assert {key: value for key, value in new.items() if key != "Tags"} == old
    assert new["Tags"] == [{"Key": "Name", "Value": "karpenterwithmultus-multus1"}]


def test_the_other_network_gets_a_new_group_beside_it(default_app: SynthesizedApp) -> None:
    changes = compare({NETWORK: BEFORE}, {NETWORK: after(default_app)}).stacks[NETWORK]
    added_groups = {
        logical_id
        for logical_id in changes.added
        if after(default_app)["Resources"][logical_id]["Type"] == "AWS::EC2::SecurityGroup"
    }
    assert [group.removeprefix("MultusSecurityGroup")[:-8] for group in added_groups] == ["multus2"]


def test_the_output_the_old_cluster_stack_reads_stays(default_app: SynthesizedApp) -> None:
    outputs = after(default_app)["Outputs"]
    assert outputs[LEGACY_OUTPUT] == BEFORE["Outputs"][LEGACY_OUTPUT]
    assert reference_problems({NETWORK: BEFORE}, {NETWORK: after(default_app)}) == []
