"""The data-plane tier asks the kernel VM again only when its package check missed a static
busybox that is there (tests/dataplane/conftest.py: the check's pipe can die of SIGPIPE under
load); any other missing package, or a busybox that is really not static, is reported at once."""

from __future__ import annotations

import pytest

from tests.dataplane import conftest as dataplane

MISSING = "kernel-vm: missing Debian packages: {} (apt-get install -y --no-install-recommends {})"


@pytest.mark.parametrize(
    ("returncode", "output", "busybox_there", "ask_again"),
    [
        (125, MISSING.format("busybox-static", "busybox-static"), True, True),
        (125, MISSING.format("busybox-static", "busybox-static"), False, False),
        (125, MISSING.format("qemu-system-x86 busybox-static", "..."), True, False),
        (125, "kernel-vm: no kernel", True, False),
        (1, MISSING.format("busybox-static", "busybox-static"), True, False),
    ],
)
def test_only_a_spurious_busybox_miss_is_asked_again(
    monkeypatch: pytest.MonkeyPatch,
    returncode: int,
    output: str,
    busybox_there: bool,
    ask_again: bool,
) -> None:
    monkeypatch.setattr(dataplane, "_static_busybox_with_insmod", lambda: busybox_there)
    assert dataplane._spurious_busybox_miss(returncode, output) is ask_again
