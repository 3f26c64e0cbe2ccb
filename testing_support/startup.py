"""Waiting for a process we started to answer on its URL.

Each attempt has its own timeout and any failure to get an answer (refused, reset, a timeout
while connecting or reading, an HTTP error status) is retried until the deadline: on a loaded
machine a server may take seconds to accept or to answer its first request, which a single
short attempt reads as dead. A process that exits ends the wait at once, with its reason.
"""

from __future__ import annotations

import ssl
import time
import urllib.request
from collections.abc import Callable

ATTEMPT_SECONDS = 5.0
PAUSE_SECONDS = 0.2


def wait_until_answering(
    url: str,
    *,
    timeout_seconds: float,
    exit_reason: Callable[[], str | None],
    context: ssl.SSLContext | None = None,
) -> None:
    """Until GET `url` answers 2xx; RuntimeError naming the URL once `timeout_seconds` have
    passed, or as soon as `exit_reason` returns why the process is gone."""
    deadline = time.monotonic() + timeout_seconds
    last_error = "no attempt"
    while True:
        reason = exit_reason()
        if reason is not None:
            raise RuntimeError(f"{url}: {reason}")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RuntimeError(f"{url} did not answer within {timeout_seconds:g} s ({last_error})")
        try:
            with urllib.request.urlopen(
                url, timeout=min(ATTEMPT_SECONDS, remaining), context=context
            ) as response:
                response.read()
                return
        except OSError as error:  # URLError, HTTPError, timeouts and resets are all OSErrors
            last_error = f"{type(error).__name__}: {error}"
        time.sleep(min(PAUSE_SECONDS, max(deadline - time.monotonic(), 0)))
