"""The node profile in the user-data: the kubelet settings as a nodeadm NodeConfig part that
nodeadm merges after Karpenter's, the hugepages and kernel settings as node_profile.sh's data,
and nothing of either for a pool without a profile."""

from __future__ import annotations

import email
import json
import subprocess
from dataclasses import replace
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
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
#: kube_reserved_memory_mib as the pool sets it (tests/unit/config/test_node_profile.py).
MEMORY_MANAGER = NodeProfile(memory_manager_policy="static", kube_reserved_memory_mib=2829)
UPF_WITH_MEMORY_MANAGER = replace(
    UPF, memory_manager_policy="static", kube_reserved_memory_mib=2829
)
COUNTED = NodeProfile(cpu_manager_policy="static", reserved_cpu_count=2, irqs_on_reserved_cpus=True)
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


def test_no_key_of_the_profile_is_one_karpenters_node_config_sets() -> None:
    """Karpenter (v1.0.0 on; v1.14.1 pkg/providers/amifamily/bootstrap/nodeadm.go) puts the
    EC2NodeClass's parts first and its own NodeConfig last (testing_support/node_box/
    karpenter.py); nodeadm merges the documents in order, a later value winning (amazon-eks-ami
    nodeadm/internal/api/merge.go: mergo.WithOverride). So a key in both parts would take
    Karpenter's value: the profile, memory manager included, sets none of Karpenter's."""
    ours = render_user_data(with_profile(UPF_WITH_MEMORY_MANAGER))
    launched = karpenter.user_data(
        karpenter.node_config(karpenter.ClusterDetails(name="telco-cluster"), labels={}, taints=[]),
        ours,
    )
    documents = node_configs(launched)

    assert len(documents) == 2
    assert "cluster" not in documents[0]["spec"] and "cluster" in documents[1]["spec"]
    profile_keys = set(documents[0]["spec"]["kubelet"]["config"])
    karpenter_keys = set(documents[1]["spec"]["kubelet"]["config"])
    assert {"clusterDNS", "maxPods", "registerWithTaints"} <= karpenter_keys
    assert {"cpuManagerPolicy", "memoryManagerPolicy", "kubeReserved"} <= profile_keys
    assert not profile_keys & karpenter_keys
    merged: dict[str, Any] = {}
    for document in documents:
        merged.update(document["spec"]["kubelet"]["config"])
    assert merged["cpuManagerPolicy"] == "static"
    assert merged["clusterDNS"] == ["172.20.0.10"]


def mebibytes(quantity: str) -> int:
    assert quantity.endswith("Mi"), quantity
    return int(quantity.removesuffix("Mi"))


def test_the_static_memory_manager_reserves_exactly_what_the_kubelet_adds_up() -> None:
    """The kubelet does not start the static memory manager unless reservedMemory, summed over
    NUMA nodes, equals kube-reserved + system-reserved + the hard eviction threshold of memory
    (kubernetes pkg/kubelet/cm/memorymanager/memory_manager.go, validateReservedMemory). nodeadm
    writes its own kube-reserved (255 MiB + 11 MiB per max pod) and memory.available 100Mi into
    config.json (amazon-eks-ami nodeadm/internal/kubelet/config.go); the drop-in's maps replace
    those keys (the kubelet merges maps key by key), so the part pins both and reserves their
    sum on NUMA node 0, which every machine has. "Static" is the kubelet's spelling
    (memorymanager policy_static.go)."""
    [document] = node_configs(render_user_data(with_profile(MEMORY_MANAGER)))
    config = document["spec"]["kubelet"]["config"]

    assert config["memoryManagerPolicy"] == "Static"
    assert config["kubeReserved"] == {"memory": "2829Mi"}
    assert config["evictionHard"] == {"memory.available": "100Mi"}
    assert "systemReserved" not in config  # neither nodeadm nor the app's EC2NodeClass sets it
    reservations = config["reservedMemory"]
    assert [reservation["numaNode"] for reservation in reservations] == [0]
    assert [set(reservation["limits"]) for reservation in reservations] == [{"memory"}]
    assert sum(mebibytes(reservation["limits"]["memory"]) for reservation in reservations) == (
        mebibytes(config["kubeReserved"]["memory"])
        + mebibytes(config["evictionHard"]["memory.available"])
    )


def test_a_cpu_count_is_the_librarys_data_not_a_node_config_key() -> None:
    props = with_profile(COUNTED)
    configuration = render_configuration(props)
    [document] = node_configs(render_user_data(props))

    assert document["spec"]["kubelet"]["config"] == {"cpuManagerPolicy": "static"}
    assert "MULTUS_NODE_PROFILE_RESERVED_CPU_COUNT=2\n" in configuration
    assert "MULTUS_NODE_PROFILE_IRQ_CPUS=count\n" in configuration
    assert "MULTUS_NODE_PROFILE_SYSCTLS" not in configuration
    assert "node_profile_load()" in expanded_script(render_user_data(props))


def test_interrupts_on_a_cpu_list_pass_the_list() -> None:
    profile = replace(COUNTED, reserved_cpu_count=None, reserved_cpus="0-1")
    configuration = render_configuration(with_profile(profile))
    assert "MULTUS_NODE_PROFILE_IRQ_CPUS=0-1\n" in configuration
    assert "RESERVED_CPU_COUNT" not in configuration


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


