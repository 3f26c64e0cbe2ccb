"""No two project modules import each other, directly or through others.

A circle that only exists under `if TYPE_CHECKING:` still runs at type-check time and ties the
modules together (config.model <-> config.node_prefix did, until the network plan took the
node_prefix rules off the config's classes), so every import statement counts, wherever it is.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = (
    "config",
    "stages",
    "stacks",
    "cdk_constructs",
    "charts",
    "node_bootstrap",
    "multus_pod_ips",
    "docs_tools",
    "testing_support",
    "benchmarks",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in (REPO / package).rglob("*.py")}


def imported_modules(source: str, own_name: str, modules: dict[str, Path]) -> set[str]:
    """The project modules a module's source imports: `from a import b` names a.b if that is a
    module."""

    def project_module(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return {found for name in names if (found := project_module(name))} - {own_name}


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


def test_the_cycle_finder_finds_a_type_checking_circle(tmp_path: Path) -> None:
    graph = {"config.model": {"config.node_prefix"}, "config.node_prefix": {"config.model"}}
    assert import_cycle(graph) == ["config.model", "config.node_prefix", "config.model"]
    assert import_cycle({"a": {"b"}, "b": set()}) is None


def test_type_checking_and_function_level_imports_count() -> None:
    modules = {"config.model": Path("model.py"), "config.node_prefix": Path("node_prefix.py")}
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from config.model import AppConfig\n"
        "def later() -> None:\n"
        "    import config.model\n"
    )
    assert imported_modules(source, "config.node_prefix", modules) == {"config.model"}
    assert imported_modules("from config import model\n", "x", modules) == {"config.model"}


def test_no_project_module_imports_itself_through_others() -> None:
    modules = project_modules()
    graph = {
        name: imported_modules(path.read_text(encoding="utf-8"), name, modules)
        for name, path in modules.items()
    }
    assert "config.node_prefix" in graph["config.model"]
    assert import_cycle(graph) is None
