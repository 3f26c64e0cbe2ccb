"""The node profile in the user-data: the kubelet settings as a nodeadm NodeConfig part that
nodeadm merges after Karpenter's, the hugepages and kernel settings as node_profile.sh's data,
and nothing of either for a pool without a profile."""

from __future__ import annotations

import email
import subprocess
from dataclasses import replace
from email.message import Message
from pathlib import Path
from typing import Any

import yaml

from config.node_bootstrap_plan import NodeBootstrapProps
from config.node_profile import NodeProfile
from node_bootstrap import render_user_data
from node_bootstrap.renderer import NODE_PROFILE_SCRIPT_NAME, deployed_size, render_configuration
from testing_support.multus_emulator import expanded_script, shell_part
from testing_support.node_box import karpenter
from tests.helpers import shared_reference
from tests.unit.node_bootstrap.test_dual_stack_rendering import assert_shellcheck_clean
from tests.unit.node_bootstrap.test_node_prefix_rendering import functions
from tests.unit.node_bootstrap.test_renderer import two_network_props

NODE_DIR = Path(__file__).parents[3] / "node_bootstrap"
UPF = NodeProfile(
    cpu_manager_policy="static",
    full_pcpus_only=True,
    reserved_cpus="0-1",
    topology_manager_policy="single-numa-node",
    topology_manager_scope="pod",
    hugepages_2mi=512,
    sysctls=(("net.core.rmem_max", 8388608), ("net.netfilter.nf_conntrack_max", 262144)),
)
KUBELET_ONLY = NodeProfile(topology_manager_policy="restricted")
# The JSON names of these KubeletConfiguration fields, as k8s.io/kubelet v0.35.4
# config/v1beta1/types.go spells them (CPUManagerPolicy `json:"cpuManagerPolicy"`,
# CPUManagerPolicyOptions, ReservedSystemCPUs, TopologyManagerPolicy, TopologyManagerScope).
KUBELET_CONFIGURATION_NAMES = {
    "cpuManagerPolicy",
    "cpuManagerPolicyOptions",
    "reservedSystemCPUs",
    "topologyManagerPolicy",
    "topologyManagerScope",
}


def with_profile(profile: NodeProfile, **changes: object) -> NodeBootstrapProps:
    return replace(two_network_props(**changes), node_profile=profile)


def node_configs(user_data: str) -> list[dict[str, Any]]:
    """The NodeConfig documents of the user-data's application/node.eks.aws parts, in order."""
    parts = [
        part
        for part in email.message_from_string(user_data).walk()
        if part.get_content_type() == karpenter.NODE_CONFIG_CONTENT_TYPE
    ]
    return [yaml.safe_load(str(part.get_payload())) for part in parts if isinstance(part, Message)]


def test_a_pool_without_a_profile_renders_no_node_config_and_no_profile_library() -> None:
    user_data = render_user_data(two_network_props())

    assert node_configs(user_data) == []
    assert "MULTUS_NODE_PROFILE_SYSCTLS" not in user_data
    plain = expanded_script(user_data)
    main_script = (NODE_DIR / "multus_eni_bootstrap.sh").read_text().split("\n", 1)[1]
    shebang = plain.split("\n", 1)[0]
    assert functions(plain) == functions(
        f"{shebang}\n{render_configuration(two_network_props())}{main_script}"
    )


def test_the_kubelet_settings_are_a_node_config_with_kubelet_configuration_names() -> None:
    """nodeadm's NodeConfig (node.eks.aws/v1alpha1): spec.kubelet.config takes
    KubeletConfiguration keys (amazon-eks-ami nodeadm/api/v1alpha1/nodeconfig_types.go,
    Config map[string]runtime.RawExtension), written as the kubelet's drop-in."""
    [document] = node_configs(render_user_data(with_profile(UPF)))

    assert document["apiVersion"] == "node.eks.aws/v1alpha1"
    assert document["kind"] == "NodeConfig"
    assert document["spec"] == {
        "kubelet": {
            "config": {
                "cpuManagerPolicy": "static",
                "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
                "reservedSystemCPUs": "0-1",
                "topologyManagerPolicy": "single-numa-node",
                "topologyManagerScope": "pod",
            }
        }
    }
    assert set(document["spec"]["kubelet"]["config"]) == KUBELET_CONFIGURATION_NAMES


def test_karpenters_ec2_node_class_kubelet_has_none_of_these_keys() -> None:
    """Why a NodeConfig part: Karpenter v1.14.1's EC2NodeClass spec.kubelet schema
    (karpenter.k8s.aws_ec2nodeclasses.yaml) offers none of the profile's kubelet keys."""
    crd = yaml.safe_load(
        shared_reference("karpenter-v1.14.1/crds/karpenter.k8s.aws_ec2nodeclasses.yaml").read_text()
    )
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    kubelet = schema["properties"]["spec"]["properties"]["kubelet"]["properties"]
    assert "maxPods" in kubelet
    assert not KUBELET_CONFIGURATION_NAMES & set(kubelet)


