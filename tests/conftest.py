"""Session-wide fixtures: the default app is synthesized once, with cdk-nag attached."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import pytest
from xdist.scheduler import LoadScopeScheduling

if TYPE_CHECKING:
    # The CDK app, cdk-nag and aws_cdk's assertions cost seconds to import: they load where a
    # synth needs them, so a test that synthesizes nothing starts in about a second.
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from stages.environment_stage import EnvironmentStage

REPO = Path(__file__).resolve().parents[1]


def cdk_json_context(**overrides: Any) -> dict[str, Any]:
    """cdk.json's context (feature flags + config), as `cdk synth` hands it to the app."""
    context: dict[str, Any] = json.loads((REPO / "cdk.json").read_text())["context"]
    return {**context, **overrides}


@dataclass(frozen=True)
class SynthesizedApp:
    """A synthesized app. Synth fails when a validation plugin (cdk-nag) reports an error, but
    templates are on disk by then, so assertions still run and the nag test shows the report."""

    stage: EnvironmentStage
    outdir: Path
    synth_error: str | None

    def template_json(self, stack: cdk.Stack) -> dict[str, Any]:
        path = Path(self.stage.outdir) / stack.template_file
        return dict(json.loads(path.read_text()))

    def template(self, stack: cdk.Stack) -> Template:
        from aws_cdk.assertions import Template

        return Template.from_json(self.template_json(stack))

    def templates_by_stack_name(self) -> dict[str, dict[str, Any]]:
        """The network and cluster templates, by their stacks' names."""
        return {
            stack.stack_name: self.template_json(stack)
            for stack in (self.stage.network, self.stage.cluster)
        }

    def template_paths(self) -> list[Path]:
        return sorted(Path(self.stage.outdir).glob("*.template.json"))

    def validation_report(self) -> dict[str, Any]:
        return dict(json.loads((self.outdir / "validation-report.json").read_text()))


def synthesize_with_nag(outdir: Path, context: dict[str, Any]) -> tuple[cdk.App, str | None]:
    """Build the real app (app.build_app) and synthesize it with cdk-nag AwsSolutions attached.

    Returns the app and the validation failure, if any (templates are written before it)."""
    import aws_cdk as cdk
    from cdk_nag import AwsSolutionsChecks

    from app import build_app

    app = cdk.App(outdir=str(outdir), context=context)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    build_app(app)
    try:
        app.synth()
    except RuntimeError as error:
        if "ValidationFailed" not in str(error):
            raise
        return app, str(error)
    return app, None


def open_nag_findings(report: dict[str, Any]) -> list[str]:
    return [
        f"{violation['ruleName']} at {construct['constructPath']}"
        for plugin in report["pluginReports"]
        if plugin["pluginName"] == "AwsSolutions"
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
    ]


def synthesize(outdir: Path, context: dict[str, Any]) -> SynthesizedApp:
    from stages.environment_stage import EnvironmentStage

    app, synth_error = synthesize_with_nag(outdir, context)
    stage = next(child for child in app.node.children if isinstance(child, EnvironmentStage))
    return SynthesizedApp(stage=stage, outdir=outdir, synth_error=synth_error)


def synthesize_config(directory: Path, config: dict[str, Any]) -> SynthesizedApp:
    """An app of `config` (written as a config file, as an operator would keep it)."""
    directory.mkdir(parents=True, exist_ok=True)
    config_file = directory / "config.json"
    config_file.write_text(json.dumps(config))
    return synthesize(directory / "cdk.out", cdk_json_context(config_file=str(config_file)))


@pytest.fixture(scope="session")
def default_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    return synthesize(tmp_path_factory.mktemp("cdk.out"), cdk_json_context())


THREE_BY_THREE = "examples/three-az-three-networks.json"
FIVE_G_CORE = "examples/5g-core.json"
EXISTING_VPC = "examples/existing-vpc.json"
PIPELINE_SAMPLE = "examples/pipeline-three-environments.json"
DUAL_STACK = "examples/dual-stack.json"


@pytest.fixture(scope="session")
def three_by_three_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    """The 3 AZ x 3 network example, with both optional charts on."""
    return synthesize(
        tmp_path_factory.mktemp("three-by-three"),
        cdk_json_context(
            config_file=THREE_BY_THREE,
            **{"config.extras.sample_workloads": "true", "config.extras.node_latency": "true"},
        ),
    )


