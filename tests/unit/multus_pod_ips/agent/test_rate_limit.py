"""The agent's client-side rate limit of EC2 calls, as the AWS SDKs' adaptive retry mode.

Source: boto/botocore (commit 0e6e2404), botocore/retries/adaptive.py (ClientRateLimiter: the
bucket turns on with the first throttling answer; the new rate is min(CUBIC's rate, 2 x the
measured send rate); RateClocker: send rate per 0.5 s, smoothed by 0.8), bucket.py (TokenBucket:
minimum rate 0.5/s, capacity max(rate, 1)), throttling.py (CubicCalculator: beta 0.7, scale
0.4, K = cbrt(W_max * (1 - beta) / scale), rate = scale * (t - K)^3 + W_max). Expected figures
are worked out by hand from those formulas in each test.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from multus_pod_ips.agent.ec2_query import CLIENT_RATE_LIMITED, Ec2Client, Ec2Error
from multus_pod_ips.agent.imds import InstanceMetadata
from multus_pod_ips.agent.rate_limit import AdaptiveRateLimiter
from testing_support.multus_emulator import ec2_error_xml
from tests.unit.multus_pod_ips.fakes import FakeAws


class Clock:
    """A clock the test sets."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def answers(
    limiter: AdaptiveRateLimiter, clock: Clock, times: list[float], throttled_last: bool
) -> None:
    for index, at in enumerate(times):
        clock.now = at
        limiter.record(throttled=throttled_last and index == len(times) - 1)


def test_until_ec2_throttles_the_limiter_holds_nothing_back() -> None:
    clock = Clock()
    limiter = AdaptiveRateLimiter(clock)
    answers(limiter, clock, [0.1 * n for n in range(1, 50)], throttled_last=False)

    assert not limiter.enabled
    assert all(limiter.acquire(deadline=clock.now) for _ in range(1000))


def test_a_throttle_drops_the_rate_to_70_percent_of_the_measured_send_rate() -> None:
    # One answer per half second: 2 requests/s in each interval; smoothed by 0.8 from 0:
    # 1.6, then 1.6 + 0.2 * 1.6 = 1.92, 1.6 + 0.2 * 1.92 = 1.984, 1.6 + 0.2 * 1.984 = 1.9968.
    clock = Clock()
    limiter = AdaptiveRateLimiter(clock)
    answers(limiter, clock, [0.5, 1.0, 1.5, 2.0], throttled_last=True)

    assert limiter.enabled
    assert limiter.measured_rate == pytest.approx(1.9968)
    assert limiter.rate == pytest.approx(0.7 * 1.9968)


def test_after_a_throttle_the_rate_climbs_back_along_cubic() -> None:
    clock = Clock()
    limiter = AdaptiveRateLimiter(clock)
    answers(limiter, clock, [0.5, 1.0, 1.5, 2.0], throttled_last=True)
    w_max = 1.9968
    k = (w_max * 0.3 / 0.4) ** (1 / 3)  # 1.1442 s

    # Halfway to K the curve is below W_max: 0.4 * (-K/2)^3 + W_max.
    clock.now = 2.0 + k / 2
    limiter.record(throttled=False)
    assert limiter.rate == pytest.approx(0.4 * (-k / 2) ** 3 + w_max)
    # At K it is back at W_max (2 x the measured rate, 2 x 1.99744, does not cap it).
    clock.now = 2.0 + k
    limiter.record(throttled=False)
    assert limiter.rate == pytest.approx(w_max)


def test_the_rate_never_drops_below_half_a_request_per_second() -> None:
    clock = Clock()
    limiter = AdaptiveRateLimiter(clock)
    answers(limiter, clock, [10.0, 20.0, 30.0], throttled_last=True)  # 0.1/s measured

    assert limiter.rate == 0.5


def test_once_throttled_at_the_minimum_rate_one_attempt_goes_every_two_seconds() -> None:
    # Throttled before any rate was measured: rate max(0 * 0.7, 0.5) = 0.5 tokens/s, bucket
    # capacity max(0, 1) = 1, empty.
    clock = Clock()
    limiter = AdaptiveRateLimiter(clock)
    limiter.record(throttled=True)

    assert limiter.acquire(deadline=0.0) is False
    clock.now = 1.999
    assert limiter.acquire(deadline=clock.now) is False
    clock.now = 2.0
    assert limiter.acquire(deadline=clock.now) is True
    assert limiter.acquire(deadline=clock.now) is False


def test_a_waiting_attempt_gets_its_token_when_it_refills() -> None:
    limiter = AdaptiveRateLimiter()
    for _ in range(3):
        limiter.record(throttled=True)  # measured rate 0: the minimum rate, 0.5/s
    started = time.monotonic()

    assert limiter.acquire(deadline=started + 5) is True
    assert 1.5 <= time.monotonic() - started <= 2.5  # one token at 0.5/s: 2 s


@pytest.fixture
def fake_aws() -> Iterator[FakeAws]:
    fake = FakeAws()
    yield fake
    fake.close()


def test_the_ec2_client_sends_no_attempt_the_limiter_holds_back(fake_aws: FakeAws) -> None:
    limiter = AdaptiveRateLimiter()
    client = Ec2Client(InstanceMetadata(fake_aws.url), "us-west-2", fake_aws.url, limiter)
    fake_aws.ec2_answers = [(400, ec2_error_xml("RequestLimitExceeded", "slow down"))]

    with pytest.raises(Ec2Error) as raised:
        client.call("DescribeNetworkInterfaces", {}, deadline=time.monotonic() + 0.5)

    assert limiter.enabled
    # The throttled attempt went out; its retry found no token (0.5/s) within 0.5 s and was not
    # sent: the call fails with EC2's answer.
    assert (raised.value.code, raised.value.retryable) == ("RequestLimitExceeded", True)
    assert fake_aws.ec2_actions() == ["DescribeNetworkInterfaces"]


def test_a_call_the_limiter_holds_back_from_the_start_is_client_rate_limited(
    fake_aws: FakeAws,
) -> None:
    limiter = AdaptiveRateLimiter()
    limiter.record(throttled=True)  # an earlier call was throttled: 0.5/s, empty bucket
    client = Ec2Client(InstanceMetadata(fake_aws.url), "us-west-2", fake_aws.url, limiter)

    with pytest.raises(Ec2Error) as raised:
        client.call("DescribeNetworkInterfaces", {}, deadline=time.monotonic() + 0.5)

    assert (raised.value.code, raised.value.retryable) == (CLIENT_RATE_LIMITED, True)
    assert fake_aws.ec2_actions() == []


def test_the_limiter_is_shared_by_concurrent_callers() -> None:
    limiter = AdaptiveRateLimiter()
    for _ in range(3):
        limiter.record(throttled=True)
    got: list[bool] = []
    deadline = time.monotonic() + 1.0
    threads = [
        threading.Thread(target=lambda: got.append(limiter.acquire(deadline))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)

    # 0.5 tokens/s for 1 s: at most one of the four callers is let through.
    assert got.count(True) <= 1
