"""Sending one notification to one notifier over HTTP: the request each kind expects, a few
quick retries with backoff for transient failures (tenacity), and the outcome as a value.
Error texts name the failure, never the URL (a Slack URL is a secret) or a secret.

Secret references resolve only where the secret policy allows, and the URL is checked against
the egress policy before sending (a URL held behind url_secret_ref could not be checked when
the notifier was created); the client itself refuses denied addresses at connect time. Such
refusals fail the delivery at once: retrying cannot help until the operator's settings
change.

A receiver's answer is never trusted to be small: the request asks for the identity encoding,
the answer is read raw (never decompressed, whatever Content-Encoding it claims) up to
`max_response_bytes`, and the connection is then closed with the rest unread. The outcome is
the status code alone; nothing of the body is kept (it could echo the URL's secret)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_result,
    stop_after_attempt,
    wait_exponential,
)

from sustain.probes.client.egress_connect import egress_denial
from sustain.probes.client.secrets import (
    SecretRefusedError,
    SecretUnavailableError,
    resolve_secret,
)
from sustain.service.alerting import messages
from sustain.service.domain.reach import EGRESS_SETTINGS, Reach
from sustain.service.strict_json import dumps

RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
QUICK_TRIES = 3
MAX_RESPONSE_BYTES = 64 * 1024
"""Default raw bytes of an answer read (SUSTAIN_NOTIFY_MAX_RESPONSE_BYTES)."""


@dataclass(frozen=True, slots=True)
class Target:
    """A notifier, resolved for sending (secrets read now, never stored)."""

    name: str
    kind: str
    url: str
    signing_secret: str | None
    timeout_s: float


@dataclass(frozen=True, slots=True)
class Outcome:
    delivered: bool
    status: int | None = None
    error: str | None = None
    retryable: bool = False
    """Whether a later attempt may succeed (connection errors, timeouts, 5xx, 408, 429)."""


def resolve(name: str, kind: str, url: str | None, url_secret_ref: str | None,
            signing_secret_ref: str | None, timeout_s: float, reach: Reach
            ) -> Target | Outcome:
    """The target to send to, or an outcome naming the secret that is missing (retryable) or
    that the policy refuses, or saying the URL may not be reached (final). An error about a
    URL held behind url_secret_ref names the reference, never the URL or its host."""
    try:
        real_url = url if url is not None else resolve_secret(url_secret_ref or "",
                                                              reach.secrets)
        secret = None if signing_secret_ref is None \
            else resolve_secret(signing_secret_ref, reach.secrets)
    except SecretRefusedError as exc:
        return Outcome(False, error=str(exc))
    except SecretUnavailableError as exc:
        return Outcome(False, error=str(exc), retryable=True)
    reason = reach.egress.check_url(real_url)
    if reason is not None:
        where = reason if url is not None else f"the URL of {url_secret_ref} is not allowed"
        return Outcome(False, error=f"egress denied: {where} ({EGRESS_SETTINGS})")
    return Target(name, kind, real_url, secret, timeout_s)


def request_for(target: Target, payloads: list[dict[str, Any]], delivery_id: int,
                external_url: str, now: datetime,
                valid_for: timedelta) -> tuple[str, bytes, dict[str, str]]:
    """URL, body and headers of the request carrying `payloads` (one alert unless it is an
    Alertmanager re-send, which posts every firing alert at once)."""
    headers = {"Content-Type": "application/json", "User-Agent": "sustain"}
    links = [messages.generator_url(external_url, p["fingerprint"]) for p in payloads]
    if target.kind == "alertmanager":
        body: Any = [messages.alertmanager_alert(p, link, now, valid_for)
                     for p, link in zip(payloads, links, strict=True)]
        return f"{target.url.rstrip('/')}/api/v2/alerts", dumps(body).encode(), headers
    if target.kind == "slack":
        return target.url, dumps(messages.slack_body(payloads[0], links[0])).encode(), \
            headers
    data = dumps(messages.webhook_body(payloads[0], delivery_id, links[0])).encode()
    headers[messages.DELIVERY_HEADER] = str(delivery_id)
    if target.signing_secret is not None:
        stamp = int(time.time())
        headers[messages.TIMESTAMP_HEADER] = str(stamp)
        headers[messages.SIGNATURE_HEADER] = messages.sign(target.signing_secret, stamp, data)
    return target.url, data, headers


async def drain_raw(response: httpx.Response, max_bytes: int) -> int:
    """Read `response`'s body as it came over the wire (no Content-Encoding undone) until
    its end or until `max_bytes` have been read, keeping none of it; the bytes read (at most
    one network read past `max_bytes`). A body read to its end leaves the connection
    reusable; one cut short is closed with the response."""
    read = 0
    raw = cast(AsyncGenerator[bytes, None], response.aiter_raw())  # httpx: a generator
    async with contextlib.aclosing(raw) as chunks:
        async for chunk in chunks:
            read += len(chunk)
            if read >= max_bytes:
                break
    return read


async def _post_once(client: httpx.AsyncClient, url: str, body: bytes,
                     headers: dict[str, str], timeout_s: float,
                     max_response_bytes: int = MAX_RESPONSE_BYTES) -> Outcome:
    """One try, `timeout_s` in all (connecting, sending, and reading the bounded answer).
    Once the status line has come, it alone decides: a body that then breaks off or stalls
    changes nothing (a 2xx is not sent again)."""
    asked = {**headers, "Accept-Encoding": "identity"}
    status: int | None = None
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream("POST", url, content=body, headers=asked,
                                     timeout=timeout_s, follow_redirects=False) as response:
                status = response.status_code
                await drain_raw(response, max_response_bytes)
    except (httpx.TimeoutException, TimeoutError):
        if status is None:
            return Outcome(False, error="timed out", retryable=True)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        if status is None:
            return _failed(exc)
    if status is None:  # unreachable: every way out without a status returned above
        return Outcome(False, error="no answer", retryable=True)
    return by_status(status)


def by_status(status: int) -> Outcome:
    """The outcome of an answer with this status (its body plays no part)."""
    if 200 <= status < 300:
        return Outcome(True, status=status)
    return Outcome(False, status=status, error=f"HTTP {status}",
                   retryable=status in RETRYABLE_STATUS)


def _failed(exc: httpx.HTTPError | httpx.InvalidURL) -> Outcome:
    """The outcome of a try that got no answer; the error names the exception type only (its
    message may carry the URL)."""
    if egress_denial(exc) is not None:
        return Outcome(False, error="egress denied: the URL's host resolves to an address "
                       f"the egress policy refuses ({EGRESS_SETTINGS})")
    return Outcome(False, error=f"request failed ({type(exc).__name__})",
                   retryable=not isinstance(exc, httpx.InvalidURL | httpx.UnsupportedProtocol))


async def post(client: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str],
               timeout_s: float, quick_wait_s: float = 0.5,
               max_response_bytes: int = MAX_RESPONSE_BYTES) -> Outcome:
    """POST with up to QUICK_TRIES tries for transient failures, backing off exponentially
    from `quick_wait_s`; the last outcome. Longer outages are retried by the delivery log.
    Each try reads at most `max_response_bytes` raw bytes of the answer (see drain_raw) and
    takes at most `timeout_s` seconds."""
    retrying = AsyncRetrying(
        stop=stop_after_attempt(QUICK_TRIES),
        wait=wait_exponential(multiplier=quick_wait_s, max=quick_wait_s * 4),
        retry=retry_if_result(lambda o: not o.delivered and o.retryable),
        retry_error_callback=_last_outcome)
    outcome: Outcome = await retrying(_post_once, client, url, body, headers, timeout_s,
                                      max_response_bytes)
    return outcome


def _last_outcome(state: RetryCallState) -> Outcome:
    assert state.outcome is not None
    result: Outcome = state.outcome.result()
    return result
