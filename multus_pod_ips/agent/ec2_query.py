"""EC2 Query API client: SigV4-signed POSTs with the instance profile's credentials, retried
with backoff, every attempt gated by the adaptive client-side rate limit (rate_limit.py)."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import logging
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass

from .imds import InstanceMetadata
from .metrics import AgentMetrics
from .rate_limit import AdaptiveRateLimiter

LOG = logging.getLogger("multus-pod-ips")

EC2_API_VERSION = "2016-11-15"
# Throttling codes; server errors (InternalError, Unavailable, ...) come with a 5xx status and
# are retried by status (EC2 API reference, "Error codes").
RETRYABLE_EC2_CODES = frozenset(
    {"RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled"}
)
#: The code of a call the client-side rate limit held back until its deadline (never sent).
CLIENT_RATE_LIMITED = "ClientRateLimited"


class Ec2Error(Exception):
    """An EC2 API error: its code, message and whether a retry may succeed."""

    def __init__(self, code: str, message: str, retryable: bool) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable


@dataclass(frozen=True)
class Credentials:
    """The node role's temporary credentials from IMDS and when they expire."""

    access_key: str
    secret_key: str
    token: str
    expires_at: float  # time.time()


class Ec2Client:
    """EC2 Query API over HTTPS, SigV4-signed with the instance profile's credentials."""

    def __init__(
        self,
        imds: InstanceMetadata,
        region: str,
        endpoint: str,
        limiter: AdaptiveRateLimiter | None = None,
        metrics: AgentMetrics | None = None,
    ) -> None:
        self._imds = imds
        self._region = region
        self._endpoint = endpoint.rstrip("/") + "/"
        self._credentials: Credentials | None = None
        self._lock = threading.Lock()
        self.limiter = limiter or AdaptiveRateLimiter()
        self.metrics = metrics or AgentMetrics()
        self.metrics.rate_limit = lambda: self.limiter.rate if self.limiter.enabled else 0.0

    def call(self, action: str, params: dict[str, str], deadline: float) -> ElementTree.Element:
        """One action, retried on throttling/5xx/connection errors until `deadline`
        (time.monotonic()): delays drawn uniformly from [0, min(10 s, 0.1 s * 2^attempt)).
        Each attempt first waits for the rate limiter; an attempt it holds back past the
        deadline is not sent: the call fails with the previous attempt's error, or with
        CLIENT_RATE_LIMITED (retryable) when there was none. A call that fails counts once in
        multus_pod_ips_ec2_failures_total, with the error it ends with."""
        try:
            return self._call_with_retries(action, params, deadline)
        except Ec2Error as error:
            self.metrics.ec2_failures.inc(action, error.code)
            raise

    def _call_with_retries(
        self, action: str, params: dict[str, str], deadline: float
    ) -> ElementTree.Element:
        attempt = 0
        last_error: Ec2Error | None = None
        while True:
            attempt += 1
            if not self.limiter.acquire(deadline):
                raise last_error or Ec2Error(
                    CLIENT_RATE_LIMITED,
                    f"{action} not sent: EC2 throttled this node, and the client-side rate "
                    f"limit ({self.limiter.rate:.2f} requests/s) has no token before the deadline",
                    retryable=True,
                )
            self.metrics.ec2_requests.inc(action)
            try:
                answer = self._call_once(action, params)
            except Ec2Error as error:
                throttled = error.code in RETRYABLE_EC2_CODES
                self.limiter.record(throttled)
                self.metrics.ec2_errors.inc(action, error.code)
                if throttled:
                    self.metrics.ec2_throttles.inc(action)
                if not error.retryable:
                    raise
                last_error = error
                delay = random.uniform(0, min(10.0, 0.1 * 2**attempt))
                if time.monotonic() + delay > deadline:
                    raise
                LOG.info("%s: %s; retry %d in %.2f s", action, error.code, attempt, delay)
                time.sleep(delay)
            else:
                self.limiter.record(throttled=False)
                return answer

    def _call_once(self, action: str, params: dict[str, str]) -> ElementTree.Element:
        body = urllib.parse.urlencode({"Action": action, "Version": EC2_API_VERSION, **params})
        request = urllib.request.Request(
            self._endpoint, data=body.encode(), headers=self._signed_headers(body), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                return ElementTree.fromstring(response.read())
        except urllib.error.HTTPError as error:
            payload = error.read()
            code, message = _error_code(payload) or (f"HTTP {error.code}", "")
            retryable = error.code >= 500 or code in RETRYABLE_EC2_CODES
            raise Ec2Error(code, message, retryable) from None
        except (urllib.error.URLError, OSError) as error:
            raise Ec2Error("ConnectionError", str(error), retryable=True) from None

    def _signed_headers(self, body: str) -> dict[str, str]:
        credentials = self._valid_credentials()
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        host = urllib.parse.urlsplit(self._endpoint).netloc
        headers = {
            "content-type": "application/x-www-form-urlencoded; charset=utf-8",
            "host": host,
            "x-amz-date": amz_date,
            "x-amz-security-token": credentials.token,
        }
        signed = ";".join(sorted(headers))
        canonical = "\n".join(
            [
                "POST",
                "/",
                "",
                "".join(f"{name}:{headers[name]}\n" for name in sorted(headers)),
                signed,
                hashlib.sha256(body.encode()).hexdigest(),
            ]
        )
        scope = f"{amz_date[:8]}/{self._region}/ec2/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = ("AWS4" + credentials.secret_key).encode()
        for part in (amz_date[:8], self._region, "ec2", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed}, Signature={signature}"
        )
        del headers["host"]  # urllib sends it
        return headers

    def _valid_credentials(self) -> Credentials:
        with self._lock:
            if self._credentials is None or time.time() > self._credentials.expires_at - 300:
                role = self._imds.get("iam/security-credentials/").splitlines()[0]
                document = json.loads(self._imds.get(f"iam/security-credentials/{role}"))
                expires = datetime.datetime.strptime(document["Expiration"], "%Y-%m-%dT%H:%M:%SZ")
                self._credentials = Credentials(
                    document["AccessKeyId"],
                    document["SecretAccessKey"],
                    document["Token"],
                    expires.replace(tzinfo=datetime.timezone.utc).timestamp(),
                )
            return self._credentials


def local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _error_code(payload: bytes) -> tuple[str, str] | None:
    try:
        root = ElementTree.fromstring(payload)
    except ElementTree.ParseError:
        return None
    values = {local_name(element.tag): (element.text or "") for element in root.iter()}
    return (values["Code"], values.get("Message", "")) if "Code" in values else None


def texts(root: ElementTree.Element, name: str) -> list[str]:
    return [element.text or "" for element in root.iter() if local_name(element.tag) == name]
