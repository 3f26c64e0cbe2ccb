"""The agent's periodic work is jittered: nodes started together drift apart."""

from __future__ import annotations

import random
import urllib.error
from email.message import Message

import pytest

from multus_pod_ips.agent.service import jittered, read_at_start


@pytest.mark.parametrize("end", [0, 1])
def test_a_wait_lies_between_half_and_one_and_a_half_periods(
    monkeypatch: pytest.MonkeyPatch, end: int
) -> None:
    monkeypatch.setattr(random, "uniform", lambda low, high: (low, high)[end])

    assert jittered(60.0) == (30.0, 90.0)[end]


def test_nodes_started_together_spread_their_reconciles_over_the_period() -> None:
    # 100 nodes, one wait each: within [30, 90] s for a 60 s period, spread out, mean near 60.
    random.seed(24)
    waits = [jittered(60.0) for _ in range(100)]

    assert all(30.0 <= wait <= 90.0 for wait in waits)
    assert max(waits) - min(waits) > 45.0
    assert 54.0 < sum(waits) / len(waits) < 66.0
    assert len({round(wait) for wait in waits}) > 40  # not in lockstep: many distinct seconds


class SlowToStartImds:
    """Answers `path` after `failures` timeouts (an IMDS still busy while the node boots)."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.asked = 0

    def get(self, path: str) -> str:
        self.asked += 1
        if self.asked <= self.failures:
            raise TimeoutError("timed out")
        return f"value of {path}"


def test_the_agent_asks_imds_again_at_start_instead_of_exiting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    imds = SlowToStartImds(failures=5)
    waits: list[float] = []

    value = read_at_start(imds, "placement/region", sleep=waits.append)

    assert value == "value of placement/region"
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0]  # doubling, then capped
    assert caplog.text.count("IMDS placement/region: timed out") == 5


def test_an_answering_imds_is_asked_once() -> None:
    imds = SlowToStartImds(failures=0)

    def no_wait(seconds: float) -> None:
        pytest.fail(f"waited {seconds} s")

    assert read_at_start(imds, "services/domain", sleep=no_wait) == "value of services/domain"
    assert imds.asked == 1


def test_an_imds_that_refuses_ends_the_start() -> None:
    class RefusingImds:
        def get(self, path: str) -> str:
            raise urllib.error.HTTPError(path, 401, "Unauthorized", Message(), None)

    with pytest.raises(urllib.error.HTTPError):
        read_at_start(RefusingImds(), "placement/region", sleep=lambda _: pytest.fail("retried"))
