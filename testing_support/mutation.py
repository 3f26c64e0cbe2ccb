"""A small AST mutation tester: does a module's own test suite notice when one rule breaks?

Each mutant changes one thing in one module: a comparison (< to <=, == to !=, in to not in), an
integer (n to n+1 and n-1: pydantic Field bounds, table rows, indexes), a boolean constant, and/or,
a removed `not`, an `if` that guards a raise made never-true, a dict entry or list element
dropped (tables, manifest fields), a keyword argument dropped (Field limits, construct props), a
string constant changed (paths, names, keys). Docstrings and the text of raised errors are left
alone, and so are the texts of log calls and documentation keywords (description=, help=): a test
that pins a message's wording is not what this measures.

The tool copies the repo into a scratch directory (one copy per worker), writes each mutant there
and runs the module's tests against it (first failure stops the run). Killed = the tests failed
or timed out; survived = they passed. A mutant's key names the function (or module-level name)
it sits in, not its line, so that docs/testing.md's table of equivalent mutants (no observable
difference, left out of the score) survives edits elsewhere in the file.

    python -m testing_support.mutation config/model/vpc.py        # one module
    python -m testing_support.mutation config/model/vpc.py --lines 120-170 --jobs 2
    python -m testing_support.mutation --all                      # every module in MODULE_TESTS
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeGuard

REPO = Path(__file__).resolve().parents[1]
EQUIVALENTS_DOC = REPO / "docs" / "testing.md"

# Module -> its tests (its mirror in tests/), as tiers of pytest arguments run in order until one
# fails: a cheap tier first kills most mutants without paying for the expensive one.
# The config modules' first tier skips tests/conftest.py (--confcutdir) and the test files that
# import the CDK app, so no jsii process starts; the second tier is tests/unit/config without
# the few cases that synthesize the app or start `python app.py` (they take most of its time
# and repeat in-process cases of the same tables). The Lambda handlers' tests need no fixture of
# tests/conftest.py and no CDK import, so their tier leaves it out the same way.
_CONFIG_TESTS = [
    [
        "--confcutdir=tests/unit/config",
        "tests/unit/config/test_model.py",
        "tests/unit/config/test_valid_edges.py",
        "tests/unit/config/test_model_defaults.py",
        "tests/unit/config/test_fact_table_shapes.py",
        "tests/unit/config/test_fact_tables.py",
        "tests/unit/config/test_messages.py",
        "tests/unit/config/test_loader.py",
        "tests/unit/config/test_cluster_access.py",
        "tests/unit/config/test_node_prefix.py",
    ],
    ["tests/unit/config", "-k", "not cli_entry and not synthesizes"],
]

# Reading the config: the cheap tier calls the loader directly; the second runs every bad-input
# and valid-input case through app.main (no synthesis).
_CONFIG_LOADING_TESTS = [
    [
        "--confcutdir=tests/unit/config",
        "tests/unit/config/test_loader.py",
        "tests/unit/config/test_overrides.py",
        "tests/unit/config/test_documents.py",
    ],
    [
        "tests/unit/config/test_bad_input.py",
        "tests/unit/config/test_valid_input.py",
        "tests/unit/config/test_pipeline.py",
        "-k",
        "not cli_entry and not synthesizes",
    ],
]


def _config_tests_after(*mirror: str) -> list[list[str]]:
    """A config module's own test files first (a second or two), then the config tiers."""
    return [["--confcutdir=tests/unit/config", *mirror], *_CONFIG_TESTS]


