"""A node of the default app's Multus pool, booted with the pool's real user-data (Karpenter's
NodeConfig, then node_bootstrap.render_user_data's document) against the emulator's IMDSv2 and
EC2 (testing_support/node_box/aws.py): cloud-init runs the bootstrap, which creates and attaches
one ENI per network of the pool; each attachment arrives in the box as a hot-plugged NIC with
the ENI's MAC. The session's one such node (`multus_node`) is shared by these tests, in order:
first-boot checks, a late hot-plug, then a reboot.

Expected values come from the config (the pool's network plan: interface name, device index,
MTU from config/path_mtu.py) and from EC2's side (the ENI's MAC), never from the guest.
"""

from __future__ import annotations

import email
import ipaddress
import json
import re
from typing import Any

import pytest

from config.node_bootstrap_plan import READY_MARKER_PATH
from config.path_mtu import path_mtu
from node_bootstrap.renderer import INSTANCE_TAG_KEY, OWNER_TAG_KEY
from tests.node_box.conftest import MultusNode
from tests.node_box.guest import link_with_mac, links, udev_properties, wait_until
from tests.node_box.pod_ips import PodAttachment, agent_pod, install, wait_for_agent

pytestmark = pytest.mark.node_box

LINK_DIR = "/etc/systemd/network"
RULES_DIR = "/etc/udev/rules.d"
BOOTSTRAP_LOG = "/var/log/multus-eni-bootstrap.log"
#: A kernel event, udev's rules and a rename, under TCG: seconds, not minutes.
EVENT_TIMEOUT = 120.0


def link_state(node: MultusNode, ifname: str) -> dict[str, Any] | None:
    return links(node.box).get(ifname)


#: How long a Multus interface's carrier may take to show as operstate UP after the test first
#: reads the link. The kernel turns carrier into operstate in its link-watch work
#: (net/core/link_watch.c), which batches a non-urgent event to at most one run per second
#: (linkwatch_nextevent = jiffies + HZ) on a shared workqueue, and a hot-plugged virtio NIC's
#: carrier follows its device's link status once the driver has read it; under TCG both have
#: been seen past the first read (operstate UNKNOWN, or a NIC that read NO-CARRIER a moment).
#: Bringing the link administratively up is the product's part, checked at once.
CARRIER_TIMEOUT = 30.0


def assert_named_up_at_mtu(node: MultusNode, link: dict[str, Any] | None, row: Any) -> None:
    """The link as read (named, administratively up, at its MTU: no waiting for those), then
    its operstate UP once the kernel has caught up with the NIC's carrier."""
    eni = node.eni_at(row.device_index)
    assert link is not None, f"no {row.interface_name} in {sorted(links(node.box))}"
    assert link["address"] == eni["MacAddress"].lower()
    assert "UP" in link["flags"], f"{row.interface_name} is down: {link['flags']}"
    assert link["mtu"] == row.mtu

    def carrier() -> dict[str, Any] | None:
        found = link_state(node, row.interface_name)
        return found if found and found["operstate"] == "UP" else None

    wait_until(carrier, timeout=CARRIER_TIMEOUT, what=f"{row.interface_name}'s operstate UP")


#: nodeadm's record of which manager owns each interface (nodeadm-internal udev/broker.go).
NODEADM_RECORDS = "/etc/eks/nodeadm/udev-net-manager"


def assert_recorded_as_not_networkds(node: MultusNode) -> None:
    """Each Multus interface is on record for nodeadm as not networkd's, so nodeadm's boot hook,
    which waits for every interface on record as networkd's to be "configured", never waits
    on one (an unmanaged interface never is). The nodeadm served here has no boot hook to show
    the wait itself (testing_support/node_box/README.md)."""
    for row in node.rows:
        record = f"{NODEADM_RECORDS}/{node.instance_id}/{row.interface_name}"
        assert node.box.sh(f"cat {record}") == "cni", record


