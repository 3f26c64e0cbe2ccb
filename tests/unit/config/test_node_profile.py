"""node_pools[].node_profile: what it accepts, what it plans, and every rule's message naming
the field and the fix (all of a profile's problems in one run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from config import ConfigError, load_config
from config.model import AppConfig
from config.node_profile import NodeProfile, cpu_list

UPF_POOL: dict[str, Any] = {
    "name": "upf",
    "instance_categories": ["c"],
    "instance_families": ["c5n", "c6in"],
    "instance_cpus": [4, 8, 16],
}


def pool_config(profile: dict[str, Any], **pool: Any) -> AppConfig:
    document = {"node_pools": [{**UPF_POOL, **pool, "node_profile": profile}]}
    loaded = load_config({"config": document}, Path("."))
    return loaded.base


def problems(profile: dict[str, Any], **pool: Any) -> str:
    with pytest.raises(ConfigError) as raised:
        pool_config(profile, **pool)
    return str(raised.value)


def test_a_upf_profile_is_planned_as_given() -> None:
    config = pool_config(
        {
            "cpu_manager": "static",
            "full_pcpus_only": True,
            "reserved_cpus": "0-1",
            "topology_manager": "single-numa-node",
            "topology_manager_scope": "pod",
            "hugepages_2mi": 1024,
            "sysctls": {"net.core.rmem_max": 16777216, "net.ipv4.conf.ens5.rp_filter": 1},
        }
    )
    assert config.node_pools[0].planned_node_profile() == NodeProfile(
        cpu_manager_policy="static",
        full_pcpus_only=True,
        reserved_cpus="0-1",
        topology_manager_policy="single-numa-node",
        topology_manager_scope="pod",
        hugepages_2mi=1024,
        sysctls=(("net.core.rmem_max", 16777216), ("net.ipv4.conf.ens5.rp_filter", 1)),
    )


def test_a_pool_without_a_profile_plans_none() -> None:
    config = load_config({"config": {}}, Path(".")).base
    assert config.node_pools[0].planned_node_profile() is None


@pytest.mark.parametrize(
    ("text", "cpus"), [("0", [0]), ("0-1", [0, 1]), ("0,2-3", [0, 2, 3]), ("1,1", [1])]
)
def test_cpu_lists(text: str, cpus: list[int]) -> None:
    assert cpu_list(text) == cpus


def test_static_needs_reserved_cpus_and_every_rule_reports_in_one_run() -> None:
    message = problems(
        {"cpu_manager": "static", "topology_manager_scope": "pod"},
    )
    assert "node_pools[0].node_profile.reserved_cpus: cpu_manager static needs" in message
    assert 'for example "0-1"' in message
    assert "node_pools[0].node_profile.topology_manager_scope: the none topology" in message
    assert "set topology_manager (for example restricted)" in message


def test_full_pcpus_only_needs_the_static_policy() -> None:
    message = problems({"full_pcpus_only": True})
    assert "node_pools[0].node_profile.full_pcpus_only: an option of the static" in message
    assert "set cpu_manager to static" in message


def test_an_empty_profile_is_refused() -> None:
    assert "node_pools[0].node_profile: set at least one of" in problems({})


@pytest.mark.parametrize(
    ("reserved", "fragment"),
    [
        ("0 - 1", "is not a Linux CPU list"),
        ("0-", "is not a Linux CPU list"),
        ("3-1", "the range 3-1 ends before it starts; write 1-3"),
    ],
)
def test_reserved_cpus_syntax(reserved: str, fragment: str) -> None:
    message = problems({"cpu_manager": "static", "reserved_cpus": reserved})
    assert "node_pools[0].node_profile.reserved_cpus:" in message
    assert fragment in message


@pytest.mark.parametrize("reserved", ["0-3", "4", "0,5"])
def test_reserved_cpus_must_leave_cpus_on_the_smallest_size(reserved: str) -> None:
    """c5n.xlarge and c6in.xlarge, the pool's smallest, have 4 vCPUs (CPUs 0-3)."""
    message = problems({"cpu_manager": "static", "reserved_cpus": reserved})
    assert "node_pools[0].node_profile.reserved_cpus:" in message
    assert "smallest instance type c5n.xlarge has CPUs 0-3" in message
    assert "reserve fewer or drop the small sizes from instance_cpus" in message


def test_reserved_cpus_fit_once_the_small_sizes_are_dropped() -> None:
    pool_config({"cpu_manager": "static", "reserved_cpus": "0-3"}, instance_cpus=[8, 16])


def test_hugepages_must_leave_ordinary_memory_on_the_smallest_size() -> None:
    """c6in.xlarge has 8 GiB (EC2 instance types, compute optimized): 3072 pages (6 GiB)
    leave the 2 GiB floor, 3073 do not."""
    pool_config({"hugepages_2mi": 3072})
    message = problems({"hugepages_2mi": 3073})
    assert "node_pools[0].node_profile.hugepages_2mi: 3073 pages are 6146 MiB" in message
    assert "c6in.xlarge (8192 MiB)" in message
    assert "ask for at most 3072 pages" in message


