"""Pod attachments on this node, one JSON file each."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from dataclasses import dataclass

LOG = logging.getLogger("multus-pod-ips")


@dataclass(frozen=True)
class PodAttachment:
    """One pod interface on a Multus network, as the CNI plugin reported it. fixed: its
    addresses are fixed ones (a static NAD), which belong to one pod at a time."""

    container_id: str
    ifname: str
    netns: str
    interface: str
    ips: tuple[str, ...]
    pod: str = ""
    fixed: bool = False

    @property
    def key(self) -> str:
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in self.container_id) + (
            "_" + "".join(c if c.isalnum() else "_" for c in self.ifname)
        )


class RecordStore:
    """Pod attachments on this node, one JSON file each (survives agent restarts)."""

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._lock = threading.Lock()
        os.makedirs(directory, exist_ok=True)
        self._records: dict[str, PodAttachment] = {}
        for name in os.listdir(directory):
            if name.endswith(".json"):
                try:
                    with open(os.path.join(directory, name), encoding="utf-8") as handle:
                        data = json.load(handle)
                    record = PodAttachment(**{**data, "ips": tuple(data["ips"])})
                    self._records[record.key] = record
                except (OSError, ValueError, TypeError, KeyError):
                    LOG.warning("ignoring unreadable record %s", name)

    def put(self, record: PodAttachment) -> None:
        path = os.path.join(self._directory, record.key + ".json")
        with self._lock:
            with open(path + ".tmp", "w", encoding="utf-8") as handle:
                json.dump({**record.__dict__, "ips": list(record.ips)}, handle)
            os.replace(path + ".tmp", path)
            self._records[record.key] = record

    def get(self, key: str) -> PodAttachment | None:
        with self._lock:
            return self._records.get(key)

    def remove(self, key: str) -> None:
        with self._lock:
            self._records.pop(key, None)
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self._directory, key + ".json"))

    def all(self) -> list[PodAttachment]:
        with self._lock:
            return list(self._records.values())