def test_first_boot_names_each_multus_interface_up_at_its_network_mtu(
    multus_node: MultusNode,
) -> None:
    node = multus_node
    assert [row.interface_name for row in node.rows] == ["multus1", "multus2"]  # the default app
    box_links = links(node.box)
    for row in node.rows:
        # the default app's networks route nothing beyond the VPC: the VPC's jumbo frames
        assert row.mtu == path_mtu([]) == 9001
        assert_named_up_at_mtu(node, box_links.get(row.interface_name), row)
        eni = node.eni_at(row.device_index)
        link_file = node.box.sh(f"cat {LINK_DIR}/10-multus-{row.interface_name}.link")
        assert f"MACAddress={eni['MacAddress'].lower()}" in link_file
        assert f"Name={row.interface_name}" in link_file
        assert f"MTUBytes={row.mtu}" in link_file
        tags = {tag["Key"]: tag["Value"] for tag in eni["TagSet"]}
        assert tags[OWNER_TAG_KEY] == node.config.cluster_name
        assert tags[INSTANCE_TAG_KEY] == node.instance_id
    assert_recorded_as_not_networkds(node)
    # the bootstrap finished: its readiness marker names every interface, cloud-init saw no error
    marker = node.box.sh(f"cat {READY_MARKER_PATH}").split()
    assert marker == [row.interface_name for row in node.rows]
    result = json.loads(node.box.sh("cat /run/cloud-init/result.json"))["v1"]
    assert result["errors"] == []
    assert result["datasource"].startswith("DataSourceNoCloud")
    assert node.box.sh("cat /var/lib/cloud/data/instance-id").strip() == node.instance_id
    assert node.box.sh(f"grep -c 'multus-eni: instance' {BOOTSTRAP_LOG}").strip() == "1"
    assert node.box.boots.states[-1] == "running", node.box.sh("systemctl --failed --no-legend")
    assert node.box.sh("systemctl is-active multi-user.target").strip() == "active"
    # every attachment reached the box once, and nothing was unplugged
    assert node.node.plugger.error is None
    assert sorted(eni for eni, _ in node.node.plugger.log) == sorted(
        node.eni_at(row.device_index)["NetworkInterfaceId"] for row in node.rows
    )


def test_networkd_leaves_each_multus_interface_unmanaged(multus_node: MultusNode) -> None:
    node = multus_node
    setup = {}
    for line in node.box.sh("networkctl list --no-legend --no-pager").splitlines():
        _index, name, _kind, _operational, state = line.split()[:5]
        setup[name] = state
    for row in node.rows:
        assert setup[row.interface_name] == "unmanaged", setup
        status = node.box.sh(f"networkctl status --no-pager {row.interface_name}")
        assert re.search(r"State: \S+ \(unmanaged\)", status), status
    # the contrast: networkd does manage the primary NIC (DHCP from QEMU)
    primary = [name for name, state in setup.items() if state == "configured"]
    assert primary, setup


def test_no_address_route_or_policy_rule_is_set_for_a_multus_interface(
    multus_node: MultusNode,
) -> None:
    node = multus_node
    for row in node.rows:
        name = row.interface_name
        addresses = json.loads(node.box.sh(f"ip -j address show dev {name}"))[0]["addr_info"]
        # only the kernel's IPv6 link-local address, which any link gets when it goes up
        assert [a for a in addresses if a["scope"] != "link"] == [], addresses
        assert [a for a in addresses if a["family"] == "inet"] == [], addresses
        assert json.loads(node.box.sh(f"ip -j -4 route show table all dev {name}")) == []
        ipv6_routes = json.loads(node.box.sh(f"ip -j -6 route show table all dev {name}"))
        assert all(
            route["dst"].startswith(("fe80::", "ff00::", "multicast")) for route in ipv6_routes
        ), ipv6_routes
    # the kernel's own rules (IPv4: local, main, default; IPv6: local, main), none added
    for family, priorities in (("-4", [0, 32766, 32767]), ("-6", [0, 32766])):
        rules = json.loads(node.box.sh(f"ip -j {family} rule show"))
        assert [rule["priority"] for rule in rules] == priorities, rules
        assert not [rule for rule in rules if "iif" in rule or "oif" in rule], rules