_FACT_TABLE_TESTS = (
    "tests/unit/config/test_fact_tables.py",
    "tests/unit/config/test_fact_table_shapes.py",
)
# The agent's unit tests (no conftest: no jsii), then the agent as a process against the
# emulator, which only runs for the mutants the unit tests miss.
AGENT_TESTS = [
    [
        "--confcutdir=tests/unit/multus_pod_ips",
        "tests/unit/multus_pod_ips/test_agent.py",
        "tests/unit/multus_pod_ips/test_agent_rules.py",
        "tests/unit/multus_pod_ips/agent/test_eni_worker_dual_stack.py",
    ],
    [
        "--confcutdir=tests/integration/multus_pod_ips",
        "tests/integration/multus_pod_ips/test_pod_ip_agent.py",
    ],
]
MODULE_TESTS: dict[str, list[list[str]]] = {
    # The user-data check against what the cluster stack renders (config -> props, no synth).
    **{
        f"config/model/{module}.py": [*_CONFIG_TESTS, ["tests/unit/stacks/test_cluster_props.py"]]
        for module in (
            "base",
            "vpc",
            "cluster",
            "networks",
            "security_groups",
            "routes",
            "node_pools",
            "karpenter",
            "app_config",
        )
    },
    "config/loader.py": _CONFIG_LOADING_TESTS,
    "config/overrides.py": _CONFIG_LOADING_TESTS,
    "config/documents.py": _CONFIG_LOADING_TESTS,
    "config/coercion.py": _CONFIG_LOADING_TESTS,
    "config/aws_regions.py": _config_tests_after(*_FACT_TABLE_TESTS),
    "config/karpenter_releases.py": _config_tests_after(
        "tests/unit/config/test_karpenter_releases_rules.py", *_FACT_TABLE_TESTS
    ),
    # The rule is applied by the config (network names) and by the renderer (its props).
    "config/interface_names.py": [
        [
            "--confcutdir=tests/unit/config",
            "tests/unit/config/test_fact_table_shapes.py",
            "tests/unit/config/test_fact_tables.py",
            "tests/unit/config/test_model.py",
        ],
        ["tests/unit/node_bootstrap/test_renderer_rules.py"],
    ],
    # Not the emulator run of the node_prefix bootstrap: a minute and more per mutant.
    "node_bootstrap/node_prefix.py": [
        [
            "tests/unit/node_bootstrap/test_node_prefix_rendering.py",
            "tests/unit/node_bootstrap/test_node_prefix.py",
            "tests/unit/stacks/test_cluster_props.py",
        ]
    ],
    "config/node_pool_rules.py": _config_tests_after(
        "tests/unit/config/test_node_pool_rules.py", "tests/unit/config/test_valid_edges.py"
    ),
    "config/patterns.py": _config_tests_after(
        *_FACT_TABLE_TESTS, "tests/unit/config/test_messages.py"
    ),
    "config/messages.py": _config_tests_after(
        "tests/unit/config/test_messages.py", "tests/unit/config/test_fact_tables.py"
    ),
    # Their own test files first (no CDK import), then the config package as above.
    "config/cluster_access.py": [
        ["--confcutdir=tests/unit/config", "tests/unit/config/test_cluster_access.py"],
        _CONFIG_TESTS[1],
    ],
    "config/node_prefix.py": [
        ["--confcutdir=tests/unit/config", "tests/unit/config/test_node_prefix.py"],
        _CONFIG_TESTS[1],
    ],
    "config/security_group_rules.py": [
        ["--confcutdir=tests/unit/config", "tests/unit/config/test_security_group_rules.py"],
        _CONFIG_TESTS[1],
    ],
    # The plan's rows and modes first, then the config rules and the cluster props built on it.
    "config/network_plan.py": [
        *_config_tests_after("tests/unit/config/test_network_plan.py"),
        ["tests/unit/stacks/test_cluster_props.py"],
    ],
    "config/node_bootstrap_plan.py": [
        *_config_tests_after("tests/unit/config/test_network_plan.py"),
        ["tests/unit/stacks/test_cluster_props.py"],
    ],
    # The section's rules and reference forms in-process, then the synthesized app's images.
    "config/images.py": [
        ["--confcutdir=tests/unit/config", "tests/unit/config/test_images.py"],
        ["tests/unit/stacks/test_images.py"],
    ],
    "charts/cleartaints.py": [
        [
            "tests/unit/charts/test_chart_cleartaints.py",
            "tests/unit/charts/test_chart_cleartaints_rules.py",
            "tests/unit/charts/test_daemon_set_overhead.py",
        ],
        # The Kubernetes schema: a misspelt or missing field of the admission policy.
        ["tests/unit/charts/test_chart_validation.py", "-k", "cleartaints"],
    ],
    # The numbers behind the ServiceTimeouts, then the config rule built on them.
    "config/custom_resource_timing.py": [
        [
            "--confcutdir=tests/unit/config",
            "tests/unit/config/test_custom_resource_timing.py",
        ],
        _CONFIG_TESTS[1],
    ],
    "cdk_constructs/subnet_cidr_reservation_handler/index.py": [
        [
            "--confcutdir=tests/unit/cdk_constructs",
            "tests/unit/cdk_constructs/test_subnet_cidr_reservation_handler.py",
            "tests/unit/cdk_constructs/test_subnet_cidr_reservation_handler_rules.py",
        ]
    ],
    "cdk_constructs/karpenter_teardown_handler/index.py": [
        [
            "--confcutdir=tests/unit/cdk_constructs",
            "tests/unit/cdk_constructs/test_karpenter_teardown_handler.py",
        ]
    ],
    "cdk_constructs/ami_release_check_handler/index.py": [
        [
            "--confcutdir=tests/unit/cdk_constructs",
            "tests/unit/cdk_constructs/test_ami_release_check_handler.py",
        ]
    ],
    "node_bootstrap/renderer.py": [
        [
            "tests/unit/node_bootstrap/test_renderer.py",
            "tests/unit/node_bootstrap/test_renderer_rules.py",
            "tests/unit/node_bootstrap/test_node_prefix_rendering.py",
            "tests/unit/node_bootstrap/test_dual_stack_rendering.py",
        ]
    ],
    "charts/nad_cni_configs.py": [
        [
            "tests/unit/charts/test_chart_network_attachments.py",
            "tests/unit/charts/test_chart_network_attachments_rules.py",
        ]
    ],
    "charts/network_attachments.py": [
        [
            "tests/unit/charts/test_chart_network_attachments.py",
            "tests/unit/charts/test_chart_network_attachments_rules.py",
        ]
    ],
    "charts/multus_pod_ips.py": [
        [
            "--confcutdir=tests/unit/charts",
            "tests/unit/charts/test_chart_multus_pod_ips.py",
            "tests/unit/charts/test_chart_multus_pod_ips_rules.py",
            "tests/unit/charts/test_daemon_set_overhead.py",
        ]
    ],
    # The plugin's unit tests, its chain with the real sbr in network namespaces (root), then the
    # agent's, which answer with the plugin's error codes.
    "multus_pod_ips/cni_plugin.py": [
        ["--confcutdir=tests/unit/multus_pod_ips", "tests/unit/multus_pod_ips/test_cni_plugin.py"],
        [
            "--confcutdir=tests/integration/multus_pod_ips",
            "tests/integration/multus_pod_ips/test_pod_routes.py",
        ],
        AGENT_TESTS[0],
    ],
    "node_bootstrap/pod_ip_iam.py": [
        ["--confcutdir=tests/unit/node_bootstrap", "tests/unit/node_bootstrap/test_pod_ip_iam.py"]
    ],
    **{
        f"multus_pod_ips/agent/{module}.py": AGENT_TESTS
        for module in (
            "address_family",
            "config",
            "imds",
            "ec2_query",
            "records",
            "eni_worker",
            "node_agent",
            "socket_server",
            "service",
        )
    },
}

COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "node_modules", "cdk.out", ".mypy_cache", ".ruff_cache", ".pytest_cache"
)
# Keyword arguments that only document (pydantic Field(description=...), argparse help=...).
DOCUMENTATION_KEYWORDS = {"description", "help"}
LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical"}
SWAPPED_COMPARISONS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


@dataclass(frozen=True)
class Mutant:
    """One change: where (scope and line) and what, in words a reader can match to the source.

    `key` (scope + description, with a counter when the same change occurs twice in one scope)
    identifies the mutant across edits that move lines; `line` is for the reader."""

    index: int
    line: int
    scope: str
    description: str
    occurrence: int = 1

    @property
    def key(self) -> str:
        suffix = f" #{self.occurrence}" if self.occurrence > 1 else ""
        return f"{self.scope}: {self.description}{suffix}"


def _ignored_strings(tree: ast.Module) -> set[int]:
    """ids of string nodes not worth mutating: docstrings, raised error messages, log lines."""
    ignored: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            ignored.add(id(body[0].value))
        if isinstance(node, ast.Raise) and node.exc is not None:
            ignored.update(id(sub) for sub in ast.walk(node.exc))
        if isinstance(node, ast.JoinedStr):
            ignored.update(id(sub) for sub in ast.walk(node))
        if _is_log_call(node):
            ignored.update(id(sub) for argument in node.args for sub in ast.walk(argument))
        if isinstance(node, ast.keyword) and node.arg in DOCUMENTATION_KEYWORDS:
            ignored.update(id(sub) for sub in ast.walk(node.value))
    return ignored