@pytest.fixture(scope="session")
def five_g_core_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    """examples/5g-core.json: two node pools, upf (n3 + n6, tainted) and control (n2), rules of
    their own on n2 (SCTP) and n3 (GTP-U), and a static range on n3 in each zone."""
    return synthesize(tmp_path_factory.mktemp("5g-core"), cdk_json_context(config_file=FIVE_G_CORE))


@pytest.fixture(scope="session")
def existing_vpc_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    """examples/existing-vpc.json: the 5G networks n2/n3/n6 in a VPC the network team owns
    (given by IDs and CIDRs, with NAT gateways per AZ; only n6 routes to them)."""
    return synthesize(
        tmp_path_factory.mktemp("existing-vpc"), cdk_json_context(config_file=EXISTING_VPC)
    )


@pytest.fixture(scope="session")
def dual_stack_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    """examples/dual-stack.json: the seed's networks with multus2 dual-stack (vpc.ipv6)."""
    return synthesize(
        tmp_path_factory.mktemp("dual-stack"), cdk_json_context(config_file=DUAL_STACK)
    )


NODE_PREFIX = "examples/node-prefix.json"


@pytest.fixture(scope="session")
def node_prefix_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    """examples/node-prefix.json: one network per IP management mode."""
    return synthesize(
        tmp_path_factory.mktemp("node-prefix"), cdk_json_context(config_file=NODE_PREFIX)
    )


HOST_DEVICE = "examples/host-device.json"


@pytest.fixture(scope="session")
def host_device_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    """examples/host-device.json: a UPF pool whose N6 network gives each pod a whole ENI."""
    return synthesize(
        tmp_path_factory.mktemp("host-device"), cdk_json_context(config_file=HOST_DEVICE)
    )


RAN = "10.100.0.0/16"


def _n2_n3_subnets(third_octet: int) -> list[dict[str, str]]:
    return [
        {"cidr": f"10.0.{octet}.0/24", "reservation": f"10.0.{octet}.32/27"}
        for octet in (third_octet, third_octet + 1)
    ]


#: An N2/N3 layout with a rule of each kind (docs/network.md): SCTP (N2, whole protocol: EC2
#: filters no SCTP ports) from the RAN, GTP-U (UDP 2152) from the RAN and among the network's
#: own ENIs, TCP from the other network's ENIs, egress limited to the RAN.
PER_NETWORK_RULES: dict[str, Any] = {
    "multus": {
        "networks": [
            {
                "name": "n2",
                "subnets": _n2_n3_subnets(4),
                "security_group": {
                    "ingress": [
                        {"protocol": "sctp", "cidr": RAN, "description": "N2 from the RAN"}
                    ],
                    "egress": [{"protocol": 132, "cidr": RAN}],
                },
            },
            {
                "name": "n3",
                "subnets": _n2_n3_subnets(6),
                "security_group": {
                    "ingress": [
                        {"protocol": "udp", "ports": 2152, "cidr": RAN},
                        {"protocol": "udp", "ports": "2152", "network": "n3"},
                        {"protocol": "tcp", "ports": "30000-32767", "network": "n2"},
                    ],
                    "egress": [
                        {"protocol": "udp", "ports": 2152, "cidr": RAN},
                        {"protocol": "udp", "ports": 2152, "network": "n3"},
                    ],
                },
            },
        ]
    }
}


@pytest.fixture(scope="session")
def per_network_rules_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    """PER_NETWORK_RULES: one security group per network, with rules between the groups."""
    return synthesize(
        tmp_path_factory.mktemp("per-network-rules"), cdk_json_context(config=PER_NETWORK_RULES)
    )