def test_the_bootstrap_turns_reverse_path_filtering_off_for_each_multus_interface(
    multus_node: MultusNode,
) -> None:
    node = multus_node
    names = [row.interface_name for row in node.rows]
    # the kernel takes max(all, interface): both must be 0 for asymmetric Multus traffic
    assert node.box.sh("sysctl -n net.ipv4.conf.all.rp_filter").strip() == "0"
    for name in names:
        assert node.box.sh(f"sysctl -n net.ipv4.conf.{name}.rp_filter").strip() == "0"
    assert node.box.sh("cat /etc/sysctl.d/90-multus-eni.conf").splitlines() == [
        "net.ipv4.conf.all.rp_filter = 0",
        *(f"net.ipv4.conf.{name}.rp_filter = 0" for name in names),
    ]


def test_a_multus_eni_hotplugged_after_boot_comes_up_named_at_its_mtu(
    multus_node: MultusNode,
) -> None:
    """The second network's ENI detached and attached again once the node runs (EC2 shows a new
    attachment; the box sees an unplug, then a hot-plug): no bootstrap runs, so only the
    bootstrap's .link file (name, MTU) and udev rule (link up) act on the new device. Fails
    with the rule of f912b86's parent, whose RUN named udev's $name: at a hot-plug $name is the
    kernel's name, which the rename has taken away by the time RUN runs."""
    node = multus_node
    row = node.rows[1]
    ec2 = node.node.emulator.ec2
    eni = node.eni_at(row.device_index)
    ec2.detach_network_interface(AttachmentId=eni["Attachment"]["AttachmentId"])
    wait_until(
        lambda: row.interface_name not in links(node.box),
        timeout=EVENT_TIMEOUT,
        what=f"{row.interface_name} gone after the detach",
    )

    ec2.attach_network_interface(
        NetworkInterfaceId=eni["NetworkInterfaceId"],
        InstanceId=node.instance_id,
        DeviceIndex=row.device_index,
    )

    def up() -> dict[str, Any] | None:
        # administratively up (the rule)
        found = link_state(node, row.interface_name)
        return found if found and "UP" in found["flags"] else None

    link = wait_until(up, timeout=EVENT_TIMEOUT, what=f"{row.interface_name} up after the attach")
    assert_named_up_at_mtu(node, link, row)
    assert node.box.sh(f"sysctl -n net.ipv4.conf.{row.interface_name}.rp_filter").strip() == "0"
    assert node.node.plugger.log[-2:] == [
        (eni["NetworkInterfaceId"], "unplug"),
        (eni["NetworkInterfaceId"], "plug"),
    ]


KUBELET_DROPIN = "/etc/kubernetes/kubelet/config.json.d/50-multus-node-profile.conf"
IRQBALANCE_DROPIN = "/etc/systemd/system/irqbalance.service.d/50-multus-node-profile.conf"


def assert_node_profile_in_effect(node: MultusNode) -> None:
    """The pool's node profile as the kernel has it: the hugepages reserved, each setting at its
    value, connection tracking loaded for its settings; the values from the config."""
    profile = node.pool.planned_node_profile()
    assert profile is not None and profile.hugepages_2mi
    meminfo = dict(
        line.split(":", 1) for line in node.box.sh("cat /proc/meminfo").splitlines() if ":" in line
    )
    assert int(meminfo["HugePages_Total"]) == profile.hugepages_2mi, meminfo["HugePages_Total"]
    assert meminfo["Hugepagesize"].split() == ["2048", "kB"]
    for key, value in profile.sysctls:
        assert node.box.sh(f"sysctl -n {key}").strip() == str(value), key
    assert node.box.run(["test", "-d", "/sys/module/nf_conntrack"]).returncode == 0
    # the count as the bootstrap turned it into a list on this machine's CPUs: CPU 0 (a core of
    # one thread), in the kubelet's drop-in after nodeadm's; irqbalance banned from the other
    assert profile.reserved_cpu_count == 1 and profile.irqs_on_reserved_cpus
    assert node.box.sh("cat /sys/devices/system/cpu/online").strip() == "0-1"
    assert node.box.sh("cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list") == "0\n"
    dropin = node.box.sh(f"cat {KUBELET_DROPIN}")
    assert json.loads(dropin) == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "reservedSystemCPUs": "0",
    }, dropin
    assert node.box.sh(f"cat {IRQBALANCE_DROPIN}") == (
        "[Service]\nEnvironment=IRQBALANCE_BANNED_CPULIST=1\n"
    )


