"""The VPC CNI's part of a pod's network, as a CNI plugin (`aws-cni` in the tier's
10-aws.conflist) and as a function the data-plane tier calls without Multus.

eth0 as amazon-vpc-cni-k8s sets it up (docs/cni-proposal.md, "Pod to Pod communication";
cmd/routed-eni-cni-plugin/driver/driver.go): a veth from the node's namespace, the pod's
address (a secondary IPv4 address of the node's primary ENI) as a /32, 169.254.1.1 as an
on-link gateway whose neighbour entry is the host veth's MAC, the default route via it, and on
the node a /32 route to the host veth.

A stand-in: ipamd is not modelled (the caller assigns the address in the emulated EC2 and
writes it to PLAN_DIR/<pod namespace name> as {"address", "node"}), nor the egress and portmap
plugins of the real conflist; it runs with this machine's standard library only (Multus runs
it as a delegate: `python3 -I`, no virtualenv).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

VPC_CNI_GATEWAY = "169.254.1.1"
#: The node's /run/vpc-cni (in the node's mount namespace: testing_support/multus_node.py).
PLAN_DIR = Path("/run/vpc-cni")


def _ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def set_up_eth0(pod: str, node_namespace: str, eth0_address: str) -> str:
    """eth0 in the existing named namespace `pod`; returns its MAC."""
    _ip("-n", pod, "link", "set", "lo", "up")
    host_veth = f"v-{pod}"[:15]
    _ip("-n", node_namespace, "link", "add", host_veth, "type", "veth", "peer", "name", "eth0",
        "netns", pod)  # fmt: skip
    _ip("-n", node_namespace, "link", "set", host_veth, "up")
    host_mac = _ip("-n", node_namespace, "-br", "link", "show", host_veth).split()[2]
    subprocess.run(
        ["ip", "netns", "exec", node_namespace, "sysctl", "-qw", "net.ipv4.ip_forward=1"],
        check=True,
        timeout=30,
    )
    _ip("-n", node_namespace, "route", "add", f"{eth0_address}/32", "dev", host_veth)
    _ip("-n", pod, "address", "add", f"{eth0_address}/32", "dev", "eth0")
    _ip("-n", pod, "link", "set", "eth0", "up")
    _ip("-n", pod, "neigh", "add", VPC_CNI_GATEWAY, "lladdr", host_mac, "dev", "eth0",
        "nud", "permanent")  # fmt: skip
    _ip("-n", pod, "route", "add", VPC_CNI_GATEWAY, "dev", "eth0", "scope", "link")
    _ip("-n", pod, "route", "add", "default", "via", VPC_CNI_GATEWAY, "dev", "eth0")
    return _ip("-n", pod, "-br", "link", "show", "eth0").split()[2]


def main() -> int:
    """The plugin: ADD sets eth0 up from the plan and answers with it; DEL and the rest have
    nothing to do (the veth goes with the pod's namespace)."""
    config = json.load(sys.stdin)
    if os.environ["CNI_COMMAND"] != "ADD":
        return 0
    netns = os.environ["CNI_NETNS"]
    pod = Path(netns).name
    plan = json.loads((PLAN_DIR / pod).read_text())
    mac = set_up_eth0(pod, plan["node"], plan["address"])
    result = {
        "cniVersion": config["cniVersion"],
        "interfaces": [{"name": "eth0", "mac": mac, "sandbox": netns}],
        "ips": [{"version": "4", "address": f"{plan['address']}/32", "interface": 0}],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
