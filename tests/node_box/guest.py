"""What the node box tests read off a guest: its links as iproute2 reports them, a device's
udev properties, and a bounded wait for either to change (hot-plug and renames are events)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

from testing_support.node_box import NodeBox

T = TypeVar("T")


def links(box: NodeBox) -> dict[str, dict[str, Any]]:
    """`ip -j link show` in the guest, by interface name."""
    return {link["ifname"]: link for link in json.loads(box.sh("ip -j link show"))}


def link_with_mac(box: NodeBox, mac: str) -> dict[str, Any] | None:
    found = [link for link in links(box).values() if link.get("address") == mac]
    return found[0] if found else None


def udev_properties(box: NodeBox, ifname: str) -> dict[str, str]:
    """udev's database entry of the interface (`udevadm info --query=property`)."""
    text = box.sh(f"udevadm info --query=property --path=/sys/class/net/{ifname}")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def wait_until(check: Callable[[], T | None], *, timeout: float, what: str) -> T:
    """check()'s first truthy value, polled each second; AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(1)