def _is_log_call(node: ast.AST) -> TypeGuard[ast.Call]:
    """LOG.info("...", ...) and the like: the wording of a log line is not behaviour."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in LOG_METHODS
    )


def _guards_raise(node: ast.If) -> bool:
    return any(isinstance(statement, ast.Raise) for statement in node.body)


class _Mutator(ast.NodeTransformer):
    """Walks the tree in a fixed order; counts mutation points, applies the `target`-th."""

    def __init__(self, ignored_strings: set[int], target: int | None) -> None:
        self.ignored_strings = ignored_strings
        self.target = target
        self.points: list[Mutant] = []
        self.scopes: list[str] = []
        self.function_depth = 0
        self.seen: Counter[tuple[str, str]] = Counter()

    def _offer(self, node: ast.AST, description: str) -> bool:
        index = len(self.points)
        scope = ".".join(self.scopes) or "<module>"
        self.seen[scope, description] += 1
        occurrence = self.seen[scope, description]
        self.points.append(
            Mutant(index, getattr(node, "lineno", 0), scope, description, occurrence)
        )
        return index == self.target

    def _visit_scope(self, node: ast.AST, name: str) -> ast.AST:
        self.scopes.append(name)
        try:
            return self.generic_visit(node)
        finally:
            self.scopes.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return self._visit_scope(node, node.name)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        self.function_depth += 1
        try:
            return self._visit_scope(node, node.name)
        finally:
            self.function_depth -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return self._visit_function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return self._visit_function(node)

    # Names bound at module or class level (constants, tables, pydantic fields) are scopes too.
    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        if self.function_depth:
            return self.generic_visit(node)
        return self._visit_scope(node, " = ".join(ast.unparse(t) for t in node.targets))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if self.function_depth:
            return self.generic_visit(node)
        return self._visit_scope(node, ast.unparse(node.target))

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        for position, operator in enumerate(node.ops):
            swapped = SWAPPED_COMPARISONS.get(type(operator))
            if swapped and self._offer(
                node, f"{type(operator).__name__} -> {swapped.__name__} in {ast.unparse(node)}"
            ):
                node.ops[position] = swapped()
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        other: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        if self._offer(node, f"{type(node.op).__name__} -> {type(other).__name__}"):
            node.op = other
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and self._offer(node, f"drop not in {ast.unparse(node)}"):
            return node.operand
        return node

    def visit_If(self, node: ast.If) -> ast.AST:
        self.generic_visit(node)
        if _guards_raise(node) and self._offer(node, f"never raise: if {ast.unparse(node.test)}"):
            node.test = ast.Constant(value=False)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = node.value
        if isinstance(value, bool):
            if self._offer(node, f"{value} -> {not value}"):
                return ast.Constant(value=not value)
        elif isinstance(value, int):
            for delta in (1, -1):
                if self._offer(node, f"{value} -> {value + delta}"):
                    return ast.Constant(value=value + delta)
        elif (
            isinstance(value, str)
            and value
            and id(node) not in self.ignored_strings
            and self._offer(node, f"string {value[:40]!r} -> {'X' + value[:39]!r}")
        ):
            return ast.Constant(value="X" + value)
        return node

    def visit_Dict(self, node: ast.Dict) -> ast.AST:
        self.generic_visit(node)
        for position, key in enumerate(node.keys):
            label = ast.unparse(key) if key is not None else "**"
            if self._offer(node, f"drop dict entry {label[:50]}"):
                del node.keys[position]
                del node.values[position]
                break
        return node

    def visit_List(self, node: ast.List) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load):
            for position, element in enumerate(node.elts):
                if self._offer(node, f"drop list element {ast.unparse(element)[:50]}"):
                    del node.elts[position]
                    break
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        for position, keyword in enumerate(node.keywords):
            if keyword.arg in DOCUMENTATION_KEYWORDS:
                continue
            if keyword.arg is not None and self._offer(
                node, f"drop {keyword.arg}= in {ast.unparse(node.func)}(...)"
            ):
                del node.keywords[position]
                break
        return node


def enumerate_mutants(source: str) -> list[Mutant]:
    tree = ast.parse(source)
    mutator = _Mutator(_ignored_strings(tree), target=None)
    mutator.visit(tree)
    return mutator.points


def mutate(source: str, index: int) -> str:
    # The ignored strings are node ids, so they must come from the very tree that is mutated
    # (ids taken from another parse, or a copy, would offer docstrings and shift every index).
    tree = ast.parse(source)
    mutated = _Mutator(_ignored_strings(tree), target=index).visit(tree)
    return ast.unparse(ast.fix_missing_locations(mutated))


def documented_equivalents(module: str) -> set[str]:
    """Keys docs/testing.md lists as equivalent for `module` (rows `| module | key | why |`)."""
    if not EQUIVALENTS_DOC.exists():
        return set()
    keys = set()
    for line in EQUIVALENTS_DOC.read_text().splitlines():
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] == module:
            keys.add(cells[1])
    return keys


@dataclass
class ModuleResult:
    """Outcome of one module's run."""

    module: str
    killed: int = 0
    equivalent: int = 0
    seconds: float = 0.0
    survivors: tuple[Mutant, ...] = ()
    killed_keys: list[str] = field(default_factory=list)

    @property
    def scored(self) -> int:
        return self.killed + len(self.survivors)

    @property
    def score(self) -> float:
        return 100.0 * self.killed / self.scored if self.scored else 100.0