def test_c5n_counts_its_larger_memory() -> None:
    """c5n.xlarge has 10.5 GiB, more than the compute-optimized 2 GiB per vCPU."""
    pool_config({"hugepages_2mi": 4352}, instance_families=["c5n"])
    assert "c5n.xlarge (10752 MiB)" in problems({"hugepages_2mi": 4353}, instance_families=["c5n"])


def test_1gi_hugepages_are_refused_with_the_reason_and_what_to_do() -> None:
    message = problems({"hugepages_1gi": 4})
    assert "node_pools[0].node_profile: hugepages_1gi: 1 GiB pages" in message
    assert "kernel arguments" in message and "reboot" in message
    assert "use hugepages_2mi" in message


def test_sysctls_outside_the_allow_list_are_refused_naming_key_and_list() -> None:
    message = problems({"sysctls": {"kernel.panic": 10, "vm.nr_hugepages": 8}})
    assert "node_pools[0].node_profile.sysctls: 'kernel.panic' is not a kernel setting" in message
    assert "'vm.nr_hugepages' is not" in message  # hugepages_2mi sets it
    assert "allowed: net.core.rmem_default" in message
    assert "net.ipv4.conf.<interface>.forwarding|rp_filter" in message


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("net.ipv4.ip_forward", 2, "takes [0, 1]"),
        ("net.ipv4.conf.ens5.rp_filter", 3, "takes [0, 1, 2]"),
        ("net.core.rmem_max", -1, "takes a whole number >= 0"),
        ("net.ipv4.conf.all.rp_filter", 1, "the bootstrap keeps it 0"),
    ],
)
def test_sysctl_values(key: str, value: int, fragment: str) -> None:
    message = problems({"sysctls": {key: value}})
    assert f"node_pools[0].node_profile.sysctls: {key} = {value}: {fragment}" in message


def test_a_pool_without_networks_cannot_carry_a_profile() -> None:
    message = problems({"hugepages_2mi": 8}, networks=[])
    assert "node_pools[0].node_profile: the app gives a pool without networks no user-data" in (
        message
    )


def test_a_cpu_count_and_the_interrupts_are_planned() -> None:
    """An int is a count, a string a CPU list (strict: no coercion between them)."""
    profile = (
        pool_config({"cpu_manager": "static", "reserved_cpus": 2, "irqs_on_reserved_cpus": True})
        .node_pools[0]
        .planned_node_profile()
    )
    assert profile is not None
    assert (profile.reserved_cpus, profile.reserved_cpu_count) == (None, 2)
    assert profile.irqs_on_reserved_cpus


@pytest.mark.parametrize(
    ("reserved", "fragment"),
    [
        (0, "0: reserve at least 1 CPU, or drop reserved_cpus"),
        (1.5, "1.5 is neither a CPU list"),
        (True, "True is neither a CPU list"),
    ],
)
def test_reserved_cpus_count_syntax(reserved: object, fragment: str) -> None:
    message = problems({"cpu_manager": "static", "reserved_cpus": reserved})
    assert f"node_pools[0].node_profile.reserved_cpus: {fragment}" in message


def test_a_count_must_leave_cpus_on_the_smallest_size() -> None:
    """c5n.xlarge, the pool's smallest, has 4 vCPUs: 3 leave one, 4 leave none."""
    pool_config({"cpu_manager": "static", "reserved_cpus": 3})
    message = problems({"cpu_manager": "static", "reserved_cpus": 4})
    assert "node_pools[0].node_profile.reserved_cpus: 4 CPUs are all of the pool's smallest" in (
        message
    )
    assert "c5n.xlarge (4 vCPUs)" in message and "reserve fewer" in message


def test_interrupts_on_reserved_cpus_need_the_static_policy() -> None:
    message = problems({"irqs_on_reserved_cpus": True, "hugepages_2mi": 8})
    assert "node_pools[0].node_profile.irqs_on_reserved_cpus: keeps interrupts off" in message
    assert "set cpu_manager to static" in message


def test_the_memory_manager_pins_nodeadms_reservation_of_the_largest_size() -> None:
    """nodeadm reserves 255 MiB + 11 MiB per max pod (amazon-eks-ami nodeadm/internal/kubelet/
    config.go getMemoryMebibytesToReserve), max pods being ENIs x (IPv4 per ENI - 1) + 2
    (eni_max_pods.go calculateStandardMaxPods). The pool's largest sizes, c5n.4xlarge and
    c6in.4xlarge, have 8 ENIs of 30 IPv4 addresses (EC2 instance types, network
    specifications): 234 pods, 2829 MiB, at least what nodeadm reserves on any size."""
    profile = pool_config({"memory_manager": "static"}).node_pools[0].planned_node_profile()
    assert profile is not None
    assert profile.memory_manager_policy == "static"
    assert profile.kube_reserved_memory_mib == 255 + 11 * (8 * (30 - 1) + 2) == 2829
    without = pool_config({"hugepages_2mi": 8}).node_pools[0].planned_node_profile()
    assert without is not None and without.kube_reserved_memory_mib is None
