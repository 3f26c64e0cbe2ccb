"""The dual-stack part of the user-data: its variable and script only for dual-stack networks
(other nodes' user-data stays as it was), the hooks it extends, shellcheck."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from config.node_bootstrap_plan import AzPlacement, NodeBootstrapProps
from node_bootstrap import render_user_data
from node_bootstrap.renderer import DUAL_STACK_SCRIPT_NAME, SCRIPT_NAME, render_configuration
from testing_support.multus_emulator import expanded_script
from tests.unit.node_bootstrap.test_node_prefix_rendering import functions, userplane
from tests.unit.node_bootstrap.test_renderer import (
    SHELLCHECK,
    deployed_interfaces,
    two_network_props,
)

NODE_DIR = Path(__file__).parents[3] / "node_bootstrap"


def dual_stack_multus2(props: NodeBootstrapProps | None = None) -> NodeBootstrapProps:
    props = props or two_network_props()
    first, second = props.interfaces
    return replace(props, interfaces=[first, replace(second, ipv6=True)])


def test_without_a_dual_stack_network_the_node_runs_only_the_main_script() -> None:
    plain = expanded_script(render_user_data(two_network_props()))
    shebang = plain.split("\n", 1)[0]
    main_script = (NODE_DIR / SCRIPT_NAME).read_text().split("\n", 1)[1]

    assert "MULTUS_IPV6_INTERFACES" not in plain
    # Every function bash parses is the main script's: nothing of the dual-stack library.
    configuration = render_configuration(two_network_props())
    assert functions(plain) == functions(f"{shebang}\n{configuration}{main_script}")


def test_dual_stack_interfaces_are_named_in_one_variable_and_the_library_is_included() -> None:
    props = dual_stack_multus2()
    configuration = render_configuration(props)
    script = expanded_script(render_user_data(props))

    assert "MULTUS_IPV6_INTERFACES=multus2\n" in configuration
    # The network lines are those of an IPv4-only node: the main script reads them unchanged.
    assert render_configuration(two_network_props()) in configuration
    assert "dual_stack_create_args()" in script
    assert script.index("node_prefix_up() { :; }") < script.index("extend_hook node_prefix_up")
    assert script.rstrip().endswith('main "$@"')


def test_stripping_comments_and_indentation_changes_no_function() -> None:
    props = dual_stack_multus2(two_network_props(node_prefix=[userplane("us-west-2a")]))
    rendered = expanded_script(render_user_data(props))
    shebang = rendered.split("\n", 1)[0]
    main_script = (NODE_DIR / SCRIPT_NAME).read_text().split("\n", 1)[1]
    libraries = "".join(
        (NODE_DIR / name).read_text().split("\n", 1)[1]
        for name in ("node_cni_config.sh", "node_prefix.sh", DUAL_STACK_SCRIPT_NAME)
    )
    unstripped = main_script.replace('\nmain "$@"\n', f'\n{libraries}\nmain "$@"\n')
    assert functions(rendered) == functions(f"{shebang}\n{render_configuration(props)}{unstripped}")


def test_extended_hooks_run_the_node_prefix_body_first_then_the_dual_stack_one(
    tmp_path: Path,
) -> None:
    """extend_hook keeps what node_prefix.sh defined: a node with a node_prefix network and a
    dual-stack one needs both on each network's create call."""
    library = (NODE_DIR / DUAL_STACK_SCRIPT_NAME).read_text()
    probe = tmp_path / "probe.sh"
    probe.write_text(
        "ROOT=/nonexistent\nMULTUS_IPV6_INTERFACES='multus2 n6'\n"
        "node_prefix_load() { :; }\nnode_prefix_up() { :; }\n"
        'node_prefix_create_args() { [[ $1 != multus1 ]] || create+=("Ipv4PrefixCount=2"); }\n'
        f"{library}\n"
        "for ifname in multus1 multus2 n6x; do create=(); node_prefix_create_args $ifname; "
        'echo "$ifname ${create[*]}"; done\n'
    )
    completed = subprocess.run(["bash", str(probe)], capture_output=True, text=True, check=True)
    assert completed.stdout.splitlines() == [
        "multus1 Ipv4PrefixCount=2",
        "multus2 Ipv6AddressCount=1",
        "n6x ",  # a name that only starts like a dual-stack one
    ]


def test_shellcheck_reports_nothing_but_the_extended_hooks(tmp_path: Path) -> None:
    assert_shellcheck_clean(DUAL_STACK_SCRIPT_NAME, dual_stack_multus2, tmp_path)


def assert_shellcheck_clean(
    library: str, add: Callable[[NodeBootstrapProps], NodeBootstrapProps], tmp_path: Path
) -> None:
    """shellcheck finds nothing in the user-data of props that `add` gives the library's
    feature (deployed IDs), but the hooks the library extends, nor in the library alone but
    the script's globals and helpers it uses."""
    deployed = AzPlacement(subnet_ids=["subnet-0b1", "subnet-0b2"])
    props = add(
        two_network_props(
            interfaces=deployed_interfaces(),
            placements={"us-west-2a": deployed, "us-west-2b": deployed},
        )
    )
    rendered = tmp_path / "rendered.sh"
    rendered.write_text(expanded_script(render_user_data(props)))
    checks = [
        # The extended hooks are redefined (by eval) before main runs.
        [SHELLCHECK, "--exclude=SC2329", str(rendered)],
        # Alone, it uses globals and helpers of the script it is put into.
        [SHELLCHECK, "--exclude=SC2154,SC2034", str(NODE_DIR / library)],
    ]
    for command in checks:
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        assert (completed.returncode, completed.stdout + completed.stderr) == (0, ""), command
