"""Every CodeBuild step of the sample pipeline runs on what its build image provides: the
runtime versions it selects, each program its commands (and the make recipes they call) start,
and each apt package at the version the image's distribution offers.

The image facts are testing_support/build_images.py (aws/aws-codebuild-docker-images,
ubuntu/standard/8.0/Dockerfile and runtimes.yml; packages.ubuntu.com)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from stages.pipeline_stack import PipelineStack
from testing_support.build_images import BUILD_IMAGES, BuildImage, Distribution
from tests.conftest import REPO, SynthesizedPipeline
from tests.helpers import resources

OPERATORS = {"&&", "||", ";", "|", "(", ")", "{", "}"}
SHELL_BUILTINS = {"test", "echo", "exit", "cd", "export", "true", "false", ":"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
# Programs the recipes create before running them: the virtualenv `make` installs from the lock.
CREATED_BY_THE_RECIPES = ".venv/bin/"


@pytest.fixture(scope="module")
def projects(pipeline_synth: SynthesizedPipeline) -> dict[str, dict[str, Any]]:
    """Logical ID -> CodeBuild project of the sample pipeline."""
    (stack,) = [c for c in pipeline_synth.app.node.children if isinstance(c, PipelineStack)]
    template = json.loads((pipeline_synth.outdir / stack.template_file).read_text())
    found = resources(template, "AWS::CodeBuild::Project")
    assert len(found) >= 3  # synth, self-mutation, asset publishing
    return found


def image_of(project: dict[str, Any]) -> BuildImage:
    return BUILD_IMAGES[project["Properties"]["Environment"]["Image"]]


def buildspec(project: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(project["Properties"]["Source"]["BuildSpec"]))


def phase_commands(spec: dict[str, Any]) -> list[str]:
    """The commands of every phase, in the order CodeBuild runs the phases."""
    phases = spec["phases"]
    return [
        command
        for phase in ("install", "pre_build", "build", "post_build")
        for command in phases.get(phase, {}).get("commands", [])
    ]


def words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def simple_commands(line: str) -> list[list[str]]:
    """A shell line's simple commands (split at && || ; | and braces), assignments dropped."""
    commands: list[list[str]] = [[]]
    for word in words(line):
        if word in OPERATORS:
            commands.append([])
        elif commands[-1] or not ASSIGNMENT.fullmatch(word):
            commands[-1].append(word)
    return [command for command in commands if command]


MAKE_ENVIRONMENT = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")


