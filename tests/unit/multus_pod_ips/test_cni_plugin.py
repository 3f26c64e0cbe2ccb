"""The CNI plugin against the CNI spec (https://www.cni.dev/docs/spec/), with a stand-in agent
on a unix socket that records requests and answers as told."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from multus_pod_ips import AGENT_SOCKET, CNI_PLUGIN_SCRIPT, CNI_PLUGIN_TYPE, cni_plugin
from multus_pod_ips.cni_plugin import SUPPORTED_VERSIONS, main
from testing_support.cni_chain import StandInAgent

PREV_RESULT = {
    "cniVersion": "0.3.1",
    "interfaces": [
        {"name": "net1", "mac": "02:00:00:00:00:01", "sandbox": "/var/run/netns/cni-1"},
        {"name": "net2", "sandbox": "/var/run/netns/cni-1"},
    ],
    "ips": [
        {"version": "4", "address": "10.0.4.40/24", "gateway": "10.0.4.1", "interface": 0},
        {"version": "6", "address": "2600:1f14::40/64", "interface": 0},
        {"version": "4", "address": "10.0.6.40/24", "interface": 1},
    ],
    "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.4.1"}],
    "dns": {"nameservers": ["10.0.0.2"]},
}
ENV = {
    "CNI_CONTAINERID": "c0ffee",
    "CNI_NETNS": "/var/run/netns/cni-1",
    "CNI_IFNAME": "net1",
    "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=ran;K8S_POD_NAME=upf-0",
    "CNI_PATH": "/opt/cni/bin",
}


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[StandInAgent]:
    started = StandInAgent(tmp_path / "agent.sock")
    yield started
    started.close()


def network(agent_socket: Path, **extra: Any) -> str:
    config = {
        "cniVersion": "0.3.1",
        "name": "multus1-us-west-2a",
        "type": "multus-pod-ip",
        "master": "multus1",
        "agentSocket": str(agent_socket),
        **extra,
    }
    return json.dumps(config)


def run(command: str, stdin: str, **env: str) -> tuple[int, Any]:
    status, output = main(stdin, {**ENV, "CNI_COMMAND": command, **env})
    return status, json.loads(output) if output else None


def test_add_passes_prev_result_through_after_the_agent_assigned_the_address(
    agent: StandInAgent,
) -> None:
    status, result = run("ADD", network(agent.path, prevResult=PREV_RESULT))

    assert status == 0
    assert result == PREV_RESULT
    (request,) = agent.requests
    assert request == {
        "command": "ADD",
        "container_id": "c0ffee",
        "ifname": "net1",
        "netns": "/var/run/netns/cni-1",
        "interface": "multus1",
        "pod": "ran/upf-0",
        "ips": ["10.0.4.40", "2600:1f14::40"],  # both families of net1, not net2's
        "fixed": False,  # a Whereabouts NAD's address: the agent may move it with its pod
    }


@pytest.mark.parametrize(("setting", "fixed"), [({"fixedAddresses": True}, True), ({}, False)])
def test_a_static_nads_request_tells_the_agent_its_addresses_are_fixed(
    agent: StandInAgent, setting: dict[str, bool], fixed: bool
) -> None:
    status, _ = run("ADD", network(agent.path, prevResult=PREV_RESULT, **setting))

    assert status == 0
    assert [request["fixed"] for request in agent.requests] == [fixed]


def test_add_result_carries_the_configurations_cni_version(agent: StandInAgent) -> None:
    status, result = run(
        "ADD",
        network(agent.path, cniVersion="1.0.0", prevResult={**PREV_RESULT, "cniVersion": "1.0.0"}),
    )
    assert status == 0
    assert result["cniVersion"] == "1.0.0"


def test_add_without_prev_result_is_a_configuration_error(agent: StandInAgent) -> None:
    status, error = run("ADD", network(agent.path))

    assert status == 1
    assert error["code"] == 7
    assert "chained after ipvlan" in error["msg"]
    assert error["cniVersion"] == "0.3.1"
    assert agent.requests == []


def test_agent_refusal_becomes_a_cni_error_with_its_code_and_message(agent: StandInAgent) -> None:
    agent.reply = {"ok": False, "code": 101, "msg": "ENI eni-1 already holds 10 of the 10"}

    status, error = run("ADD", network(agent.path, prevResult=PREV_RESULT))

    assert status == 1
    assert error == {
        "cniVersion": "0.3.1",
        "code": 101,
        "msg": "ENI eni-1 already holds 10 of the 10",
    }


def test_add_fails_with_try_again_later_when_no_agent_listens(tmp_path: Path) -> None:
    status, error = run("ADD", network(tmp_path / "absent.sock", prevResult=PREV_RESULT))

    assert status == 1
    assert error["code"] == 11
    assert "agent" in error["msg"] and error["details"]


def test_del_succeeds_without_an_agent_and_prints_nothing(tmp_path: Path) -> None:
    assert main(network(tmp_path / "absent.sock"), {**ENV, "CNI_COMMAND": "DEL"}) == (0, "")


def test_del_asks_the_agent_by_container_and_interface(agent: StandInAgent) -> None:
    status, output = run("DEL", network(agent.path))

    assert (status, output) == (0, None)
    (request,) = agent.requests
    assert (request["command"], request["container_id"], request["ifname"]) == (
        "DEL",
        "c0ffee",
        "net1",
    )


def test_check_reports_the_agents_verdict(agent: StandInAgent) -> None:
    assert run("CHECK", network(agent.path, prevResult=PREV_RESULT)) == (0, None)
    agent.reply = {"ok": False, "code": 102, "msg": "10.0.4.40 not assigned to eni-1"}

    status, error = run("CHECK", network(agent.path, prevResult=PREV_RESULT))

    assert status == 1
    assert (error["code"], error["msg"]) == (102, "10.0.4.40 not assigned to eni-1")
    assert [r["command"] for r in agent.requests] == ["CHECK", "CHECK"]


def test_version_lists_the_spec_versions_whose_commands_and_results_it_implements() -> None:
    # 0.3.0 introduced results with "ips" indexing into "interfaces" (0.1.0/0.2.0 have "ip4");
    # 1.1.0 adds GC and STATUS, which the plugin does not implement.
    status, output = main('{"cniVersion": "1.0.0"}', {"CNI_COMMAND": "VERSION"})

    assert status == 0
    version = json.loads(output)
    assert version["supportedVersions"] == ["0.3.0", "0.3.1", "0.4.0", "1.0.0"]
    assert version["cniVersion"] in SUPPORTED_VERSIONS


@pytest.mark.parametrize(
    ("stdin", "env", "code"),
    [
        ("{not json", {}, 6),
        (json.dumps({"cniVersion": "0.1.0", "master": "multus1"}), {}, 1),
        (json.dumps({"cniVersion": "0.2.0", "master": "multus1"}), {}, 1),
        (json.dumps({"cniVersion": "1.1.0", "master": "multus1"}), {}, 1),
        (json.dumps({"cniVersion": "1.0.0", "master": "multus1"}), {"CNI_COMMAND": "GC"}, 4),
        (json.dumps({"cniVersion": "0.3.1", "master": "multus1"}), {"CNI_COMMAND": "GC2"}, 4),
        (json.dumps({"cniVersion": "0.3.1", "master": "multus1"}), {"CNI_IFNAME": ""}, 4),
        (json.dumps({"cniVersion": "0.3.1", "prevResult": PREV_RESULT}), {}, 7),
        (json.dumps({"cniVersion": "0.3.1", "master": "", "prevResult": PREV_RESULT}), {}, 7),
        (json.dumps({"cniVersion": "0.3.1", "master": 1, "prevResult": PREV_RESULT}), {}, 7),
    ],
    ids=[
        "undecodable",
        "version-0.1.0",
        "version-0.2.0",
        "version-1.1.0",
        "gc",
        "unknown-command",
        "no-ifname",
        "no-master",
        "empty-master",
        "master-not-a-name",
    ],
)
def test_bad_input_is_a_cni_error_json(stdin: str, env: dict[str, str], code: int) -> None:
    status, output = main(stdin, {**ENV, "CNI_COMMAND": "ADD", **env})

    assert status == 1
    error = json.loads(output)
    assert error["code"] == code
    assert error["msg"]
    assert set(error) <= {"cniVersion", "code", "msg", "details"}


@pytest.mark.parametrize("version", ["0.3.0", "0.3.1", "0.4.0", "1.0.0"])
def test_add_accepts_every_version_with_indexed_results(agent: StandInAgent, version: str) -> None:
    previous = {**PREV_RESULT, "cniVersion": version}

    status, result = run("ADD", network(agent.path, cniVersion=version, prevResult=previous))

    assert (status, result) == (0, previous)
    assert agent.requests[0]["ips"] == ["10.0.4.40", "2600:1f14::40"]


def test_add_result_is_in_the_configurations_version_whatever_prev_result_says(
    agent: StandInAgent,
) -> None:
    # CNI spec: the result's cniVersion must be consistent with the network configuration's.
    previous = {**PREV_RESULT, "cniVersion": "0.3.0"}

    status, result = run("ADD", network(agent.path, cniVersion="0.4.0", prevResult=previous))

    assert status == 0
    assert result == {**previous, "cniVersion": "0.4.0"}


def test_only_addresses_of_the_container_interface_go_to_the_agent(agent: StandInAgent) -> None:
    previous = {
        **PREV_RESULT,
        "interfaces": [{"name": "multus1"}, {"name": "net1", "sandbox": "/var/run/netns/cni-1"}],
        "ips": [
            {"version": "4", "address": "10.0.4.5/24", "interface": 0},  # the host's
            {"version": "4", "address": "10.0.4.40/24", "interface": 1},
        ],
    }

    assert run("ADD", network(agent.path, prevResult=previous))[0] == 0
    assert agent.requests[0]["ips"] == ["10.0.4.40"]


@pytest.mark.parametrize("index", [None, -1, 2], ids=["no-index", "negative", "past-the-end"])
def test_an_address_without_a_valid_interface_index_is_taken_as_the_containers(
    agent: StandInAgent, index: int | None
) -> None:
    # "interface" is optional in a result's ips; an index outside "interfaces" names none.
    address: dict[str, Any] = {"version": "4", "address": "10.0.4.41/24"}
    if index is not None:
        address["interface"] = index
    previous = {**PREV_RESULT, "ips": [address]}  # interfaces: net1, net2

    status, _ = run("ADD", network(agent.path, prevResult=previous))

    assert status == 0
    assert agent.requests[0]["ips"] == ["10.0.4.41"]


def test_without_agent_socket_the_plugin_calls_the_socket_the_agent_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dialled: list[str] = []

    def connect(_: socket.socket, address: str) -> None:
        dialled.append(address)
        raise FileNotFoundError(address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    config = json.loads(network(Path("unused"), prevResult=PREV_RESULT))
    del config["agentSocket"]

    status, error = run("ADD", json.dumps(config))

    assert dialled == [AGENT_SOCKET]  # the chart's agent config: multus_pod_ips.AGENT_SOCKET
    assert (status, error["code"]) == (1, 11)


@pytest.mark.parametrize(
    "answer", [b"", b"<html>502</html>\n", b'{"ok": false}\n'], ids=["none", "garbage", "no-code"]
)
def test_an_agent_answer_without_a_verdict_is_an_io_failure(
    agent: StandInAgent, answer: bytes
) -> None:
    agent.raw_reply = answer

    status, error = run("ADD", network(agent.path, prevResult=PREV_RESULT))

    assert (status, error["code"]) == (1, 5)


def test_del_keeps_stdout_for_results_and_logs_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(network(tmp_path / "absent.sock"), {**ENV, "CNI_COMMAND": "DEL"}) == (0, "")

    printed = capsys.readouterr()
    assert printed.out == ""
    assert "reconcile" in printed.err


@pytest.mark.parametrize(
    ("command", "stdin", "status"),
    [("VERSION", '{"cniVersion": "1.0.0"}', 0), ("ADD", "{not json", 1)],
)
def test_the_installed_script_prints_its_result_and_exits_with_its_status(
    command: str, stdin: str, status: int
) -> None:
    done = subprocess.run(
        [sys.executable, str(CNI_PLUGIN_SCRIPT)],
        input=stdin,
        env={**os.environ, **ENV, "CNI_COMMAND": command},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )

    assert done.returncode == status
    assert json.loads(done.stdout)["cniVersion"] in SUPPORTED_VERSIONS


def test_the_installed_plugin_ignores_pythonpath_and_modules_beside_it(tmp_path: Path) -> None:
    # Multus runs the plugin from the host's /opt/cni/bin with its own environment: python3 -I
    # (isolated mode: no PYTHON* variables, no user site, not the script's directory) keeps a
    # module planted there or on PYTHONPATH from running as root in its place.
    installed = tmp_path / "bin" / CNI_PLUGIN_TYPE
    installed.parent.mkdir()
    installed.write_text(CNI_PLUGIN_SCRIPT.read_text())
    installed.chmod(0o755)
    planted = tmp_path / "planted"
    planted.mkdir()
    for directory in (planted, installed.parent):
        (directory / "json.py").write_text("raise SystemExit('planted json imported')\n")
    done = subprocess.run(
        [str(installed)],
        input='{"cniVersion": "1.0.0"}',
        env={**os.environ, **ENV, "CNI_COMMAND": "VERSION", "PYTHONPATH": str(planted)},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )

    assert "planted" not in done.stderr
    assert done.returncode == 0
    assert json.loads(done.stdout)["cniVersion"] in SUPPORTED_VERSIONS


@pytest.mark.parametrize(
    "subnet",
    ["10.0.5.0/24", "10.0.6.0/24", "10.0.4.0/33", "not-a-cidr", 24],
    ids=["other-subnet", "other-interfaces-subnet", "bad-prefix", "not-a-cidr", "not-a-string"],
)
def test_a_main_table_subnet_without_the_interfaces_address_is_a_configuration_error(
    agent: StandInAgent, subnet: Any
) -> None:
    # net1 holds 10.0.4.40 (10.0.6.40 is net2's): a route for another subnet with net1's
    # address as its source would not be on-link.
    status, error = run("ADD", network(agent.path, prevResult=PREV_RESULT, mainTableSubnet=subnet))

    assert (status, error["code"]) == (1, 7)
    assert "mainTableSubnet" in error["msg"]
    assert agent.requests == []


@pytest.mark.parametrize(
    "subnet",
    ["2600:1f14:0:1::/64", "10.0.4.0/24", "2600:1f14::/129"],
    ids=["other-subnet", "an-ipv4-subnet", "bad-prefix"],
)
def test_a_main_table_ipv6_subnet_without_the_interfaces_ipv6_address_is_refused(
    agent: StandInAgent, subnet: str
) -> None:
    # net1 holds 2600:1f14::40 of 2600:1f14::/64 (PREV_RESULT).
    config = network(agent.path, prevResult=PREV_RESULT, mainTableSubnetIpv6=subnet)

    status, error = run("ADD", config)

    assert (status, error["code"]) == (1, 7)
    assert "mainTableSubnetIpv6" in error["msg"]
    assert agent.requests == []


def test_an_ipv6_subnet_under_the_ipv4_key_is_refused(agent: StandInAgent) -> None:
    config = network(agent.path, prevResult=PREV_RESULT, mainTableSubnet="2600:1f14::/64")

    status, error = run("ADD", config)

    assert (status, error["code"]) == (1, 7)
    assert "is not an IPv4 CIDR" in error["msg"]


def test_the_ipv6_route_is_set_before_the_agent_is_asked(
    agent: StandInAgent, tmp_path: Path
) -> None:
    # net1's /64 holds its IPv6 address: the plugin goes on to the (missing) namespace.
    config = network(agent.path, prevResult=PREV_RESULT, mainTableSubnetIpv6="2600:1f14::/64")

    status, error = run("ADD", config, CNI_NETNS=str(tmp_path / "gone"))

    assert (status, error["code"]) == (1, 104)
    assert agent.requests == []


def test_the_route_is_set_before_the_agent_is_asked(agent: StandInAgent, tmp_path: Path) -> None:
    # The subnet holds net1's address, so the plugin goes on to the pod's namespace: here one
    # that does not exist, and the ADD fails before any EC2 change is requested.
    config = network(agent.path, prevResult=PREV_RESULT, mainTableSubnet="10.0.4.0/24")

    status, error = run("ADD", config, CNI_NETNS=str(tmp_path / "gone"))

    assert (status, error["code"]) == (1, 104)
    assert str(tmp_path / "gone") in error["msg"] and error["details"]
    assert agent.requests == []


def test_without_ip_on_the_host_the_add_fails_before_the_agent_is_asked(
    agent: StandInAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cni_plugin, "IP_COMMAND_DIRS", str(tmp_path))
    config = network(agent.path, prevResult=PREV_RESULT, mainTableSubnet="10.0.4.0/24")

    status, error = run("ADD", config)

    assert (status, error["code"]) == (1, 104)
    assert "iproute2" in error["msg"]
    assert agent.requests == []


def test_an_interface_without_ipv4_addresses_names_the_ones_it_has(agent: StandInAgent) -> None:
    net1_ipv6 = {"version": "6", "address": "2600:1f14::40/64", "interface": 0}
    previous = {**PREV_RESULT, "ips": [net1_ipv6]}  # no IPv4 address on net1
    config = network(agent.path, prevResult=previous, mainTableSubnet="10.0.4.0/24")

    status, error = run("ADD", config)

    assert (status, error["code"]) == (1, 7)
    assert "(addresses: 2600:1f14::40)" in error["msg"]


def test_a_netns_path_that_is_no_network_namespace_fails_the_add(
    agent: StandInAgent, tmp_path: Path
) -> None:
    # setns(2) refuses a file that is not a namespace; run as the runtime runs it: a process
    # of its own (the plugin enters the namespace in the child it starts for `ip`).
    not_a_namespace = tmp_path / "netns"
    not_a_namespace.write_text("")
    config = network(agent.path, prevResult=PREV_RESULT, mainTableSubnet="10.0.4.0/24")

    done = subprocess.run(
        [sys.executable, str(CNI_PLUGIN_SCRIPT)],
        input=config,
        env={**ENV, "CNI_COMMAND": "ADD", "CNI_NETNS": str(not_a_namespace), "PATH": "/usr/bin"},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )

    assert done.returncode == 1
    error = json.loads(done.stdout)
    assert error["code"] == 104 and str(not_a_namespace) in error["msg"], error
    assert agent.requests == []


@pytest.mark.parametrize(
    ("routes", "reason"),
    [
        ([{"dst": "10.200.0.0/16", "gw": "10.0.5.1"}], "outside its subnet 10.0.4.0/24"),
        ([{"dst": "10.200.0.0/33", "gw": "10.0.4.1"}], "needs a dst CIDR and a gw"),
        ([{"dst": "10.200.0.0/16"}], "needs a dst CIDR and a gw"),
        (["10.200.0.0/16"], "needs a dst CIDR and a gw"),
        ({"dst": "10.200.0.0/16", "gw": "10.0.4.1"}, "must be a list"),
        # An IPv6 route on a network without mainTableSubnetIpv6 (not dual-stack), and a
        # gateway of the other family: neither is set.
        ([{"dst": "2001:db8:45::/48", "gw": "2600:1f14::1"}], "IPv6 gw on mainTableSubnetIpv6"),
        ([{"dst": "10.200.0.0/16", "gw": "2600:1f14::1"}], "IPv4 gw on mainTableSubnet"),
    ],
    ids=[
        "gateway-off-the-subnet",
        "bad-destination",
        "no-gateway",
        "not-an-object",
        "not-a-list",
        "ipv6-without-its-subnet",
        "gateway-of-the-other-family",
    ],
)
def test_bad_main_table_routes_fail_before_any_route_or_agent_call(
    agent: StandInAgent, tmp_path: Path, routes: Any, reason: str
) -> None:
    # A namespace that does not exist: had the plugin set a route first, the error would be
    # ROUTE_FAILURE (104) instead of the configuration error.
    config = network(
        agent.path, prevResult=PREV_RESULT, mainTableSubnet="10.0.4.0/24", mainTableRoutes=routes
    )

    status, error = run("ADD", config, CNI_NETNS=str(tmp_path / "gone"))

    assert (status, error["code"]) == (1, 7)
    assert reason in error["msg"]
    assert agent.requests == []


def test_main_table_routes_need_the_subnet_their_gateways_are_on(agent: StandInAgent) -> None:
    routes = [{"dst": "10.200.0.0/16", "gw": "10.0.4.1"}]
    config = network(agent.path, prevResult=PREV_RESULT, mainTableRoutes=routes)

    status, error = run("ADD", config)

    assert (status, error["code"]) == (1, 7)
    assert "mainTableSubnet" in error["msg"]
    assert agent.requests == []


def test_the_ranges_a_pod_asks_for_in_cni_args_go_to_the_agent_with_the_add(
    agent: StandInAgent,
) -> None:
    # without podNetworkInterface the plugin leaves the pod's and the node's routing alone
    """Multus merges the pod's cni-args into each plugin's configuration as args.cni
    (multus-cni pkg/types/conf.go, injectCNIArgs)."""
    status, _ = run(
        "ADD",
        network(
            agent.path,
            prevResult=PREV_RESULT,
            podRoutedRanges=["10.45.0.0/16", "10.46.0.0/16"],
            args={"cni": {"podRoutedRanges": ["10.45.0.0/16"]}},
        ),
    )

    assert status == 0
    (request,) = agent.requests
    assert request["routed_ranges"] == ["10.45.0.0/16"]


def recorded_tool_calls(
    monkeypatch: pytest.MonkeyPatch, eth0: str
) -> list[tuple[str, list[str], str | None]]:
    """The host commands the plugin runs, recorded: (command, arguments, namespace); an
    address listing of the pod's interface answers `eth0` (the integration tier runs the real
    ones in namespaces: tests/integration/multus_pod_ips/test_routed_range_delivery.py)."""
    calls: list[tuple[str, list[str], str | None]] = []

    def fake_tool(tool: str, package: str, arguments: list[str], netns: str | None) -> str:
        calls.append((tool, arguments, netns))
        if arguments[:3] == ["-4", "-o", "address"]:
            # `ip -o` ends each record's first line with a backslash
            return f"2: eth0    inet {eth0}/32 scope global eth0\\       valid_lft forever\n"
        return ""

    monkeypatch.setattr(cni_plugin, "_run_tool", fake_tool)
    return calls


def upf_network(agent: StandInAgent, asked: list[str]) -> str:
    return network(
        agent.path,
        prevResult=PREV_RESULT,
        podRoutedRanges=["10.45.0.0/16", "10.46.0.0/16"],
        podNetworkInterface="eth0",
        args={"cni": {"podRoutedRanges": asked}},
    )


def test_the_node_routes_each_asked_range_via_the_pods_eth0_before_the_agent_is_asked(
    agent: StandInAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = recorded_tool_calls(monkeypatch, "10.0.2.77")

    status, _ = run("ADD", upf_network(agent, ["10.45.0.0/16", "10.46.0.0/16"]))

    assert status == 0
    pod = ENV["CNI_NETNS"]
    assert calls == [
        ("sysctl", ["-qw", "net.ipv4.conf.net1.arp_announce=2"], pod),
        ("ip", ["-4", "-o", "address", "show", "dev", "eth0", "scope", "global"], pod),
        ("ip", ["route", "replace", "10.45.0.0/16", "via", "10.0.2.77"], None),  # the node's
        ("ip", ["route", "replace", "10.46.0.0/16", "via", "10.0.2.77"], None),
    ]
    assert len(agent.requests) == 1


def test_a_pod_without_ranges_keeps_its_arp_settings_and_the_node_its_routes(
    agent: StandInAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = recorded_tool_calls(monkeypatch, "10.0.2.77")

    status, _ = run("ADD", upf_network(agent, []))

    assert status == 0
    assert calls == [] and len(agent.requests) == 1


def test_without_a_pod_network_address_the_add_fails_before_the_agent_is_asked(
    agent: StandInAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cni_plugin, "_run_tool", lambda *arguments: "")  # eth0 has no address

    status, error = run("ADD", upf_network(agent, ["10.45.0.0/16"]))

    assert (status, error["code"]) == (1, 104)
    assert "eth0 has no IPv4 address" in error["msg"]
    assert agent.requests == []


def test_an_add_without_a_netns_sets_no_route_anywhere(agent: StandInAgent) -> None:
    """CNI_NETNS is required for ADD (CNI spec, "Parameters"); without it the pod's routes must
    not land in the node's namespace, where the plugin runs."""
    config = network(agent.path, prevResult=PREV_RESULT, mainTableSubnet="10.0.4.0/24")

    status, error = run("ADD", config, CNI_NETNS="")

    assert (status, error["code"]) == (1, 104)
    assert "cannot open the pod's network namespace ''" in error["msg"]
    assert agent.requests == []
