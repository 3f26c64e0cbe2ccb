"""What the machines that run `make test` provide, for the tests that check the pipeline's
CodeBuild commands and the Makefile's package pins against them.

Sources, read 2026-12 (update the entry, not the test, when an image or an archive moves on):
- aws/aws-codebuild-docker-images, ubuntu/standard/8.0/Dockerfile and runtimes.yml: the base
  OS, the packages and tools the image installs, the runtime versions `runtime-versions` selects.
- packages.debian.org and packages.ubuntu.com: the containernetworking-plugins version each
  distribution's archive offers (both install the plugins in /usr/lib/cni).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Distribution:
    """An os-release identity (ID, VERSION_CODENAME) and, for each package the Makefile
    installs, the version the distribution's archive offers."""

    os_id: str
    codename: str
    packages: Mapping[str, str]

    def os_release(self) -> str:
        """The os-release lines the Makefile reads."""
        return f"ID={self.os_id}\nVERSION_CODENAME={self.codename}\n"


# packages.debian.org/bookworm/containernetworking-plugins (main); this machine and .ci/run.
DEBIAN_BOOKWORM = Distribution(
    "debian", "bookworm", {"containernetworking-plugins": "1.1.1+ds1-3+b5"}
)
# packages.ubuntu.com/noble-updates/containernetworking-plugins (universe, which the image's
# sources enable: its Dockerfile installs universe packages such as shellcheck).
UBUNTU_NOBLE = Distribution(
    "ubuntu", "noble", {"containernetworking-plugins": "1.1.1+ds1-3ubuntu0.24.04.3"}
)


@dataclass(frozen=True)
class BuildImage:
    """A CodeBuild image: its distribution, the programs on PATH whatever the runtime
    selection, and per runtime and version the programs that selecting it puts on PATH."""

    distribution: Distribution
    programs: frozenset[str]
    runtimes: Mapping[str, Mapping[str, frozenset[str]]]


def _pyenv_python(version: str) -> frozenset[str]:
    """pyenv's shims for a Python it installed (runtimes.yml: `pyenv global`)."""
    return frozenset({"python", "python3", f"python{version}", "pip", "pip3"})


# `n <version>` installs node with its npm and npx (runtimes.yml: nodejs).
_NODE = frozenset({"node", "npm", "npx"})

BUILD_IMAGES = {
    "aws/codebuild/standard:8.0": BuildImage(
        # Dockerfile: FROM public.ecr.aws/ubuntu/ubuntu:24.04
        distribution=UBUNTU_NOBLE,
        # The base image's apt-get, bash and coreutils; make, curl, jq and tar from the core
        # stage's apt-get install; git, built from source in the tools stage.
        programs=frozenset(
            {"apt-get", "bash", "sh", "touch", "rm", "mkdir", "make", "curl", "git", "jq", "tar"}
        ),
        runtimes={
            "python": {
                version: _pyenv_python(version)
                for version in ("3.10", "3.11", "3.12", "3.13", "3.14")
            },
            "nodejs": {version: _NODE for version in ("22", "24")},
        },
    ),
}
