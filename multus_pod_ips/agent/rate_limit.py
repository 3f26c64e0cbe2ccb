"""Client-side rate limit of the agent's EC2 calls, as the AWS SDKs' adaptive retry mode.

EC2 throttles each API per account and Region with a token bucket that the VPC CNI, Karpenter
and every other client of the account share (EC2 developer guide, "Request throttling for the
Amazon EC2 API"). Retrying on RequestLimitExceeded with backoff alone keeps every node of a
fleet sending as soon as its own backoff allows; the adaptive mode (AWS SDKs and Tools
Reference Guide, "Retry behavior": adaptive) also slows the client down: a local token bucket
gates every attempt once a throttling answer came back, its rate drops to 70 % of the rate the
client was sending at when throttled, and recovers along a CUBIC curve while calls succeed.

The algorithm and its constants are botocore's (boto/botocore, botocore/retries/adaptive.py
ClientRateLimiter and RateClocker, bucket.py TokenBucket, throttling.py CubicCalculator): beta
0.7, scale 0.4, a minimum rate of 0.5 requests/s, the send rate measured per half second and
smoothed by 0.8, the new rate at most twice the measured one. One limiter per agent (one EC2
client per node), shared by its ENI workers.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

BETA = 0.7  # the rate after a throttle, as a share of the rate the client was sending at
SCALE = 0.4  # CUBIC's scale constant
MIN_RATE = 0.5  # requests per second: the limiter never goes below it
SMOOTHING = 0.8  # weight of the newest half second in the measured send rate
MEASURE_SECONDS = 0.5
MAX_RATE_ADJUST = 2.0  # the new rate is at most this times the measured send rate


class AdaptiveRateLimiter:
    """Gates EC2 attempts once EC2 has throttled this client; see the module docstring.

    `acquire` before each attempt, `record` with each answer. Until the first throttling answer
    the limiter lets everything through (as the SDKs do: the mode turns itself on)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._condition = threading.Condition()
        self.enabled = False
        # token bucket
        self.rate = MIN_RATE  # tokens (requests) per second
        self._capacity = 0.0
        self._refilled_at: float | None = None
        # measured send rate
        self.measured_rate = 0.0
        self._interval = float(math.floor(clock()))
        self._counted = 0
        # CUBIC
        self._rate_at_throttle = 0.0  # W_max
        self._throttled_at = clock()
        self._recovery_seconds = 0.0  # K: when the curve is back at W_max

    def acquire(self, deadline: float) -> bool:
        """Takes a token, waiting for one at most until `deadline` (the clock's time);
        False when none comes in time."""
        with self._condition:
            while self.enabled:
                self._refill()
                if self._capacity >= 1:
                    self._capacity -= 1
                    return True
                wait = (1 - self._capacity) / self.rate
                if self._clock() + wait > deadline:
                    return False
                self._condition.wait(wait)
            return True

    def record(self, throttled: bool) -> None:
        """One answer from EC2 (any answer, error or not): adjusts the rate."""
        with self._condition:
            now = self._clock()
            measured = self._measure(now)
            if throttled:
                sending = min(measured, self.rate) if self.enabled else measured
                self._rate_at_throttle = sending
                self._recovery_seconds = (sending * (1 - BETA) / SCALE) ** (1 / 3)
                self._throttled_at = now
                new_rate = sending * BETA
                self.enabled = True
            else:
                elapsed = now - self._throttled_at
                new_rate = SCALE * (elapsed - self._recovery_seconds) ** 3 + self._rate_at_throttle
            self._set_rate(min(new_rate, MAX_RATE_ADJUST * measured))

    def _measure(self, now: float) -> float:
        self._counted += 1
        interval = math.floor(now / MEASURE_SECONDS) * MEASURE_SECONDS
        if interval > self._interval:
            current = self._counted / (interval - self._interval)
            self.measured_rate = current * SMOOTHING + self.measured_rate * (1 - SMOOTHING)
            self._counted = 0
            self._interval = interval
        return self.measured_rate

    def _set_rate(self, rate: float) -> None:
        self._refill()  # tokens earned so far at the old rate
        self.rate = max(rate, MIN_RATE)
        self._capacity = min(self._capacity, max(rate, 1.0))
        self._condition.notify_all()

    def _refill(self) -> None:
        now = self._clock()
        if self._refilled_at is not None:
            earned = (now - self._refilled_at) * self.rate
            self._capacity = min(max(self.rate, 1.0), self._capacity + earned)
        self._refilled_at = now
