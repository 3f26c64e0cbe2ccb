"""The house's floors: each product module imports only from its own package or a floor below,
and no two project modules import each other, directly or through others.

Floors, lowest first (docs/code-layout.md):
- multus_pod_ips: the node software the charts ship module by module (standard library only,
  Python 3.9 on the node), so it imports nothing of ours;
- config: the typed model and the facts and contracts every floor above shares (label and taint
  keys, interface naming, the bootstrap's plan, paths on the node);
- charts and node_bootstrap, beside each other, neither importing the other;
- cdk_constructs, then stacks, then stages, then app.py.
The tools (docs_tools, testing_support, benchmarks) may import the product; the product never
imports them.

A circle that only exists under `if TYPE_CHECKING:` still runs at type-check time and ties the
modules together (config.model <-> config.node_prefix did, until the network plan took the
node_prefix rules off the config's classes), so every import statement counts, wherever it is,
relative ones (`from .node_agent import Agent`) included.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FLOORS: tuple[tuple[str, ...], ...] = (
    ("multus_pod_ips",),
    ("config",),
    ("charts", "node_bootstrap"),
    ("cdk_constructs",),
    ("stacks",),
    ("stages",),
    ("app",),
)
TOOLS = ("docs_tools", "testing_support", "benchmarks")
PACKAGES = tuple(package for floor in FLOORS for package in floor if package != "app") + TOOLS


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    modules = {module_name(p): p for package in PACKAGES for p in (REPO / package).rglob("*.py")}
    return {**modules, "app": REPO / "app.py"}


def imported_modules(source: str, own_name: str, modules: dict[str, Path]) -> set[str]:
    """The project modules a module's source imports: `from a import b` names a.b if that is a
    module; a relative import is resolved against the module's own package."""
    own_package = own_name if modules.get(own_name, Path()).name == "__init__.py" else None
    package = own_package or own_name.rpartition(".")[0]

    def project_module(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parent, *([base] if base else [])])
            names += [f"{base}.{alias.name}" for alias in node.names]
    return {found for name in names if (found := project_module(name))} - {own_name}


def floor_of(module: str) -> int | None:
    """The module's floor, or None for the tools."""
    package = module.split(".")[0]
    return next((level for level, floor in enumerate(FLOORS) if package in floor), None)


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import that reaches up a floor, across to a package beside its own, or from the
    product into the tools."""
    violations = []
    for module, imported in sorted(graph.items()):
        level = floor_of(module)
        if level is None:
            continue
        for target in sorted(imported):
            target_level = floor_of(target)
            same_package = target.split(".")[0] == module.split(".")[0]
            if target_level is None or target_level > level:
                violations.append(f"{module} -> {target}: a lower floor imports a higher one")
            elif target_level == level and not same_package:
                violations.append(f"{module} -> {target}: packages beside each other")
    return violations


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports as a path that ends where it starts, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        path.append(module)
        for imported in sorted(graph[module]):
            cycle = visit(imported)
            if cycle:
                return cycle
        path.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module)
        if cycle:
            return cycle
    return None


def project_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {
        name: imported_modules(path.read_text(encoding="utf-8"), name, modules)
        for name, path in modules.items()
    }


def test_the_cycle_finder_finds_a_type_checking_circle(tmp_path: Path) -> None:
    graph = {"config.model": {"config.node_prefix"}, "config.node_prefix": {"config.model"}}
    assert import_cycle(graph) == ["config.model", "config.node_prefix", "config.model"]
    assert import_cycle({"a": {"b"}, "b": set()}) is None


def test_type_checking_function_level_and_relative_imports_count() -> None:
    modules = {
        "config.model": Path("config/model.py"),
        "config.node_prefix": Path("config/node_prefix.py"),
        "multus_pod_ips.agent": Path("multus_pod_ips/agent/__init__.py"),
        "multus_pod_ips.agent.node_agent": Path("multus_pod_ips/agent/node_agent.py"),
        "multus_pod_ips.agent.eni_worker": Path("multus_pod_ips/agent/eni_worker.py"),
        "multus_pod_ips.cni_plugin": Path("multus_pod_ips/cni_plugin.py"),
    }
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from config.model import AppConfig\n"
        "def later() -> None:\n"
        "    import config.model\n"
    )
    assert imported_modules(source, "config.node_prefix", modules) == {"config.model"}
    assert imported_modules("from config import model\n", "x", modules) == {"config.model"}
    relative = "if TYPE_CHECKING:\n    from .node_agent import Agent\nfrom ..cni_plugin import X\n"
    assert imported_modules(relative, "multus_pod_ips.agent.eni_worker", modules) == {
        "multus_pod_ips.agent.node_agent",
        "multus_pod_ips.cni_plugin",
    }
    assert imported_modules("from . import eni_worker\n", "multus_pod_ips.agent", modules) == {
        "multus_pod_ips.agent.eni_worker"
    }


def test_the_floor_check_refuses_upward_sideways_and_tool_imports() -> None:
    graph = {
        "config.model": {"charts.building_blocks", "config.patterns"},
        "charts.cleartaints": {"node_bootstrap.renderer", "config.model"},
        "stacks.cluster_stack": {"testing_support.emulator", "cdk_constructs.eks_cluster"},
        "testing_support.emulator": {"stacks.cluster_stack"},
    }
    assert layer_violations(graph) == [
        "charts.cleartaints -> node_bootstrap.renderer: packages beside each other",
        "config.model -> charts.building_blocks: a lower floor imports a higher one",
        "stacks.cluster_stack -> testing_support.emulator: a lower floor imports a higher one",
    ]


def test_every_product_module_imports_only_its_own_package_or_a_lower_floor() -> None:
    graph = project_graph()
    assert "config.network_plan" in graph["config.model.app_config"]
    assert layer_violations(graph) == []


def test_no_project_module_imports_itself_through_others() -> None:
    graph = project_graph()
    assert "multus_pod_ips.agent.eni_worker" in graph["multus_pod_ips.agent.node_agent"]
    assert import_cycle(graph) is None
