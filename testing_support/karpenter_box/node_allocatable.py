"""What a node's kubelet reports as capacity and allocatable, from its instance type (EC2's
description of it) and the user data it booted with (its launch template's, as Karpenter merged
it): the box's kubelet player registers each node with these, so a test compares Karpenter's
figures with the kubelet's instead of Karpenter's with its own.

The rules, each read at its source:
- nodeadm (github.com/awslabs/amazon-eks-ami/nodeadm, the version the node box builds:
  internal/kubelet/config.go, withDefaultReservedResources) writes kube-reserved into the
  kubelet's config.json: CPU 6% of the first core, 1% of the second, 0.5% of the third and
  fourth, 0.25% of the rest (getCPUMillicoresToReserve); memory 255 MiB + 11 MiB per max pod,
  from nodeadm's own max pods of the type (ENIs x (IPv4 addresses per ENI - 1) + 2), not
  Karpenter's; ephemeral storage 1Gi. The hard eviction threshold of memory is 100Mi.
- every application/node.eks.aws part of the user data is merged in order, maps key by key
  (nodeadm internal/api/merge.go); the merged kubelet config is a drop-in the kubelet merges
  over config.json key by key (kubelet-config-directory-merging).
- node_profile.sh turns MULTUS_NODE_PROFILE_RESERVED_CPU_COUNT into reservedSystemCPUs, and
  its sysctl lines set vm.nr_hugepages (2 MiB pages).
- with reservedSystemCPUs, the kubelet drops kube-reserved CPU and reserves that many CPUs as
  system-reserved (kubernetes cmd/kubelet/app/server.go); allocatable = capacity - kube-reserved
  - system-reserved - the hard eviction threshold, and memory less the hugepages
  (pkg/kubelet/nodestatus/setters.go).

Not modelled: the memory the kernel keeps below the nominal size (the kubelet's capacity is
the machine's MemTotal, which only a booted instance shows; Karpenter subtracts 7.5% of the
nominal size for it, VM_MEMORY_OVERHEAD_PERCENT), so the memory here is the nominal size's.
"""

from __future__ import annotations

import email
import re
import shlex
from collections.abc import Mapping
from typing import Any

import yaml

from config.node_profile import cpu_list

NODE_CONFIG_TYPE = "application/node.eks.aws"
EVICTION_HARD_MEMORY_MIB = 100
HUGEPAGE_MIB = 2
_CPU_RANGES = ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, None, 25))


def nodeadm_kube_reserved_cpu_millicores(vcpus: int) -> int:
    total = vcpus * 1000
    reserved = 0
    for start, end, basis_points in _CPU_RANGES:
        if total > start:
            reserved += (min(total, end or total) - start) * basis_points // 10000
    return reserved


def nodeadm_max_pods(interfaces: int, addresses_per_interface: int) -> int:
    return interfaces * (addresses_per_interface - 1) + 2


def kubelet_config(user_data: str) -> dict[str, Any]:
    """The kubelet config of the user data's NodeConfig parts, merged in order."""
    merged: dict[str, Any] = {}
    for part in email.message_from_string(user_data).walk():
        if part.get_content_type() != NODE_CONFIG_TYPE:
            continue
        payload = bytes(part.get_payload(decode=True)).decode()
        for document in yaml.safe_load_all(payload):
            config = (document or {}).get("spec", {}).get("kubelet", {}).get("config", {})
            _merge(merged, config)
    return merged


def profile_variables(user_data: str) -> dict[str, str]:
    """The MULTUS_NODE_PROFILE_* assignments of the user data's shell part."""
    variables = {}
    for match in re.finditer(r"^MULTUS_NODE_PROFILE_([A-Z_]+)=", user_data, re.MULTILINE):
        lexer = shlex.shlex(user_data[match.end() :], posix=True)
        lexer.whitespace = " \t\n"
        lexer.whitespace_split = True
        variables[match.group(1)] = lexer.get_token() or ""
    return variables


def node_allocatable(
    user_data: str, instance_type: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) as the kubelet reports them for an instance of `instance_type`
    (an entry of DescribeInstanceTypes) booted with `user_data`."""
    vcpus = int(instance_type["VCpuInfo"]["DefaultVCpus"])
    memory_mib = int(instance_type["MemoryInfo"]["SizeInMiB"])
    network = instance_type["NetworkInfo"]
    nodeadm_pods = nodeadm_max_pods(
        int(network["MaximumNetworkInterfaces"]), int(network["Ipv4AddressesPerInterface"])
    )
    config = kubelet_config(user_data)
    variables = profile_variables(user_data)
    kube_reserved = {
        "cpu": f"{nodeadm_kube_reserved_cpu_millicores(vcpus)}m",
        "memory": f"{11 * nodeadm_pods + 255}Mi",
        **config.get("kubeReserved", {}),
    }
    system_reserved = dict(config.get("systemReserved", {}))
    reserved_cpus = config.get("reservedSystemCPUs")
    count = int(variables["RESERVED_CPU_COUNT"]) if "RESERVED_CPU_COUNT" in variables else None
    if reserved_cpus is not None or count is not None:
        kube_reserved.pop("cpu", None)
        system_reserved["cpu"] = str(
            count if count is not None else len(cpu_list(str(reserved_cpus)))
        )
    eviction = config.get("evictionHard", {}).get(
        "memory.available", f"{EVICTION_HARD_MEMORY_MIB}Mi"
    )
    pages = _hugepages(variables.get("SYSCTLS", ""))
    capacity = {
        "cpu": str(vcpus),
        "memory": f"{memory_mib}Mi",
        "pods": str(config.get("maxPods", nodeadm_pods)),
        "ephemeral-storage": "20Gi",
    }
    cpu = (
        vcpus * 1000
        - _millicores(kube_reserved.get("cpu", "0"))
        - _millicores(system_reserved.get("cpu", "0"))
    )
    memory = (
        memory_mib
        - _mib(kube_reserved.get("memory", "0"))
        - _mib(system_reserved.get("memory", "0"))
        - _mib(eviction)
        - pages * HUGEPAGE_MIB
    )
    allocatable = {**capacity, "cpu": f"{cpu}m", "memory": f"{memory}Mi"}
    if pages:
        capacity["hugepages-2Mi"] = allocatable["hugepages-2Mi"] = f"{pages * HUGEPAGE_MIB}Mi"
    return capacity, allocatable


def _merge(target: dict[str, Any], source: Mapping[str, Any]) -> None:
    for key, value in source.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


def _hugepages(sysctls: str) -> int:
    match = re.search(r"^vm\.nr_hugepages\s*=\s*(\d+)$", sysctls, re.MULTILINE)
    return int(match.group(1)) if match else 0


def _millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def _mib(quantity: str) -> int:
    if quantity.endswith("Mi"):
        return int(quantity[:-2])
    if quantity.endswith("Gi"):
        return int(quantity[:-2]) * 1024
    if quantity.endswith("Ki"):
        return int(quantity[:-2]) // 1024
    return int(quantity) // 2**20
