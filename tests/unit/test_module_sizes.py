"""Modules a reader can hold (issue #35): no product module over 600 lines, unless its opening
comment says why it must stay larger."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT_PACKAGES = (
    "config",
    "charts",
    "node_bootstrap",
    "multus_pod_ips",
    "cdk_constructs",
    "stacks",
    "stages",
    "docs_tools",
)
MAX_LINES = 600
#: What an opening comment says when a module must stay larger.
EXCEPTION_MARK = "stays larger than 600 lines because"


def product_modules() -> list[Path]:
    found = [ROOT / "app.py"]
    for package in PRODUCT_PACKAGES:
        found += [
            path
            for pattern in ("*.py", "*.sh")
            for path in (ROOT / package).rglob(pattern)
            if "__pycache__" not in path.parts
        ]
    return sorted(found)


def test_the_product_packages_are_where_this_test_looks() -> None:
    modules = product_modules()
    assert len(modules) > 100
    assert ROOT / "config/model/networks.py" in modules


def test_no_product_module_is_over_600_lines_without_saying_why() -> None:
    oversized = []
    for path in product_modules():
        text = path.read_text()
        if text.count("\n") > MAX_LINES and EXCEPTION_MARK not in text[:2000]:
            oversized.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert oversized == [], "split these by concept, or say why in the opening comment"