#: EC2's x86_64 layout: CPU n and n + vCPUs/2 are the two hyperthreads of one core.
HYPERTHREADED_8 = ["0,4", "1,5", "2,6", "3,7", "0,4", "1,5", "2,6", "3,7"]
#: Graviton: one thread per core.
SINGLE_THREADED_4 = ["0", "1", "2", "3"]


def run_library(root: Path, siblings: list[str], **variables: str) -> list[str]:
    """Runs node_profile.sh's hook on a sysfs of these CPUs (thread_siblings_list per CPU) under
    root; the host commands and the hook's line it prints."""
    cpu_dir = root / "sys/devices/system/cpu"
    for cpu, sibling_list in enumerate(siblings):
        (cpu_dir / f"cpu{cpu}/topology").mkdir(parents=True)
        (cpu_dir / f"cpu{cpu}/topology/thread_siblings_list").write_text(f"{sibling_list}\n")
    (cpu_dir / "online").write_text(f"0-{len(siblings) - 1}\n")
    library = (NODE_DIR / NODE_PROFILE_SCRIPT_NAME).read_text()
    settings = "".join(
        f"MULTUS_NODE_PROFILE_{name}='{value}'\n" for name, value in variables.items()
    )
    probe = root / "probe.sh"
    probe.write_text(
        f"set -euo pipefail\nROOT={root}\n{settings}"
        'log() { :; }\ndie() { echo "die: $*"; exit 1; }\nrun_on_host() { echo "host: $*"; }\n'
        'node_prefix_load() { echo "hook: $1"; }\n'
        f"{library}\nnode_prefix_load us-west-2a\n"
    )
    completed = subprocess.run(["bash", str(probe)], capture_output=True, text=True, check=True)
    return completed.stdout.splitlines()


def kubelet_dropin(root: Path) -> Any:
    return json.loads(
        (root / "etc/kubernetes/kubelet/config.json.d/50-multus-node-profile.conf").read_text()
    )


IRQBALANCE_DROPIN = "etc/systemd/system/irqbalance.service.d/50-multus-node-profile.conf"


@pytest.mark.parametrize(
    ("siblings", "count", "reserved"),
    [
        (HYPERTHREADED_8, "1", "0"),
        (HYPERTHREADED_8, "2", "0,4"),  # one whole core
        (HYPERTHREADED_8, "3", "0,1,4"),  # a core, then the next core's first thread
        (SINGLE_THREADED_4, "2", "0,1"),
    ],
)
def test_a_count_becomes_whole_cores_in_a_kubelet_drop_in(
    tmp_path: Path, siblings: list[str], count: str, reserved: str
) -> None:
    """The cores the kubelet's static policy takes itself for a CPU count: whole cores first,
    lowest first (kubelet cm/cpumanager policy_static.go takeByTopology), so full_pcpus_only
    leaves pods whole cores. The drop-in is a KubeletConfiguration (kubelet.config.k8s.io/
    v1beta1), reservedSystemCPUs a string in cpuset syntax; 50- sorts after nodeadm's 40-."""
    lines = run_library(tmp_path, siblings, RESERVED_CPU_COUNT=count)

    assert kubelet_dropin(tmp_path) == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "reservedSystemCPUs": reserved,
    }
    assert lines == ["hook: us-west-2a"]
    assert not (tmp_path / IRQBALANCE_DROPIN).exists()


def test_interrupts_stay_on_the_counted_cpus(tmp_path: Path) -> None:
    """irqbalance skips the CPUs of IRQBALANCE_BANNED_CPULIST, read from its environment
    (irqbalance cputree.c setup_banned_cpus, a cpulist); a unit drop-in sets it, then systemd
    reloads and restarts irqbalance if it runs (try-restart)."""
    lines = run_library(tmp_path, HYPERTHREADED_8, RESERVED_CPU_COUNT="2", IRQ_CPUS="count")

    assert (tmp_path / IRQBALANCE_DROPIN).read_text() == (
        "[Service]\nEnvironment=IRQBALANCE_BANNED_CPULIST=1,2,3,5,6,7\n"
    )
    assert lines == [
        "host: systemctl daemon-reload",
        "host: systemctl try-restart irqbalance.service",
        "hook: us-west-2a",
    ]


def test_interrupts_stay_on_a_listed_reservation(tmp_path: Path) -> None:
    run_library(tmp_path, SINGLE_THREADED_4, IRQ_CPUS="0-1")

    assert (tmp_path / IRQBALANCE_DROPIN).read_text().endswith("BANNED_CPULIST=2,3\n")
    assert not (tmp_path / "etc/kubernetes").exists()  # a list is the NodeConfig's


def test_a_count_the_node_cannot_hold_stops_the_bootstrap(tmp_path: Path) -> None:
    with pytest.raises(subprocess.CalledProcessError) as failed:
        run_library(tmp_path, SINGLE_THREADED_4, RESERVED_CPU_COUNT="5")
    assert (
        "die: node profile: cannot reserve 5 CPUs of 0-3"
        in failed.value.stdout + failed.value.stderr
    )
