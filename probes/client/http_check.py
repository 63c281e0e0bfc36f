"""Plain `http` checks: one request through httpx, end-to-end latency (ms from t_send) and an
outcome (the expected status and an optional body check). For health endpoints, gateways and
anything that is not OpenAI-shaped; no first-token deadline, only the total one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import replace

import httpx

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.httpx_transport import (
    classify_transport_error,
    failure_detail,
    traced_request,
)
from sustain.probes.client.phases import RESOLVING, HttpxPhases
from sustain.probes.client.status import error_class_for_status
from sustain.probes.client.target import HttpCheck, Target
from sustain.probes.client.trace_context import trace_id_of, tracing
from sustain.probes.measure.sample import NS_PER_MS, ErrorClass, Measurement

MAX_BODY = 10_000_000
"""Bytes of a response read for the body check; a longer body is a protocol error."""


def check_url(target: Target, check: HttpCheck) -> str:
    return target.base_url.rstrip("/") + check.path


async def send_http(client: httpx.AsyncClient, target: Target, check: HttpCheck,
                    headers: Mapping[str, str], t_send_ns: int, *,
                    egress: EgressPolicy | None = None) -> Measurement:
    """Send the check's request once and measure it, with its HTTP phases and the trace id of
    its traceparent (among `headers`: the sender's, made before t_send); never raises for
    endpoint misbehaviour. A `body_contains` that `egress` refuses
    (EgressPolicy.body_check_refusal: the service's settings may have changed since the
    endpoint was saved) sends nothing: the request is an `egress_denied` failure saying
    why."""
    phases = HttpxPhases() if tracing() else None
    measured = await _check(client, target, check, headers, t_send_ns, egress, phases)
    if phases is None:
        return measured
    return replace(measured, **phases.fields(trace_id_of(headers)))


async def _check(client: httpx.AsyncClient, target: Target, check: HttpCheck,
                 headers: Mapping[str, str], t_send_ns: int, egress: EgressPolicy | None,
                 phases: HttpxPhases | None) -> Measurement:
    if check.body_contains is not None and egress is not None and \
            (refusal := egress.body_check_refusal()) is not None:
        return _result(t_send_ns, None, ErrorClass.EGRESS_DENIED, refusal)
    timeout = httpx.Timeout(connect=target.timeout_connect_s, read=None,
                            write=target.timeout_total_s, pool=None)
    status: int | None = None
    started = False
    body = bytearray()  # kept only for a body check, appended in place (linear, not quadratic)
    seen = 0
    resolving = RESOLVING.set(phases)
    try:
        async with asyncio.timeout(target.timeout_total_s - (time.perf_counter_ns() - t_send_ns)
                                   / 1e9):
            async with client.stream(check.method, check_url(target, check),
                                     content=check.body, headers=dict(headers),
                                     timeout=timeout,
                                     extensions=traced_request(phases)) as response:
                started = True
                status = response.status_code
                async for chunk in response.aiter_bytes():
                    seen += len(chunk)
                    if seen > MAX_BODY:
                        return _result(t_send_ns, status, ErrorClass.PROTOCOL,
                                       "response body too large to check")
                    if check.body_contains is not None:
                        body += chunk
    except TimeoutError:
        return _result(t_send_ns, status, ErrorClass.TIMEOUT_TOTAL, "deadline exceeded")
    except httpx.HTTPError as exc:
        error = classify_transport_error(exc, response_started=started)
        return _result(t_send_ns, status, error, failure_detail(exc))
    finally:
        RESOLVING.reset(resolving)
    if status != check.expected_status:
        error = error_class_for_status(status) or ErrorClass.PROTOCOL
        return _result(t_send_ns, status, error, f"HTTP {status}, expected "
                       f"{check.expected_status}")
    if check.body_contains is not None and \
            check.body_contains not in body.decode("utf-8", errors="replace"):
        return _result(t_send_ns, status, ErrorClass.PROTOCOL, "expected text not in body")
    return _result(t_send_ns, status, None, None)


def _result(t_send_ns: int, status: int | None, error: ErrorClass | None,
            detail: str | None) -> Measurement:
    return Measurement(ttft_ms=None, itl_ms=(),
                       e2e_ms=(time.perf_counter_ns() - t_send_ns) / NS_PER_MS,
                       output_tokens=0, tokens_server_counted=False, input_tokens=None,
                       http_status=status, error_class=error, error_detail=detail)