def test_the_node_profile_reserves_hugepages_and_sets_its_kernel_settings(
    multus_node: MultusNode,
) -> None:
    """The bootstrap's node_profile.sh on a real kernel, before nodeadm would start the kubelet
    (the kubelet's own settings go to nodeadm's part: tests/node_box/test_nodeadm.py checks it
    decodes)."""
    assert_node_profile_in_effect(multus_node)
    # the user-data carried the profile's NodeConfig part, then Karpenter's (nodeadm merges
    # later documents over earlier ones; the profile sets none of Karpenter's keys)
    message = email.message_from_string(multus_node.node.imds.user_data)
    node_configs = [
        str(part.get_payload())
        for part in message.walk()
        if part.get_content_type() == "application/node.eks.aws"
    ]
    assert len(node_configs) == 2
    assert "cpuManagerPolicy: static" in node_configs[0], node_configs
    assert "memoryManagerPolicy: Static" in node_configs[0], node_configs
    assert "Karpenter Generated NodeConfig" in node_configs[1], node_configs


@pytest.fixture(scope="module")
def pod_ip_agent(multus_node: MultusNode) -> str:
    """The pool's pod IP agent, its DaemonSet's pod run by the box's systemd (installed once,
    tests/node_box/pod_ips.py); the ID of the boot it was installed in."""
    install(multus_node.box, agent_pod(multus_node.config, multus_node.pool))
    return multus_node.box.boot_id()


def pod_address(row: Any, index: int) -> str:
    """The index-th address of the network's reservation outside its fixed addresses: one that
    Whereabouts could give a pod and the agent manages."""
    static = ipaddress.ip_network(row.static_range) if row.static_range else None
    reservation = ipaddress.ip_network(row.reservation_cidr)
    free = [address for address in reservation.hosts() if static is None or address not in static]
    return str(free[index])


def secondary_addresses(node: MultusNode, row: Any) -> set[str]:
    """The ENI's secondary private IPv4 addresses, as EC2 (moto) holds them."""
    eni = node.eni_at(row.device_index)
    return {
        entry["PrivateIpAddress"] for entry in eni["PrivateIpAddresses"] if not entry["Primary"]
    }


def assert_pod_address_assigned_and_released(node: MultusNode, pod: PodAttachment) -> None:
    assert pod.address not in secondary_addresses(node, pod.row)
    result = pod.add(node.box)
    assert [entry["address"] for entry in result["ips"]] == [
        f"{pod.address}/{ipaddress.ip_network(pod.row.subnet_cidr).prefixlen}"
    ]
    # the pod's address is the ENI's: the VPC delivers it to this node
    assert pod.address in secondary_addresses(node, pod.row)
    # and the plugin put the subnet back into the pod's main table via its Multus interface
    routes = json.loads(node.box.sh(f"ip -n {pod.netns} -j -4 route show table main"))
    assert {"dst": pod.row.subnet_cidr, "dev": "net1"}.items() <= next(
        route for route in routes if route["dst"] == pod.row.subnet_cidr
    ).items(), routes
    pod.delete(node.box)
    wait_until(
        lambda: pod.address not in secondary_addresses(node, pod.row),
        timeout=EVENT_TIMEOUT,
        what=f"{pod.address} released from the ENI after DEL",
    )


def test_the_pod_ip_agent_assigns_a_pods_address_to_the_eni_and_releases_it(
    multus_node: MultusNode, pod_ip_agent: str
) -> None:
    """The agent as its DaemonSet runs it (its ConfigMap's code and config, the init container's
    plugin install on the host, its hostPath mounts) serves the plugin that Multus would call
    last in the NAD's chain, on a real ipvlan link of the hot-plugged ENI."""
    node = multus_node
    assert node.box.sh("systemctl is-active multus-pod-ips-agent.service").strip() == "active"
    assert_pod_address_assigned_and_released(
        node, PodAttachment(node.rows[0], "first-boot", pod_address(node.rows[0], 0))
    )


