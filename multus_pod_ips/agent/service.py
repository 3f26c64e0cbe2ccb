"""Start-up, serving, the periodic reconcile and the command line."""

from __future__ import annotations

import itertools
import logging
import os
import random
import signal
import sys
import threading
import time
import urllib.error
from collections.abc import Callable
from typing import Protocol

from .config import AgentConfig
from .ec2_query import Ec2Client
from .imds import InstanceMetadata
from .metrics import AgentMetrics, MetricsServer
from .node_agent import Agent
from .socket_server import _Server

LOG = logging.getLogger("multus-pod-ips")


def serve(config: AgentConfig) -> None:
    imds = InstanceMetadata(os.environ.get("MULTUS_IMDS_URL", "http://169.254.169.254"))
    region = read_at_start(imds, "placement/region")
    endpoint = os.environ.get("MULTUS_EC2_ENDPOINT") or (
        f"https://ec2.{region}.{read_at_start(imds, 'services/domain')}"
    )
    metrics = AgentMetrics()
    agent = Agent(config, imds, Ec2Client(imds, region, endpoint, metrics=metrics), metrics)
    for stale in (config.ready_marker, config.socket_path):
        if os.path.lexists(stale):
            os.remove(stale)
    # Served from the start: a node waiting for its bootstrap is worth seeing too.
    metrics_server = (
        MetricsServer(("", config.metrics_port), metrics) if config.metrics_port else None
    )
    if metrics_server:
        threading.Thread(target=metrics_server.serve_forever, name="metrics", daemon=True).start()
    agent.start()
    os.makedirs(os.path.dirname(config.socket_path), exist_ok=True)
    server = _Server(config.socket_path, agent)
    os.chmod(config.socket_path, 0o600)  # the plugin runs as root on the host
    threading.Thread(target=server.serve_forever, name="cni-socket", daemon=True).start()
    while not agent.reconcile_all(timeout=120):
        LOG.warning("first reconcile incomplete; retrying")
    with open(config.ready_marker, "w", encoding="utf-8") as marker:
        marker.write(f"{os.getpid()}\n")
    LOG.info("ready: serving %s", config.socket_path)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(jittered(config.reconcile_seconds)):
        agent.reconcile_all(timeout=config.reconcile_seconds)
    server.server_close()
    if metrics_server:
        metrics_server.server_close()


#: Waits between IMDS attempts at start: doubling from the first, then the last one repeated.
START_RETRY_SECONDS = (1.0, 2.0, 4.0, 8.0)


class MetadataSource(Protocol):
    """What read_at_start needs of the IMDS client (imds.InstanceMetadata)."""

    def get(self, path: str) -> str: ...


def read_at_start(
    imds: MetadataSource, path: str, sleep: Callable[[float], None] = time.sleep
) -> str:
    """An IMDS value the agent cannot start without, asked until IMDS answers (an HTTP error
    is an answer: it ends the agent, as before). A node's IMDS
    can be slow to answer while the node boots; exiting would put the pod into kubelet's
    crash-loop back-off (up to 5 minutes between starts), which the node's startup taint
    would wait out."""
    for attempt in itertools.count():
        try:
            return imds.get(path)
        except urllib.error.HTTPError:
            raise  # IMDS answered, and refused: asking again changes nothing
        except OSError as error:  # no answer: URLError (refused, unreachable), timeouts
            wait = START_RETRY_SECONDS[min(attempt, len(START_RETRY_SECONDS) - 1)]
            LOG.warning("IMDS %s: %s; asking again in %.0f s", path, error, wait)
            sleep(wait)
    raise AssertionError("unreachable")  # itertools.count() never ends


#: Each wait between reconciles is the period times a factor drawn from this range.
JITTER = (0.5, 1.5)


def jittered(period: float) -> float:
    """The wait before the next periodic reconcile: `period` on average, drawn uniformly from
    half to one and a half times it, so that nodes started together (a scale-out) drift apart
    instead of reconciling, and calling EC2 when they must, in the same second."""
    return period * random.uniform(*JITTER)


def main(argv: list[str]) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(threadName)s %(message)s"
    )
    if len(argv) != 2:
        print(f"usage: {argv[0]} CONFIG.json", file=sys.stderr)
        return 2
    serve(AgentConfig.load(argv[1]))
    return 0
