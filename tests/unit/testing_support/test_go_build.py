"""The cache of Go builds (testing_support/go_build.py): an entry per go.mod, go.sum, Go version
and settings, built once, a failed build reported with the caller's error and leaving no entry.
A stand-in `go` (a shell script) plays the toolchain: `go version` prints a version, `go build`
writes the -o file, or fails when the package is named `broken`."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing_support.go_build import GoBuild, built, required_version

FAKE_GO = """#!/bin/sh
if [ "$1" = version ]; then echo "go version go1.99 linux/amd64"; exit 0; fi
echo "$@" >> "$(dirname "$0")/builds.log"
while [ $# -gt 0 ]; do
  case $1 in -o) out=$2; shift 2 ;; broken) echo "cannot build" >&2; exit 1 ;; *) shift ;; esac
done
echo binary > "$out"
"""


class StandInError(Exception):
    """The error type a tier passes for its failed builds."""


@pytest.fixture
def go(tmp_path: Path) -> Path:
    script = tmp_path / "toolchain" / "go"
    script.parent.mkdir()
    script.write_text(FAKE_GO)
    script.chmod(0o755)
    return script


def module(tmp_path: Path, require: str = "example.com/tool v1.2.3") -> Path:
    directory = tmp_path / "module"
    directory.mkdir(exist_ok=True)
    (directory / "go.mod").write_text(f"module build\n\nrequire (\n\t{require}\n)\n")
    (directory / "go.sum").write_text("example.com/tool v1.2.3 h1:abc=\n")
    return directory


def tool_build(
    directory: Path, package: str = "example.com/tool/cmd/tool", **kw: object
) -> GoBuild:
    return GoBuild(
        name="tool",
        directory=directory,
        packages=((package, "tool"),),
        error=StandInError,
        **kw,  # type: ignore[arg-type]
    )


def builds(go: Path) -> list[str]:
    log = go.parent / "builds.log"
    return log.read_text().splitlines() if log.exists() else []


def test_built_once_then_taken_from_the_cache(tmp_path: Path, go: Path) -> None:
    build = tool_build(module(tmp_path), flags=("-trimpath",))
    first = built(build, str(go), tmp_path / "cache")
    again = built(build, str(go), tmp_path / "cache")
    assert first == again
    assert first["tool"].read_text() == "binary\n"
    assert len(builds(go)) == 1
    assert builds(go)[0].startswith("build -trimpath -o ")


def test_the_entry_changes_with_go_sum_and_with_the_settings(tmp_path: Path, go: Path) -> None:
    directory = module(tmp_path)
    key = tool_build(directory).entry_key(str(go))
    assert tool_build(directory, settings=("CGO_ENABLED=0",)).entry_key(str(go)) != key
    (directory / "go.sum").write_text("example.com/tool v1.2.4 h1:def=\n")
    assert tool_build(directory).entry_key(str(go)) != key


def test_a_failed_build_raises_the_callers_error_and_leaves_no_entry(
    tmp_path: Path, go: Path
) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(StandInError, match=r"go build broken in .* failed:\ncannot build"):
        built(tool_build(module(tmp_path), package="broken"), str(go), cache)
    assert [path.name for path in cache.iterdir()] == [".tool.lock"]


def test_the_required_version_is_read_from_go_mod(tmp_path: Path) -> None:
    directory = module(tmp_path)
    assert required_version(directory, "example.com/tool") == "v1.2.3"
    assert required_version(directory, "example.com/other") is None
