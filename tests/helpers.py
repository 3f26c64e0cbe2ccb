"""Helpers the test modules import: upstream reference files, CloudFormation templates and
intrinsics, cdk8s tokens."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_REFERENCE = REPO.parent / "shared" / "reference"


def shared_reference(relative: str = "") -> Path:
    """A path under ../shared/reference (upstream CRDs, Karpenter's CloudFormation...).

    CI always has it (CI=true): there a missing file fails the test, so a moved reference
    cannot silently turn its comparisons into skips. Elsewhere the test skips and says why."""
    path = SHARED_REFERENCE / relative
    if not path.exists():
        message = f"upstream reference not found at {path}"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must provide ../shared/reference")
        pytest.skip(f"{message} (CI provides it)")
    return path