def test_a_single_cpu_reservation_stays_a_string_in_yaml() -> None:
    """reservedSystemCPUs is a string (types.go); a bare 0 would be read as a number."""
    profile = NodeProfile(cpu_manager_policy="static", reserved_cpus="0")
    [document] = node_configs(render_user_data(with_profile(profile)))
    assert document["spec"]["kubelet"]["config"]["reservedSystemCPUs"] == "0"


def test_nodeadm_merges_the_profile_after_karpenters_node_config() -> None:
    """Karpenter puts its NodeConfig first, then the EC2NodeClass's parts (testing_support/
    node_box/karpenter.py); nodeadm merges the documents in order, a later value winning
    (amazon-eks-ami nodeadm/internal/api/merge.go: mergo.WithOverride)."""
    ours = render_user_data(with_profile(UPF))
    launched = karpenter.user_data(
        karpenter.node_config(karpenter.ClusterDetails(name="telco-cluster"), labels={}, taints=[]),
        ours,
    )
    documents = node_configs(launched)

    assert len(documents) == 2
    assert "cluster" in documents[0]["spec"]
    merged: dict[str, Any] = {}
    for document in documents:
        merged.update(document["spec"]["kubelet"]["config"])
    assert merged["cpuManagerPolicy"] == "static"
    assert merged["clusterDNS"] == ["172.20.0.10"]


def test_hugepages_and_sysctls_are_the_profile_library_data_hugepages_first() -> None:
    props = with_profile(UPF)
    configuration = render_configuration(props)

    assert (
        "MULTUS_NODE_PROFILE_SYSCTLS='vm.nr_hugepages = 512\n"
        "net.core.rmem_max = 8388608\n"
        "net.netfilter.nf_conntrack_max = 262144'\n"
    ) in configuration
    assert render_configuration(two_network_props()) in configuration
    script = expanded_script(render_user_data(props))
    assert "node_profile_load()" in script
    assert script.rstrip().endswith('main "$@"')


def test_a_profile_of_kubelet_settings_only_adds_a_node_config_and_no_shell() -> None:
    user_data = render_user_data(with_profile(KUBELET_ONLY))
    assert shell_part(user_data) == shell_part(render_user_data(two_network_props()))
    assert [document["spec"] for document in node_configs(user_data)] == [
        {"kubelet": {"config": {"topologyManagerPolicy": "restricted"}}}
    ]


def test_the_size_check_counts_the_node_config_part() -> None:
    assert deployed_size(with_profile(KUBELET_ONLY)) > deployed_size(two_network_props())


def test_the_library_writes_the_settings_loads_conntrack_then_runs_the_hook(
    tmp_path: Path,
) -> None:
    """Applied before the hook's own body (node_prefix_load runs before any ENI is created).
    sysctl -p applies a sysctl.d file as sysctl -w would each line (procps sysctl(8)); -e skips
    the keys of interfaces that do not exist yet."""
    library = (NODE_DIR / NODE_PROFILE_SCRIPT_NAME).read_text()
    sysctls = "vm.nr_hugepages = 512\nnet.netfilter.nf_conntrack_max = 262144"
    probe = tmp_path / "probe.sh"
    probe.write_text(
        f"set -euo pipefail\nROOT={tmp_path}/node\nMULTUS_NODE_PROFILE_SYSCTLS='{sysctls}'\n"
        'log() { :; }\nrun_on_host() { echo "host: $*"; }\n'
        'node_prefix_load() { echo "hook: $1"; }\n'
        f"{library}\nnode_prefix_load us-west-2a\n"
    )
    completed = subprocess.run(["bash", str(probe)], capture_output=True, text=True, check=True)

    sysctl_file = tmp_path / "node/etc/sysctl.d/91-node-profile.conf"
    assert sysctl_file.read_text() == sysctls + "\n"
    assert (tmp_path / "node/etc/modules-load.d/node-profile.conf").read_text() == "nf_conntrack\n"
    assert completed.stdout.splitlines() == [
        "host: modprobe nf_conntrack",
        f"host: sysctl -q -e -p {sysctl_file}",
        "hook: us-west-2a",
    ]


def test_without_conntrack_keys_no_module_is_loaded(tmp_path: Path) -> None:
    library = (NODE_DIR / NODE_PROFILE_SCRIPT_NAME).read_text()
    probe = tmp_path / "probe.sh"
    probe.write_text(
        f"ROOT={tmp_path}\nMULTUS_NODE_PROFILE_SYSCTLS='vm.nr_hugepages = 8'\n"
        'log() { :; }\nrun_on_host() { echo "host: $*"; }\nnode_prefix_load() { :; }\n'
        f"{library}\nnode_prefix_load\n"
    )
    completed = subprocess.run(["bash", str(probe)], capture_output=True, text=True, check=True)
    assert completed.stdout.splitlines() == [
        f"host: sysctl -q -e -p {tmp_path}/etc/sysctl.d/91-node-profile.conf"
    ]
    assert not (tmp_path / "etc/modules-load.d").exists()


def test_shellcheck_reports_nothing_but_the_extended_hook(tmp_path: Path) -> None:
    assert_shellcheck_clean(
        NODE_PROFILE_SCRIPT_NAME, lambda props: replace(props, node_profile=UPF), tmp_path
    )
