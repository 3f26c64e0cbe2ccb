"""The node box tier: real nodes under QEMU (testing_support/node_box), booted from an image
built once per set of inputs and cached outside the clone.

`node_image` builds or finds the image for the session (each box boots from it through an
overlay of its own: nothing of another box's boots is seen).
Without the box's prerequisites (root and debootstrap to build, qemu-system-x86, qemu-utils and
genisoimage to boot: `make dataplane-tools`) the tests skip and say which, except under CI=true,
where they fail. The run ends with the image's build time, each boot's and the tier's.

`emulator` is the session's EC2 and IMDS (testing_support/multus_emulator.py); `multus_node` is
the session's one node of the default app's Multus pool (with a node profile: BOX_NODE_PROFILE),
booted once with the product's real user-data on that emulator (testing_support/node_box/aws.py),
shared by the modules that only read it or put it back as they found it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from config import AppConfig, parse_config
from config.model import NodePoolConfig
from config.network_plan import NetworkPlanRow, networks_in_order
from testing_support.multus_emulator import (
    AVAILABILITY_ZONES,
    Ec2Emulator,
    PlannedVpc,
    running_emulator,
)
from testing_support.node_box import NodeBox, NodeImage, Unavailable, build_image, karpenter
from testing_support.node_box.aws import AwsNode
from tests.helpers import unavailable_here


@dataclass
class _Timings:
    """What the run's summary reports: the image's build, each test's boots, the tier's time."""

    image: str = ""
    boots: list[tuple[str, list[float]]] = field(default_factory=list)
    tier_seconds: float = 0.0


_TIMINGS = _Timings()


def record_boots(name: str, seconds: list[float]) -> None:
    """Adds a box's boots to the run's summary."""
    _TIMINGS.boots.append((name, seconds))


@pytest.fixture(scope="session")
def node_image() -> NodeImage:
    try:
        image = build_image()
    except Unavailable as error:
        unavailable_here(f"the node box cannot run here: {error}")
    built = image.built_seconds
    _TIMINGS.image = f"built in {built:.0f} s" if built is not None else "cached"
    _TIMINGS.image += f" ({image.directory})"
    return image


@pytest.fixture(scope="session")
def emulator() -> Iterator[Ec2Emulator]:
    with running_emulator() as started:
        yield started


#: The zone the session's node is in (its Multus subnets are that zone's).
AZ = AVAILABILITY_ZONES[0]


@dataclass
class MultusNode:
    """A node of a pool, booted with the pool's user-data (Karpenter's form: the EC2NodeClass's
    userData as the product renders it, then Karpenter's NodeConfig) on the emulator."""

    node: AwsNode
    config: AppConfig
    pool: NodePoolConfig
    planned: PlannedVpc
    #: The pool's networks in the node's zone, in device-index order.
    rows: list[NetworkPlanRow]
    #: What the EC2NodeClass's userData holds (node_bootstrap.render_user_data's document).
    product_user_data: str

    @property
    def box(self) -> NodeBox:
        return self.node.box

    @property
    def instance_id(self) -> str:
        return self.node.instance_id

    def eni_at(self, device_index: int) -> dict[str, Any]:
        """The instance's ENI attached at `device_index`, as EC2 (moto) shows it."""
        (eni,) = [
            eni
            for eni in self.node.emulator.instance_enis(self.instance_id)
            if eni.get("Attachment", {}).get("DeviceIndex") == device_index
        ]
        return eni


def default_config() -> AppConfig:
    """The default app's config (cdk.json's context sets none)."""
    return parse_config({})


#: A network function's node profile (docs/network-functions.md) sized for the box (1 GiB,
#: BOX_CPUS vCPUs): the session's node carries it, so its first boot and its reboot show it on a
#: node. One CPU reserved by count, the bootstrap's list of it, interrupts kept there.
BOX_NODE_PROFILE = {
    "cpu_manager": "static",
    "reserved_cpus": 1,
    "irqs_on_reserved_cpus": True,
    "memory_manager": "static",
    "hugepages_2mi": 64,
    "sysctls": {
        "net.core.rmem_max": 8388608,
        "net.netfilter.nf_conntrack_max": 262144,
        "net.netfilter.nf_conntrack_udp_timeout_stream": 240,
    },
}


#: Two vCPUs (QEMU: one socket of two single-threaded cores), so a reserved CPU leaves one
#: that irqbalance is banned from.
BOX_CPUS = 2


def profiled_config() -> AppConfig:
    """The default app with BOX_NODE_PROFILE on its pool."""
    (pool,) = default_config().node_pools
    raw_pool = pool.model_dump(mode="json", exclude_defaults=True)
    return parse_config({"node_pools": [{**raw_pool, "node_profile": BOX_NODE_PROFILE}]})


def pool_user_data(config: AppConfig, pool: NodePoolConfig, product_user_data: str) -> str:
    """The pool's user-data as Karpenter hands it to a node (testing_support/node_box/karpenter.py):
    the product's parts, then the NodeConfig with the labels and taints of the pool's NodePool."""
    from stacks.cluster_props import node_pool_props  # imports aws_cdk: only when needed

    props = node_pool_props(config, pool, node_role_name="node-role", user_data=None)
    taints = [taint.as_dict() for taint in props.taints]
    if props.startup_taint is not None:
        taints.append(props.startup_taint.as_dict())
    labels = {**props.node_labels, **props.labels, karpenter.NODEPOOL_LABEL: pool.name}
    node_config = karpenter.node_config(
        karpenter.ClusterDetails(config.cluster_name), labels=labels, taints=taints
    )
    return karpenter.user_data(node_config, product_user_data)


@pytest.fixture(scope="session")
def multus_node(
    node_image: NodeImage, emulator: Ec2Emulator, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MultusNode]:
    config = profiled_config()
    (pool,) = config.node_pools  # the default app has one pool, with every network
    planned = emulator.create_config_vpc(config)
    plan = config.pool_plan(pool)
    rows = [row for row in networks_in_order(plan) if row.availability_zone == AZ]
    product_user_data = planned.user_data(config.cluster_name, plan, pool.planned_node_profile())
    instance_id = emulator.launch_instance(planned.vpc, AZ, config.cluster_name)
    node = AwsNode(
        node_image,
        tmp_path_factory.mktemp("multus-node"),
        emulator,
        instance_id,
        pool_user_data(config, pool, product_user_data),
        cpus=BOX_CPUS,
    )
    try:
        try:
            node.start()
        except Unavailable as error:
            unavailable_here(f"the node box cannot run here: {error}")
        node.box.wait_until_booted()
        yield MultusNode(node, config, pool, planned, rows, product_user_data)
    finally:
        node.stop()
        record_boots("multus_node (session)", node.box.boots.seconds)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sums the tier's own time (setup, call and teardown of its tests, the image included)."""
    if report.nodeid.startswith("tests/node_box/"):
        _TIMINGS.tier_seconds += report.duration


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _TIMINGS.image:
        return
    terminalreporter.section("node box timings", sep="-")
    terminalreporter.line(f"image: {_TIMINGS.image}")
    for name, seconds in _TIMINGS.boots:
        boots = ", ".join(f"{value:.1f} s" for value in seconds)
        terminalreporter.line(f"boots of {name}: {boots}")
    terminalreporter.line(
        f"tier (setup, call and teardown of its tests): {_TIMINGS.tier_seconds:.0f} s"
    )