def make_recipe_lines(arguments: list[str], distribution: Distribution, tmp: Path) -> list[str]:
    """What `make <arguments>` runs on a fresh checkout of `distribution` (-B: every target is
    out of date, as in a new CodeBuild source directory; -n: printed, not run)."""
    os_release = tmp / f"{distribution.codename}-os-release"
    os_release.write_text(distribution.os_release())
    # A top-level make, as in the build step: under `make test` the inherited MAKELEVEL and
    # MAKEFLAGS would make it print "make[1]: ..." lines among the recipes.
    top_level = {k: v for k, v in os.environ.items() if k not in MAKE_ENVIRONMENT}
    completed = subprocess.run(
        ["make", "-n", "-B", f"OS_RELEASE={os_release}", *arguments],
        cwd=REPO,
        env=top_level,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.replace("\\\n", " ").splitlines()


def executed_commands(spec: dict[str, Any], image: BuildImage, tmp: Path) -> list[list[str]]:
    """Every simple command a buildspec runs, with each `make` call replaced by its recipes."""
    executed = []
    for command in phase_commands(spec):
        for simple in simple_commands(command):
            executed.append(simple)
            if simple[0] == "make":
                for line in make_recipe_lines(simple[1:], image.distribution, tmp):
                    executed.extend(simple_commands(line))
    return executed


def npm_global_bins(command: list[str]) -> set[str]:
    """The programs `npm install -g <package>@<version>` puts on PATH: the package's `bin`
    (read from the copy package.json pins in node_modules, the version the step installs)."""
    if command[:3] != ["npm", "install", "-g"]:
        return set()
    packages = [word.rsplit("@", 1)[0] for word in command[3:] if not word.startswith("-")]
    return {
        name
        for package in packages
        for name in json.loads((REPO / "node_modules" / package / "package.json").read_text())[
            "bin"
        ]
    }


def selected_programs(spec: dict[str, Any], image: BuildImage) -> set[str]:
    selected = spec["phases"]["install"].get("runtime-versions", {})
    return set().union(*(image.runtimes[name][version] for name, version in selected.items()))


def test_every_step_runs_on_an_image_whose_facts_are_known(
    projects: dict[str, dict[str, Any]],
) -> None:
    images = {p["Properties"]["Environment"]["Image"] for p in projects.values()}
    assert images <= set(BUILD_IMAGES)


def test_every_runtime_version_a_step_selects_is_one_its_image_offers(
    projects: dict[str, dict[str, Any]],
) -> None:
    """CodeBuild user guide, "Available runtimes": a version the image does not list fails the
    install phase (runtimes.yml lists what the image installs)."""
    for key, project in projects.items():
        offered = image_of(project).runtimes
        selected = buildspec(project)["phases"]["install"]["runtime-versions"]
        assert {name: version in offered.get(name, {}) for name, version in selected.items()} == {
            "python": True,
            "nodejs": True,
        }, key


def test_the_selected_runtimes_are_ones_the_project_and_the_cdk_tools_support(
    projects: dict[str, dict[str, Any]],
) -> None:
    """pyproject.toml's requires-python; the pinned aws-cdk and cdk-assets packages' engines."""
    requires_python = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "requires-python"
    ]
    engines = {
        package: json.loads((REPO / "node_modules" / package / "package.json").read_text())[
            "engines"
        ]["node"]
        for package in ("aws-cdk", "cdk-assets")
    }
    for project in projects.values():
        selected = buildspec(project)["phases"]["install"]["runtime-versions"]
        assert version_satisfies(selected["python"], requires_python)
        assert all(version_satisfies(selected["nodejs"], engine) for engine in engines.values())


def version_satisfies(version: str, requirement: str) -> bool:
    """`version` (as runtime-versions spells it: 3.11, 22) against a ">=X[.Y[.Z]]" floor."""
    match = re.fullmatch(r">=\s*([\d.]+)", requirement.strip())
    assert match, f"not a floor: {requirement}"

    def parts(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split("."))

    floor = parts(match.group(1))
    return parts(version) + (0,) * (len(floor) - len(parts(version))) >= floor


def test_every_program_a_step_runs_is_on_its_image(
    projects: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    missing: dict[str, set[str]] = {}
    for key, project in projects.items():
        image = image_of(project)
        spec = buildspec(project)
        on_path = image.programs | selected_programs(spec, image)
        for command in executed_commands(spec, image, tmp_path):
            program = command[0]
            if not (
                program in SHELL_BUILTINS
                or program in on_path
                or program.startswith(CREATED_BY_THE_RECIPES)
            ):
                missing.setdefault(key, set()).add(program)
            on_path |= npm_global_bins(command)
    assert missing == {}


def test_every_apt_package_a_step_installs_is_in_its_images_archive_at_that_version(
    projects: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    named, not_offered = set(), set()
    for project in projects.values():
        image = image_of(project)
        offered = {f"{name}={version}" for name, version in image.distribution.packages.items()}
        for command in executed_commands(buildspec(project), image, tmp_path):
            if command[:2] == ["apt-get", "install"]:
                packages = {word for word in command[2:] if not word.startswith("-")}
                named |= packages
                not_offered |= packages - offered
    assert named
    assert not_offered == set()


def test_steps_run_as_root_so_apt_get_can_install(projects: dict[str, dict[str, Any]]) -> None:
    """CodeBuild user guide, "Build specification reference" (run-as): without run-as every
    command runs as root."""
    for key, project in projects.items():
        spec = buildspec(project)
        assert "run-as" not in spec, key
        assert all("run-as" not in phase for phase in spec["phases"].values()), key
