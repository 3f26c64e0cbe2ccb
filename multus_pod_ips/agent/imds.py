"""IMDSv2 client."""

from __future__ import annotations

import threading
import time
import urllib.request


class InstanceMetadata:
    """IMDSv2 client (token refreshed before it expires)."""

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url.rstrip("/")
        self._token = ""
        self._token_expires = 0.0
        self._lock = threading.Lock()

    def get(self, path: str) -> str:
        request = urllib.request.Request(
            f"{self._base_url}/latest/meta-data/{path}",
            headers={"X-aws-ec2-metadata-token": self._current_token()},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            return str(response.read().decode())

    def _current_token(self) -> str:
        with self._lock:
            if time.monotonic() > self._token_expires:
                request = urllib.request.Request(
                    f"{self._base_url}/latest/api/token",
                    method="PUT",
                    headers={"X-aws-ec2-metadata-token-ttl-seconds": "21600"},
                )
                with urllib.request.urlopen(request, timeout=5) as response:
                    self._token = response.read().decode()
                self._token_expires = time.monotonic() + 21000
            return self._token
