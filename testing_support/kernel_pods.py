"""What a test does from a pod's network namespace in the data-plane tier: a UDP server that
answers with the pod's name and the source it saw, its client, ping and `ip route get`.

The pods themselves are the real chain's (tests/dataplane/real_multus.py: MultusPod): eth0 by
the VPC CNI's stand-in (testing_support/vpc_cni_stand_in.py), net1 by Multus thick running the
NAD's chain.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

from testing_support.kernel_vpc import in_netns, ip

IDENTITY_PORT = 7007

#: Answers each UDP datagram with "<pod name> <the source address it came from>".
_IDENTITY_SERVER = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    f"s.bind(('0.0.0.0', {IDENTITY_PORT}))\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    data, peer = s.recvfrom(64)\n"
    "    s.sendto(f'{sys.argv[1]} {peer[0]}'.encode(), peer)\n"
)
_IDENTITY_CLIENT = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "s.settimeout(float(sys.argv[2]))\n"
    f"s.sendto(b'who', (sys.argv[1], {IDENTITY_PORT}))\n"
    "try:\n"
    "    print(s.recvfrom(64)[0].decode())\n"
    "except TimeoutError:\n"
    "    sys.exit(1)\n"
)


@dataclass
class PodNamespace:
    """A pod's network namespace (named `name`) and what a test does from it."""

    name: str
    server: subprocess.Popen[str] | None = field(default=None, kw_only=True)

    def serve_identity(self) -> None:
        self.server = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                self.name,
                "python3",
                "-I",
                "-S",
                "-c",
                _IDENTITY_SERVER,
                self.name,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.server.stdout is not None
        if self.server.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{self.name}: the identity server did not start")

    def ask(self, address: str, timeout: float = 3) -> tuple[str, str] | None:
        """Which pod answers at `address` over UDP, and the source it saw; None if nobody."""
        asked = in_netns(
            self.name,
            "python3",
            "-I",
            "-S",
            "-c",
            _IDENTITY_CLIENT,
            address,
            str(timeout),
            check=False,
            timeout=timeout + 30,
        )
        if asked.returncode != 0:
            return None
        pod, source = asked.stdout.split()
        return pod, source

    def ping(self, address: str, source: str = "") -> bool:
        return ping_from(self.name, address, source)

    def route_get(self, *args: str) -> str:
        return ip("-n", self.name, "route", "get", *args).stdout.strip()

    def stop_server(self) -> None:
        if self.server is not None:
            self.server.kill()
            self.server.wait(timeout=10)


def ping_from(namespace: str, address: str, source: str = "", count: int = 2) -> bool:
    """Whether `count` echo requests got replies (from `source`, when given: a bound socket)."""
    bound = ["-I", source] if source else []
    ping = ["ping", "-c", str(count), "-W", "2", "-i", "0.3", *bound, address]
    return in_netns(namespace, *ping, check=False).returncode == 0
