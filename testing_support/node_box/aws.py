"""The node's AWS side for a node box: IMDSv2 and the EC2 API from
testing_support/multus_emulator.py (moto_server behind its checking, recording proxy), and
EC2's attachments as PCIe hot-plug, so the product's real user-data runs in the box as on a node.

    with running_emulator() as emulator:
        instance_id = emulator.launch_instance(vpc, az, cluster)
        with AwsNode(image, workdir, emulator, instance_id, user_data) as node:
            node.box.wait_until_booted()     # cloud-init ran the bootstrap meanwhile

How the guest reaches the host: the primary NIC's QEMU user-mode network (libslirp) forwards
each TCP connection the guest opens to a `guestfwd` address to a command on the host, here
relay.py, which copies it to a server on 127.0.0.1. libslirp takes such a rule only for an
address inside the guest's network, so that network is AWS_PRIMARY_NET, which holds IMDS's
address.

What it models and what not (a fake is a debt):

- IMDSv2 at the real default address, http://169.254.169.254 (the bootstrap's and nodeadm's
  default; nothing is overridden): a token from PUT /latest/api/token, then the emulator's
  FakeImds for the instance (instance-id, placement, the node role's credentials,
  network/interfaces/macs/ from moto's attachments), plus services/domain and the user-data
  (/latest/user-data, what `nodeadm config check -c imds://user-data` reads). No hop limit
  (the box runs no pods), no IMDSv1 fallback, no other path.
- The EC2 API at http://169.254.169.200 (EC2_ENDPOINT), not the bootstrap's default
  https://ec2.<region>.<services/domain>: the box has no DNS and no TLS for it. The box passes
  MULTUS_EC2_ENDPOINT, the override the script documents for tests, through systemd's manager
  environment (kernel argument systemd.setenv=), which cloud-final.service, and so the
  user-data, inherits. Behind it, the emulator's proxy checks each request's SigV4 signature and
  parameter names and records it; moto plays EC2 (its limits are the emulator's docstring's).
- Attachments (EniPlugger): a thread polls moto for the ENIs attached to the instance at a device
  index of 1 or more and hot-plugs each as a virtio-net NIC with the ENI's MAC through QMP
  (netdev_add, device_add on a free PCIe root port), and unplugs it (device_del) once moto no
  longer shows it attached. Not modelled: EC2's attachment delay (here the poll interval and
  QEMU's hot-plug), the device index (the guest sees PCI slots in plug order), ENA, and any
  network behind the NIC (its backend is a restricted user-mode network without IPv6, as an
  IPv4-only subnet: no VPC router, no router advertisement, no other node; a dual-stack
  network's router advertisements are not modelled).
- The node's primary address is a link-local one of AWS_PRIMARY_NET from QEMU's DHCP, not a VPC
  address; nothing the bootstrap does reads it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from testing_support.multus_emulator import (
    SHUTDOWN_POLL_SECONDS,
    Ec2Emulator,
    ImdsTokens,
    ImdsV2Handler,
)
from testing_support.node_box.image import NodeImage
from testing_support.node_box.machine import Nic, NodeBox

IMDS_ADDRESS = "169.254.169.254"
#: Where the box finds the EC2 API: an address of AWS_PRIMARY_NET that libslirp forwards.
EC2_ADDRESS = "169.254.169.200"
EC2_ENDPOINT = f"http://{EC2_ADDRESS}"
#: The primary NIC's network: libslirp forwards only addresses inside it (IMDS's and EC2's).
AWS_PRIMARY_NET = "169.254.169.0/24"
TOKEN_TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
#: IMDS's services/domain in a commercial Region.
SERVICES_DOMAIN = "amazonaws.com"
RELAY = Path(__file__).with_name("relay.py")
#: A hot-plugged ENI's QEMU backend: an IPv4-only subnet with nothing behind it. Without
#: ipv6=off libslirp sends router advertisements (prefix fec0::/64), which an IPv4-only VPC
#: subnet does not, and the kernel would take an address and a default route from them.
ENI_BACKEND = {"type": "user", "restrict": True, "net": "198.51.100.0/24", "ipv6": False}


def guest_forward(address: str, port: int, host_port: int) -> str:
    """A guestfwd rule: the guest's connections to address:port reach 127.0.0.1:host_port."""
    return f"tcp:{address}:{port}-cmd:{sys.executable} -S -I {RELAY} {host_port}"