#: Beyond the VPC: the RAN's gNBs (N3), a site behind a VPN, an appliance, the internet's
#: documentation range through NAT.
TRANSIT_GATEWAY, VPN_GATEWAY, APPLIANCE = (
    "tgw-0123456789abcdef0",
    "vgw-0123456789abcdef0",
    "eni-0123456789abcdef0",
)
ROUTED_NETWORK_ROUTES: list[dict[str, Any]] = [
    {"destination": "10.200.0.0/16", "transit_gateway_id": TRANSIT_GATEWAY, "description": "RAN"},
    {"destination": "10.201.0.0/16", "vpn_gateway_id": VPN_GATEWAY},
    {"destination": "10.202.0.0/24", "network_interface_id": APPLIANCE},
    {"destination": "198.51.100.0/24", "nat_gateway": True},
]
#: The seed's networks, multus1 with a route to each kind of target and a static range in its
#: first subnet (so that AZ has two NADs); multus2 routes nothing.
ROUTES: dict[str, Any] = {
    "multus": {
        "networks": [
            {
                "name": "multus1",
                "subnets": [
                    {
                        "cidr": "10.0.4.0/24",
                        "reservation": "10.0.4.32/27",
                        "static_range": "10.0.4.48/28",
                    },
                    {"cidr": "10.0.5.0/24", "reservation": "10.0.5.32/27"},
                ],
                "routes": ROUTED_NETWORK_ROUTES,
            },
            {
                "name": "multus2",
                "subnets": [
                    {"cidr": "10.0.6.0/24", "reservation": "10.0.6.32/27"},
                    {"cidr": "10.0.7.0/24", "reservation": "10.0.7.32/27"},
                ],
            },
        ]
    }
}


@pytest.fixture(scope="session")
def routes_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    """ROUTES: a network with routes to a transit gateway, a virtual private gateway, a network
    interface and the AZ's NAT gateway, beside one without routes."""
    return synthesize(tmp_path_factory.mktemp("routes"), cdk_json_context(config=ROUTES))


#: Every session fixture of a synthesized direct-deploy app: the default, each example but the
#: pipeline's, and the feature configs above. Tests that hold for every app iterate over it.
APP_FIXTURES = (
    "default_app",
    "three_by_three_app",
    "five_g_core_app",
    "existing_vpc_app",
    "dual_stack_app",
    "node_prefix_app",
    "host_device_app",
    "routes_app",
    "per_network_rules_app",
)


#: The fixtures of apps other than the default: their tests carry the `examples` marker, which
#: `make test-fast` leaves out (one shared app in the inner loop); `make test` runs them.
EXAMPLE_APP_FIXTURES = frozenset(APP_FIXTURES) - {"default_app"} | {"pipeline_synth"}


#: Tiers whose tests share one costly thing per pytest process (the data-plane tier's VM, the
#: node box's image and boots, the cluster box's control plane): on pytest-xdist's workers
#: (`make test` runs two) each tier runs whole on one worker, and first: the VMs are the longest
#: units of work, so they start while the other worker runs everything else.
SHARED_STATE_TIERS = ("dataplane", "node_box", "cluster_box", "karpenter_box", "deploy_box")
#: The tiers that run a TCG VM for minutes go to one worker, one after the other: beside the
#: other worker's tests, two such VMs starve each other on 2 cores (a clean-clone run with both
#: at once lost 5 data-plane tests to the agent's "no answer from EC2 in time").
VM_TIERS = ("dataplane", "node_box")


def shared_state_tier(nodeid: str) -> str | None:
    parts = PurePosixPath(nodeid.split("::", 1)[0]).parts
    if len(parts) > 2 and parts[0] == "tests" and parts[1] in SHARED_STATE_TIERS:
        return parts[1]
    return None


class TierScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no types
    """pytest-xdist's loadscope: a shared-state tier is one unit of work (the VM_TIERS together
    one), any other test module one unit (its module fixtures are set up once), sent in
    collection order. Not loadgroup:
    it names the group in the item's node ID, which pytest 9.2 no longer lets a plugin change
    (xdist 3.8.0 sets `_nodeid`; pytest's `nodeid` reads `_id`), so its groups split."""

    def _split_scope(self, nodeid: str) -> str:
        tier = shared_state_tier(nodeid)
        if tier in VM_TIERS:
            return "+".join(VM_TIERS)
        return tier or nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> TierScheduling | None:
    if config.getoption("dist") != "load":  # the default of -n; another --dist is honoured
        return None
    config.option.loadscopereorder = False  # keep pytest_collection_modifyitems' order
    return TierScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks each test that uses an example app, by fixture or as a parameter naming one, and
    puts the shared-state tiers first, in SHARED_STATE_TIERS' order (a stable sort: within a
    tier, collection order)."""
    order = {tier: index for index, tier in enumerate(SHARED_STATE_TIERS)}
    items.sort(key=lambda item: order.get(shared_state_tier(item.nodeid) or "", len(order)))
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        named = {value for value in params.values() if isinstance(value, str)}
        if (set(getattr(item, "fixturenames", ())) | named) & EXAMPLE_APP_FIXTURES:
            item.add_marker(pytest.mark.examples)


@dataclass(frozen=True)
class SynthesizedPipeline:
    """A synthesized pipeline app, with the cdk-nag validation failure if any."""

    app: cdk.App
    outdir: Path
    synth_error: str | None


@pytest.fixture(scope="session")
def pipeline_synth(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedPipeline:
    """The sample three-environment pipeline, synthesized with cdk-nag."""
    outdir = tmp_path_factory.mktemp("pipeline.out")
    app, synth_error = synthesize_with_nag(outdir, cdk_json_context(config_file=PIPELINE_SAMPLE))
    return SynthesizedPipeline(app, outdir, synth_error)


def skipped_tiers(reports: list[pytest.TestReport]) -> dict[str, tuple[int, str]]:
    """Per tier (the test directory below tests/, e.g. dataplane, cluster_box), how many of its
    tests skipped and the first reason: what a run without that tier's tools did not check."""
    tiers: dict[str, tuple[int, str]] = {}
    for report in reports:
        path = Path(report.location[0])
        parts = path.parts[1:] if path.parts and path.parts[0] == "tests" else path.parts
        tier = "/".join(parts[:2]) if parts and parts[0] in ("unit", "integration") else parts[0]
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        count, first = tiers.get(tier, (0, reason.removeprefix("Skipped: ")))
        tiers[tier] = (count + 1, first)
    return tiers


#: The markers of the unit tier that `make test-fast` leaves out: their cost is shown apart.
SLOW_UNIT_MARKERS = ("examples", "integration")


def timing_tier(report: pytest.TestReport) -> str:
    """The test directory below tests/ (unit, integration, cluster_box, dataplane, node_box);
    a unit test with a marker the fast loop leaves out is counted under that marker."""
    path = Path(report.location[0])
    parts = path.parts[1:] if path.parts and path.parts[0] == "tests" else path.parts
    tier = parts[0] if len(parts) > 1 else "tests"
    if tier == "unit":
        marker = next((name for name in SLOW_UNIT_MARKERS if name in report.keywords), None)
        return f"unit ({marker})" if marker else tier
    return tier


def tier_times(reports: list[Any]) -> dict[str, tuple[int, float]]:
    """Per tier, how many tests ran (their call phase or a setup that skipped or failed) and
    the seconds of their set-up, call and teardown summed: what each tier costs a run."""
    tiers: dict[str, tuple[int, float]] = {}
    for report in reports:
        if not isinstance(report, pytest.TestReport):
            continue
        tier = timing_tier(report)
        count, seconds = tiers.get(tier, (0, 0.0))
        ran = report.when == "call" or (report.when == "setup" and not report.passed)
        tiers[tier] = (count + ran, seconds + report.duration)
    return tiers


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Each tier's cost (so that a new tier shows what it adds to the budget, docs/testing.md),
    then, last, any tier that skipped, so a run without it cannot pass for a complete one."""
    every_report = [report for reports in terminalreporter.stats.values() for report in reports]
    times = tier_times(every_report)
    if times:
        terminalreporter.section("time per tier (test seconds, summed over workers)", sep="=")
        for tier, (count, seconds) in sorted(times.items(), key=lambda item: -item[1][1]):
            terminalreporter.line(f"{tier:<20} {count:>5} tests {seconds:>8.1f} s")
    tiers = skipped_tiers(terminalreporter.stats.get("skipped", []))
    if not tiers:
        return
    terminalreporter.section("tiers that did not run", sep="=", yellow=True)
    for tier, (count, reason) in sorted(tiers.items()):
        terminalreporter.line(f"{tier}: {count} test(s) skipped: {reason}")