def _run_tests(workdir: Path, tiers: list[list[str]], timeout: float) -> bool:
    """True when every tier of tests passes (the mutant survived)."""
    for tier in tiers:
        # A test file mapped here but not in this checkout (an older branch) is left out.
        arguments = [a for a in tier if not a.startswith("tests/") or (workdir / a).exists()]
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
        try:
            outcome = subprocess.run(
                [*command, *arguments], cwd=workdir, capture_output=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return False
        if outcome.returncode != 0:
            return False
    return True


def _survives(workdir: Path, module: str, mutated: str, timeout: float) -> bool:
    """Write the mutant into this worker's copy, run the module's tests, put the original back."""
    target = workdir / module
    original = target.read_text()
    target.write_text(mutated)
    try:
        return _run_tests(workdir, MODULE_TESTS[module], timeout)
    finally:
        target.write_text(original)


def run_module(
    module: str,
    workdirs: list[Path],
    only_lines: set[int] | None,
    known_killed: frozenset[str] = frozenset(),
) -> ModuleResult:
    """Every mutant of `module` (on `only_lines` if given), spread over one worker per workdir.

    Mutants in `known_killed` count as killed without a run: valid when the module is unchanged
    and tests were only added since they were recorded."""
    original = (workdirs[0] / module).read_text()
    started = time.monotonic()
    if not _run_tests(workdirs[0], MODULE_TESTS[module], timeout=1800):
        raise SystemExit(f"{module}: its tests fail without any mutation; fix them first")
    timeout = max(60.0, 5 * (time.monotonic() - started))
    equivalents = documented_equivalents(module)
    result = ModuleResult(module)
    baseline = ast.unparse(ast.parse(original))
    pending: list[tuple[Mutant, str]] = []
    for mutant in enumerate_mutants(original):
        if only_lines and mutant.line not in only_lines:
            continue
        mutated = mutate(original, mutant.index)
        if mutated == baseline:
            continue
        if mutant.key in equivalents:
            result.equivalent += 1
            continue
        if mutant.key in known_killed:
            result.killed += 1
            result.killed_keys.append(mutant.key)
            continue
        pending.append((mutant, mutated))
    free = list(workdirs)

    def judge(item: tuple[Mutant, str]) -> tuple[Mutant, bool]:
        workdir = free.pop()  # list.pop/append are atomic: each thread owns one copy at a time
        try:
            survived = _survives(workdir, module, item[1], timeout)
        finally:
            free.append(workdir)
        if survived:
            print(f"  survived L{item[0].line} {item[0].key}", flush=True)
        return item[0], survived

    with ThreadPoolExecutor(max_workers=len(workdirs)) as pool:
        outcomes = list(pool.map(judge, pending))
    result.killed += sum(1 for _, survived in outcomes if not survived)
    result.killed_keys += [mutant.key for mutant, survived in outcomes if not survived]
    result.survivors = tuple(mutant for mutant, survived in outcomes if survived)
    result.seconds = time.monotonic() - started
    return result


def print_table(results: list[ModuleResult]) -> None:
    print(f"\n{'module':<58} {'killed':>6} {'survived':>8} {'equiv':>5} {'score':>6} {'time':>7}")
    for r in results:
        print(
            f"{r.module:<58} {r.killed:>6} {len(r.survivors):>8} {r.equivalent:>5} "
            f"{r.score:>5.1f}% {r.seconds:>6.0f}s"
        )
    for r in results:
        for mutant in r.survivors:
            print(f"SURVIVED {r.module} L{mutant.line} | {mutant.key} |")


def _parse_lines(spec: str | None) -> set[int] | None:
    if not spec:
        return None
    lines: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        lines.update(range(int(low), int(high or low) + 1))
    return lines


def _record(path: Path, result: ModuleResult) -> None:
    recorded = json.loads(path.read_text()) if path.exists() else {}
    recorded[result.module] = {
        "killed": sorted(result.killed_keys),
        "survived": sorted(mutant.key for mutant in result.survivors),
    }
    path.write_text(json.dumps(recorded, indent=1) + "\n")


def _copy_repo(parent: Path) -> Path:
    """A copy of the repo under `parent`, with ../shared reachable as from a worktree."""
    workdir = parent / "repo"
    shutil.copytree(REPO, workdir, ignore=COPY_IGNORE)
    (parent / "shared").symlink_to(REPO.parent / "shared")
    return workdir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("modules", nargs="*", help=f"any of: {', '.join(MODULE_TESTS)}")
    parser.add_argument("--all", action="store_true", help="every module in MODULE_TESTS")
    parser.add_argument("--lines", help="only mutants on these lines, e.g. 10-40,52")
    parser.add_argument(
        "--jobs", type=int, default=1, help="mutants tested at once, each in its own repo copy"
    )
    parser.add_argument("--record", type=Path, help="write each mutant's outcome to this JSON")
    parser.add_argument(
        "--known-killed",
        type=Path,
        help="a --record file: its killed mutants are not rerun (only if tests were just added)",
    )
    args = parser.parse_args(argv)
    known = json.loads(args.known_killed.read_text()) if args.known_killed else {}
    modules = list(MODULE_TESTS) if args.all else args.modules
    unknown = [m for m in modules if m not in MODULE_TESTS]
    if not modules or unknown:
        parser.error(f"name modules from: {', '.join(MODULE_TESTS)} (unknown: {unknown})")
    with tempfile.TemporaryDirectory(prefix="mutation-") as scratch:
        workdirs = [_copy_repo(Path(scratch) / f"worker{n}") for n in range(max(1, args.jobs))]
        results = []
        for module in modules:
            print(f"{module}: {len(enumerate_mutants((REPO / module).read_text()))} mutants")
            killed = frozenset(known.get(module, {}).get("killed", []))
            results.append(run_module(module, workdirs, _parse_lines(args.lines), killed))
            if args.record:
                _record(args.record, results[-1])
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