def test_after_a_reboot_every_multus_interface_is_up_at_the_end_of_boot(
    multus_node: MultusNode,
) -> None:
    """A clean reboot: the ENIs stay attached (the NICs stay plugged), cloud-init does not run
    the bootstrap again, so each interface must come back named, at its MTU and up by the
    bootstrap's files alone, by the time systemd has finished starting (no waiting after it).

    Catches the revert of f912b86 (node_bootstrap: the udev rule 10-multus-<if>.rules with
    RUN+="/usr/sbin/ip link set dev $name up"): udev formats RUN when it reads the rule, before
    80-net-setup-link.rules renames the NIC, so `ip link set` names the kernel's old name and
    every Multus interface stays down after each reboot. Checked by hand: with that line put
    back into node_bootstrap/multus_eni_bootstrap.sh this test fails (multus1 is down)."""
    node = multus_node
    first_boot = node.box.boot_id()
    runs_before = node.box.sh(f"grep -c 'multus-eni: instance' {BOOTSTRAP_LOG}").strip()

    node.box.reboot()

    assert node.box.boot_id() != first_boot
    assert node.box.boots.states[-1] == "running", node.box.sh("systemctl --failed --no-legend")
    box_links = links(node.box)
    for row in node.rows:
        assert_named_up_at_mtu(node, box_links.get(row.interface_name), row)
        assert node.box.sh(f"sysctl -n net.ipv4.conf.{row.interface_name}.rp_filter") == "0\n"
    assert node.box.sh("sysctl -n net.ipv4.conf.all.rp_filter") == "0\n"
    assert_recorded_as_not_networkds(node)
    # the node profile again, from sysctl.d and modules-load.d, with no bootstrap to apply it
    assert_node_profile_in_effect(node)
    # the bootstrap ran in the first boot only (cloud-init: once per instance)
    assert node.box.sh(f"grep -c 'multus-eni: instance' {BOOTSTRAP_LOG}").strip() == runs_before


def test_after_a_reboot_the_pod_ip_agent_serves_the_plugin_again(
    multus_node: MultusNode, pod_ip_agent: str
) -> None:
    """The agent's pod comes back with the node (kubelet recreates a DaemonSet's pod; here its
    units are enabled), finds its ENIs by the bootstrap's state files (on disk) and serves a
    new pod on each network, its socket and records on a fresh /run."""
    node = multus_node
    assert node.box.boot_id() != pod_ip_agent, "runs after the reboot test, on the rebooted node"
    wait_for_agent(node.box)
    for index, row in enumerate(node.rows):
        assert_pod_address_assigned_and_released(
            node, PodAttachment(row, f"after-reboot-{index}", pod_address(row, 1))
        )


def test_a_nic_no_link_file_matches_keeps_udevs_path_name_and_leaves_when_unplugged(
    multus_node: MultusNode,
) -> None:
    """The contrast to the Multus ENIs: a NIC that none of the bootstrap's .link files matches is
    named by udev's default policy (its PCI path), and an unplugged NIC leaves udev and systemd."""
    box = multus_node.box
    mac = "02:6d:75:6c:74:02"
    nic = box.plug_nic(mac)
    wait_until(lambda: link_with_mac(box, mac), timeout=EVENT_TIMEOUT, what=f"{mac} in ip link")
    box.sh("udevadm settle")  # the kernel's ethN until udev has renamed it
    other = link_with_mac(box, mac)
    assert other is not None and other["ifname"].startswith("enp"), other
    properties = udev_properties(box, other["ifname"])
    assert properties["ID_NET_LINK_FILE"].endswith("/systemd/network/99-default.link")
    assert properties["ID_NET_DRIVER"] == "virtio_net"
    device = f"sys-subsystem-net-devices-{other['ifname']}.device"
    assert box.sh(f"systemctl is-active {device}").strip() == "active"
    box.unplug_nic(nic, timeout=EVENT_TIMEOUT)
    wait_until(lambda: link_with_mac(box, mac) is None, timeout=EVENT_TIMEOUT, what=f"{mac} gone")
    assert box.run(["systemctl", "is-active", device]).stdout.strip() == "inactive"