class BoxImds:
    """IMDSv2 for one instance of the emulator, on 127.0.0.1 (the box's 169.254.169.254).
    `user_data` may be changed while it serves; `reads` lists every path a GET asked for."""

    def __init__(self, emulator: Ec2Emulator, instance_id: str, user_data: str) -> None:
        self.user_data = user_data
        self.reads: list[str] = []
        self._emulator = emulator
        self._instance_id = instance_id
        imds = self

        class Handler(ImdsV2Handler):
            tokens = ImdsTokens()

            def metadata(self, path: str) -> str | None:
                return imds.metadata(path)

            def do_PUT(self) -> None:
                """As ImdsV2Handler's, with the token's TTL in the answer's header, as IMDS
                sends it: the AWS SDK for Go (nodeadm's IMDS client) reads it, and without it
                falls back to requests without a token, which IMDSv2 refuses (401)."""
                ttl = self.headers.get(TOKEN_TTL_HEADER, "")
                token = self.tokens.issue(ttl) if self.path.endswith("/latest/api/token") else None
                if token is None:
                    self.reply(400, "")
                    return
                payload = token.encode()
                self.send_response(200)
                self.send_header(TOKEN_TTL_HEADER, ttl)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        threading.Thread(
            target=self._server.serve_forever, args=(SHUTDOWN_POLL_SECONDS,), daemon=True
        ).start()

    def metadata(self, path: str) -> str | None:
        path = path.split("?", 1)[0]
        self.reads.append(path)
        if path == "/latest/user-data":
            return self.user_data
        leaf = path.removeprefix("/latest/meta-data/")
        if leaf == path:
            return None
        if leaf == "services/domain":
            return SERVICES_DOMAIN
        return self._emulator.imds.metadata(self._instance_id, leaf)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class EniPlugger:
    """Plays EC2's attachments for a box (see the module's docstring): `plugged` maps each ENI
    ID to its NIC; `log` records each plug and unplug as (ENI ID, "plug" or "unplug").
    `hold(eni_id) -> bool` may keep an attached ENI unplugged for now (a late attachment).
    A failure stops the thread and is kept in `error`."""

    def __init__(
        self,
        box: NodeBox,
        emulator: Ec2Emulator,
        instance_id: str,
        *,
        interval: float = 0.5,
        hold: Callable[[str], bool] = lambda _eni: False,
    ) -> None:
        self.plugged: dict[str, Nic] = {}
        self.log: list[tuple[str, str]] = []
        self.error: Exception | None = None
        self.hold = hold
        self._box = box
        self._ec2 = emulator.ec2
        self._instance_id = instance_id
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=90)

    def attached(self) -> dict[str, str]:
        """ENI ID -> MAC of the instance's ENIs attached at device index 1 or more."""
        answer = self._ec2.describe_network_interfaces(
            Filters=[{"Name": "attachment.instance-id", "Values": [self._instance_id]}]
        )
        return {
            eni["NetworkInterfaceId"]: eni["MacAddress"].lower()
            for eni in answer["NetworkInterfaces"]
            if eni["Attachment"]["DeviceIndex"] >= 1
            and eni["Attachment"].get("Status", "attached") in ("attaching", "attached")
        }

    def sync(self) -> None:
        attached = self.attached()
        for eni_id, mac in attached.items():
            if eni_id not in self.plugged and not self.hold(eni_id):
                self.plugged[eni_id] = self._box.plug_nic(mac, ENI_BACKEND)
                self.log.append((eni_id, "plug"))
        for eni_id in [eni for eni in self.plugged if eni not in attached]:
            self._box.unplug_nic(self.plugged.pop(eni_id))
            self.log.append((eni_id, "unplug"))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            if not self._box.running:
                return
            try:
                self.sync()
            except Exception as error:  # kept for the test; the bootstrap then times out
                if self._box.running:
                    self.error = error
                return


class AwsNode:
    """A node box whose AWS side is the emulator's (see the module's docstring): its IMDS, the
    box with the forwards and MULTUS_EC2_ENDPOINT, and the attachments' plugger. A context
    manager; `start` boots, `stop` ends all three."""

    def __init__(
        self,
        image: NodeImage,
        workdir: Path,
        emulator: Ec2Emulator,
        instance_id: str,
        user_data: str,
        **box_options: Any,
    ) -> None:
        self.emulator = emulator
        self.instance_id = instance_id
        self.imds = BoxImds(emulator, instance_id, user_data)
        proxy_port = int(emulator.proxy.url.rsplit(":", 1)[1])
        self.box = NodeBox(
            image,
            workdir,
            user_data=user_data,
            instance_id=instance_id,
            primary_net=AWS_PRIMARY_NET,
            guest_forwards=[
                guest_forward(IMDS_ADDRESS, 80, self.imds.port),
                guest_forward(EC2_ADDRESS, 80, proxy_port),
            ],
            kernel_arguments=f"systemd.setenv=MULTUS_EC2_ENDPOINT={EC2_ENDPOINT}",
            **box_options,
        )
        self.plugger = EniPlugger(self.box, emulator, instance_id)

    def __enter__(self) -> AwsNode:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        self.box.start()
        self.plugger.start()

    def stop(self) -> None:
        self.plugger.stop()
        self.box.stop()
        self.imds.close()


__all__ = [
    "AWS_PRIMARY_NET",
    "EC2_ENDPOINT",
    "IMDS_ADDRESS",
    "AwsNode",
    "BoxImds",
    "EniPlugger",
    "guest_forward",
]
