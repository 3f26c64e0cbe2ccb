"""`python3 -S -I relay.py PORT`: one guest connection to a host service.

QEMU's user-mode network runs this for each TCP connection the guest opens to a `guestfwd`
address (testing_support/node_box/aws.py), with the connection as stdin and stdout; it copies
bytes both ways between them and 127.0.0.1:PORT until the service closes. The standard library
only, started without site: a process per connection must start fast.
"""

from __future__ import annotations

import os
import socket
import sys
import threading

CHUNK = 65536


def _guest_to_service(service: socket.socket) -> None:
    try:
        while data := os.read(0, CHUNK):
            service.sendall(data)
        service.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the service closed first: the main thread ends the relay


def main(port: int) -> None:
    service = socket.create_connection(("127.0.0.1", port), timeout=60)
    service.settimeout(None)
    threading.Thread(target=_guest_to_service, args=(service,), daemon=True).start()
    try:
        while data := service.recv(CHUNK):
            while data:
                data = data[os.write(1, data) :]
    except OSError:
        pass
    finally:
        service.close()


if __name__ == "__main__":
    main(int(sys.argv[1]))
