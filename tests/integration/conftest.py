"""Fixtures of the integration tests: one EC2 emulator (moto_server behind our proxy, fake IMDS)
per module, so a module's calls and leftovers never reach another's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testing_support.multus_emulator import Ec2Emulator, running_emulator


@pytest.fixture(scope="module")
def emulator() -> Iterator[Ec2Emulator]:
    with running_emulator() as started:
        yield started
