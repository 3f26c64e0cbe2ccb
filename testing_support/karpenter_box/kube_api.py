"""A small client of the box's API server over HTTPS with the admin's client certificate: what
the box's kubelet and instance players read and write many times a second (kubectl would start
a 50 MB binary for each)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from testing_support.cluster_box import pki
from testing_support.cluster_box.control_plane import ControlPlane

TIMEOUT_SECONDS = 30


class ApiError(RuntimeError):
    """An answer other than 2xx; `status` is its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class KubeApi:
    """JSON requests to the box's API server as its admin."""

    def __init__(self, plane: ControlPlane) -> None:
        keys = plane.pki
        self._server = plane.server
        self._context = ssl.create_default_context(cafile=str(keys.ca_cert))
        self._context.load_cert_chain(keys.client_cert(pki.ADMIN), keys.client_key(pki.ADMIN))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self._server}{path}",
            data=data,
            method=method,
            headers={"Content-Type": content_type, "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(
                request, timeout=TIMEOUT_SECONDS, context=self._context
            ) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, error.read().decode(errors="replace")) from error
        return json.loads(text) if text else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def items(self, path: str) -> list[dict[str, Any]]:
        return list(self.get(path)["items"])

    def create(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def merge_patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body, "application/merge-patch+json")

    def delete(self, path: str) -> None:
        try:
            self.request("DELETE", path)
        except ApiError as error:
            if error.status != 404:
                raise
