"""multus-pod-ips: assigns each Multus pod address to its node's Multus ENI (see
docs/multus-pod-ips.md).

One DaemonSet pod per Multus node, on the host network so that IMDS answers it with hop limit 1
and its EC2 calls carry the node role (no pod network can reach IMDS, so application pods get
no AWS rights). Its init container installs the CNI plugin `multus-pod-ip` into the host's
/opt/cni/bin; Multus thick executes delegate plugins chrooted into the host's root filesystem,
so the plugin runs with the host's Python 3. The agent container serves the plugin over a unix
socket in the host's /run/multus-pod-ips and writes the readiness marker cleartaints waits for.
Both are standard-library Python shipped in a ConfigMap: no image needs building. Each node
pool with such networks gets its own DaemonSet, on its nodes only, whose configuration file
names only the interfaces that pool's nodes have (one code ConfigMap holds every pool's file).
ConfigMap keys cannot hold a "/", so each module of the multus_pod_ips package is one key (its
path with dots) that the code volume projects back to its path below /opt/multus-pod-ips.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import cdk8s
import cdk8s_plus_28 as kplus
from constructs import Construct

from charts.building_blocks import (
    node_critical,
    resources,
    roll_on_change,
    root_without_capabilities_security_context,
    select_pods,
)
from config.node_bootstrap_plan import READY_MARKER_DIR
from config.node_labels import (
    DEFAULT_NODE_POOL_NAME,
    KARPENTER_NODE_LABEL_KEY,
    KARPENTER_NODE_LABEL_VALUE,
    pool_object_name,
)
from multus_pod_ips import (
    AGENT_METRICS_PORT,
    AGENT_MODULE,
    AGENT_READY_MARKER,
    AGENT_RUN_DIR,
    AGENT_SOCKET,
    CNI_PLUGIN_SCRIPT,
    CNI_PLUGIN_TYPE,
    PACKAGE_DIR,
    shipped_modules,
)

_CODE_DIR = "/opt/multus-pod-ips"
_HOST_CNI_BIN = "/host/opt/cni/bin"
_HOST_ROOT = "/host"  # the host's /run/netns is visible below it
# The file every agent reads; the ConfigMap holds one per pool (PodIpsNodes.config_file).
_CONFIG_FILE = "config.json"
_PLUGIN_PATH = CNI_PLUGIN_SCRIPT.relative_to(PACKAGE_DIR.parent).as_posix()


@dataclass(frozen=True)
class PodIpsNodes:
    """One node pool's agents.
    interfaces: Multus master interface -> the address ranges pods get on it (the
    Whereabouts ranges, i.e. the CIDR reservations of that network's subnets), for the pool's
    networks whose mode runs the agent; the agent assigns and releases only addresses inside
    them.
    pool: the pool's name (its DaemonSet is multus-pod-ips, or multus-pod-ips-<pool> for a
    pool other than the default one; its file config.json, or config-<pool>.json).
    node_selector: labels of the pool's nodes.
    static_ranges: Multus master interface -> the blocks of fixed addresses inside those ranges
    (the subnets' static_range), which only the static NADs' pods may ask for.
    floating_addresses: Multus master interface -> the addresses of its static ranges that the
    agent moves to its node's ENI when a pod announces them (gratuitous ARP); the agent then
    needs CAP_NET_RAW for its packet socket.
    routed_ranges / route_tables: Multus master interface -> the network's pod_routed_ranges
    and the IDs of its subnets' route tables, where the agent routes a range a pod asks for to
    its node's ENI."""

    interfaces: Mapping[str, Sequence[str]]
    static_ranges: Mapping[str, Sequence[str]] = field(default_factory=dict)
    floating_addresses: Mapping[str, Sequence[str]] = field(default_factory=dict)
    routed_ranges: Mapping[str, Sequence[str]] = field(default_factory=dict)
    route_tables: Mapping[str, Sequence[str]] = field(default_factory=dict)
    pool: str = DEFAULT_NODE_POOL_NAME
    node_selector: Mapping[str, str] = field(
        default_factory=lambda: {KARPENTER_NODE_LABEL_KEY: KARPENTER_NODE_LABEL_VALUE}
    )

    @property
    def daemon_set_name(self) -> str:
        return pool_object_name("multus-pod-ips", self.pool)

    @property
    def config_file(self) -> str:
        return f"{pool_object_name('config', self.pool)}.json"


@dataclass(frozen=True)
class MultusPodIpsProps:
    """image: Amazon Linux 2023 (config images.multus_pod_ips): its python3 runs the agent.
    pools: one DaemonSet per node pool with a network whose pod addresses the agent assigns.
    reconcile_seconds: period of the comparison of each ENI with the node's pods."""

    image: str
    pools: Sequence[PodIpsNodes]
    namespace: str = "kube-system"
    reconcile_seconds: int = 60


def agent_config(props: MultusPodIpsProps, nodes: PodIpsNodes) -> dict[str, object]:
    """The agent's configuration file (multus_pod_ips.agent.config.AgentConfig) on one pool's
    nodes."""
    if not nodes.interfaces or any(not ranges for ranges in nodes.interfaces.values()):
        raise ValueError("interfaces: every Multus interface needs at least one address range")
    return {
        "socket_path": AGENT_SOCKET,
        "records_dir": f"{AGENT_RUN_DIR}/pods",
        "ready_marker": AGENT_READY_MARKER,
        "eni_state_dir": READY_MARKER_DIR,
        "netns_root": _HOST_ROOT,
        "interfaces": {name: list(ranges) for name, ranges in nodes.interfaces.items()},
        "static_ranges": {name: list(ranges) for name, ranges in nodes.static_ranges.items()},
        **(
            {"floating_addresses": {n: list(a) for n, a in nodes.floating_addresses.items()}}
            if nodes.floating_addresses
            else {}
        ),
        "reconcile_seconds": props.reconcile_seconds,
        "metrics_port": AGENT_METRICS_PORT,
        # Only with pod-routed ranges: the files of other pools, and so their hashes, stay as
        # they were.
        **(
            {
                "routed_ranges": {name: list(r) for name, r in nodes.routed_ranges.items()},
                "route_tables": {name: list(ids) for name, ids in nodes.route_tables.items()},
            }
            if nodes.routed_ranges
            else {}
        ),
    }


class MultusPodIpsChart(cdk8s.Chart):
    """ConfigMap with the agent, plugin and configuration, and the node agent DaemonSet."""

    def __init__(self, scope: Construct, construct_id: str, props: MultusPodIpsProps) -> None:
        super().__init__(scope, construct_id)
        code = kplus.ConfigMap(
            self,
            "code",
            metadata=cdk8s.ApiObjectMetadata(name="multus-pod-ips", namespace=props.namespace),
            data={
                **{
                    config_map_key(path): source.read_text(encoding="utf-8")
                    for path, source in shipped_modules().items()
                },
                **{
                    nodes.config_file: json.dumps(agent_config(props, nodes), indent=2)
                    for nodes in props.pools
                },
            },
        )
        for nodes in props.pools:
            _daemon_set(self, props, nodes, code)


def config_map_key(path: str) -> str:
    """The ConfigMap key of a file shipped at `path` below the code directory."""
    return path.replace("/", ".")


def _daemon_set(
    scope: Construct, props: MultusPodIpsProps, nodes: PodIpsNodes, code: kplus.ConfigMap
) -> None:
    name = nodes.daemon_set_name
    daemon_set = kplus.DaemonSet(
        scope,
        pool_object_name("daemon-set", nodes.pool),
        metadata=cdk8s.ApiObjectMetadata(name=name, namespace=props.namespace),
        select=False,
        # It talks to IMDS and EC2 only, never to the Kubernetes API.
        automount_service_account_token=False,
        host_network=True,
        # The node's resolver: it only needs the EC2 endpoint, never cluster DNS.
        dns=kplus.PodDnsProps(policy=kplus.DnsPolicy.DEFAULT),
        security_context=kplus.PodSecurityContextProps(ensure_non_root=False),
        termination_grace_period=cdk8s.Duration.seconds(10),
    )
    select_pods(daemon_set, {"app": name})
    if nodes.node_selector:
        daemon_set.scheduling.attract(
            kplus.Node.labeled(
                *(
                    kplus.NodeLabelQuery.is_(key, value)
                    for key, value in nodes.node_selector.items()
                )
            )
        )
    # Must run before the startup taint goes (cleartaints waits for it) and on any node that
    # may host Multus pods, whatever else it is tainted with.
    daemon_set.scheduling.tolerate(kplus.Node.tainted(kplus.NodeTaintQuery.any()))
    node_critical(daemon_set)

    # Each pool's agent sees its own file as config.json.
    code_volume = kplus.Volume.from_config_map(
        daemon_set,
        "code-volume",
        code,
        name="code",
        default_mode=0o644,
        items={
            **{config_map_key(path): kplus.PathMapping(path=path) for path in shipped_modules()},
            nodes.config_file: kplus.PathMapping(path=_CONFIG_FILE),
        },
    )
    cni_bin = kplus.Volume.from_host_path(
        daemon_set,
        "cni-bin-volume",
        "cni-bin",
        path="/opt/cni/bin",
        type=kplus.HostPathVolumeType.DIRECTORY_OR_CREATE,
    )
    # Atomic install: the runtime may exec the plugin at any moment.
    install = (
        f"install -m 0755 {_CODE_DIR}/{_PLUGIN_PATH} {_HOST_CNI_BIN}/.{CNI_PLUGIN_TYPE}.new && "
        f"mv -f {_HOST_CNI_BIN}/.{CNI_PLUGIN_TYPE}.new {_HOST_CNI_BIN}/{CNI_PLUGIN_TYPE}"
    )
    daemon_set.add_init_container(
        name="install-cni-plugin",
        image=props.image,
        image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
        command=["/bin/sh", "-c", install],
        resources=resources(
            cpu_millis=10, cpu_limit_millis=100, memory_mib=16, memory_limit_mib=64
        ),
        security_context=root_without_capabilities_security_context(),
        volume_mounts=[
            kplus.VolumeMount(path=_CODE_DIR, volume=code_volume, read_only=True),
            kplus.VolumeMount(path=_HOST_CNI_BIN, volume=cni_bin),
        ],
    )
    agent = daemon_set.add_container(
        name="agent",
        image=props.image,
        image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
        # -m puts the working directory, the shipped tree, on sys.path.
        command=["python3", "-m", AGENT_MODULE, f"{_CODE_DIR}/{_CONFIG_FILE}"],
        working_dir=_CODE_DIR,
        resources=resources(
            cpu_millis=50, cpu_limit_millis=200, memory_mib=64, memory_limit_mib=128
        ),
        security_context=_agent_security_context(nodes),
        readiness=kplus.Probe.from_command(["test", "-f", AGENT_READY_MARKER]),
        # Host network: the pod's port is the node's (docs/multus-pod-ips.md, "Metrics").
        ports=[
            kplus.ContainerPort(
                number=AGENT_METRICS_PORT, name="metrics", protocol=kplus.Protocol.TCP
            )
        ],
    )
    agent.mount(_CODE_DIR, code_volume, read_only=True)
    # A new agent, plugin or pool configuration reaches running nodes only through a rollout.
    roll_on_change(daemon_set, code, [*map(config_map_key, shipped_modules()), nodes.config_file])
    for volume_name, host_path, mount_path, read_only in (
        ("run", AGENT_RUN_DIR, AGENT_RUN_DIR, False),
        ("eni-state", READY_MARKER_DIR, READY_MARKER_DIR, True),
        ("netns", "/run/netns", f"{_HOST_ROOT}/run/netns", True),
    ):
        volume = kplus.Volume.from_host_path(
            daemon_set,
            f"{volume_name}-volume",
            volume_name,
            path=host_path,
            type=kplus.HostPathVolumeType.DIRECTORY_OR_CREATE,
        )
        agent.mount(
            mount_path,
            volume,
            read_only=read_only,
            propagation=kplus.MountPropagation.HOST_TO_CONTAINER
            if volume_name == "netns"
            else None,
        )


def _agent_security_context(nodes: PodIpsNodes) -> kplus.ContainerSecurityContextProps:
    """Without capabilities; with CAP_NET_RAW alone where the agent watches for floating
    addresses, which its packet socket needs (Linux net/packet/af_packet.c, packet_create)."""
    return root_without_capabilities_security_context(
        add=[kplus.Capability.NET_RAW] if nodes.floating_addresses else []
    )
