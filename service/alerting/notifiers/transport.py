"""Sending one request to one receiver over HTTP, whatever the notifier's kind: a few quick
retries with backoff for transient failures (tenacity), and the outcome as a value. Error
texts name the failure, never the URL (a Slack URL is a secret) or a secret.

A receiver's answer is never trusted to be small: the request asks for the identity encoding,
the answer is read raw (never decompressed, whatever Content-Encoding it claims) up to
`max_response_bytes`, and the connection is then closed with the rest unread. The outcome is
the status code alone; nothing of the body is kept (it could echo the URL's secret).
Refusals of the egress policy at connect time fail at once: retrying cannot help until the
operator's settings change."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import cast

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_result,
    stop_after_attempt,
    wait_exponential,
)

from sustain.probes.client.egress_connect import egress_denial
from sustain.service.policy.reach import EGRESS_SETTINGS

RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
QUICK_TRIES = 3
MAX_RESPONSE_BYTES = 64 * 1024
"""Default raw bytes of an answer read (SUSTAIN_NOTIFY_MAX_RESPONSE_BYTES)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    delivered: bool
    status: int | None = None
    error: str | None = None
    retryable: bool = False
    """Whether a later attempt may succeed (connection errors, timeouts, 5xx, 408, 429)."""


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
