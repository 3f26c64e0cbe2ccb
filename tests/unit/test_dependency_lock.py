"""requirements.lock (what `make` installs, hash-checked) agrees with requirements*.txt."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import REPO

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)")


def normalized(name: str) -> str:
    """A distribution name as PyPI compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    """Name -> version of every `name==version` line, following `-r` includes."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("-r "):
            found.update(pins(path.parent / line.split(maxsplit=1)[1]))
        elif match := PIN.match(line):
            found[normalized(match[1])] = match[2]
    return found


def test_every_direct_requirement_is_locked_at_its_pinned_version() -> None:
    direct = pins(REPO / "requirements-dev.txt")
    locked = pins(REPO / "requirements.lock")
    assert "aws-cdk-lib" in direct, "requirements-dev.txt no longer includes requirements.txt"
    stale = {name: (version, locked.get(name)) for name, version in direct.items()}
    stale = {name: versions for name, versions in stale.items() if versions[0] != versions[1]}
    assert not stale, f"requirements.lock is stale (pinned, locked): {stale}; run `make lock`"


def test_every_locked_distribution_carries_a_hash() -> None:
    entries = re.split(r"^(?=[a-z0-9])", (REPO / "requirements.lock").read_text(), flags=re.M)
    unhashed = [entry.split()[0] for entry in entries[1:] if "--hash=sha256:" not in entry]
    assert len(entries) > 100, "the lock lists every indirect dependency too"
    assert not unhashed, f"locked without a hash: {unhashed}"
