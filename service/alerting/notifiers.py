"""Sending one notification to one notifier over HTTP: the request each kind expects, a few
quick retries with backoff for transient failures (tenacity), and the outcome as a value.
Error texts name the failure, never the URL (a Slack URL is a secret) or a secret.

Secret references resolve only where the secret policy allows, and the URL is checked against
the egress policy before sending (a URL held behind url_secret_ref could not be checked when
the notifier was created); the client itself refuses denied addresses at connect time. Such
refusals fail the delivery at once: retrying cannot help until the operator's settings
change."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

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


async def _post_once(client: httpx.AsyncClient, url: str, body: bytes,
                     headers: dict[str, str], timeout_s: float) -> Outcome:
    try:
        response = await client.post(url, content=body, headers=headers, timeout=timeout_s)
    except httpx.TimeoutException:
        return Outcome(False, error="timed out", retryable=True)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        if egress_denial(exc) is not None:
            return Outcome(False, error="egress denied: the URL's host resolves to an address "
                           f"the egress policy refuses ({EGRESS_SETTINGS})")
        return Outcome(False, error=f"request failed ({type(exc).__name__})",
                       retryable=not isinstance(exc, httpx.InvalidURL | httpx.UnsupportedProtocol))
    if response.is_success:
        return Outcome(True, status=response.status_code)
    return Outcome(False, status=response.status_code, error=f"HTTP {response.status_code}",
                   retryable=response.status_code in RETRYABLE_STATUS)


async def post(client: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str],
               timeout_s: float, quick_wait_s: float = 0.5) -> Outcome:
    """POST with up to QUICK_TRIES tries for transient failures, backing off exponentially
    from `quick_wait_s`; the last outcome. Longer outages are retried by the delivery log."""
    retrying = AsyncRetrying(
        stop=stop_after_attempt(QUICK_TRIES),
        wait=wait_exponential(multiplier=quick_wait_s, max=quick_wait_s * 4),
        retry=retry_if_result(lambda o: not o.delivered and o.retryable),
        retry_error_callback=_last_outcome)
    outcome: Outcome = await retrying(_post_once, client, url, body, headers, timeout_s)
    return outcome


def _last_outcome(state: RetryCallState) -> Outcome:
    assert state.outcome is not None
    result: Outcome = state.outcome.result()
    return result
