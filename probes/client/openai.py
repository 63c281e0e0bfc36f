"""OpenAI-compatible chat and completions requests, streamed or not, measured from t_send."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

import httpx

from sustain.probes.client.errors import classify_transport_error
from sustain.probes.client.openai_stream import (
    NS_PER_MS,
    StreamState,
    error_class_for_status,
    message_text,
    token_count,
)
from sustain.probes.client.sse import SSEDecoder
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.measure.sample import ErrorClass, Measurement

DRAIN_S = 1.0
"""After [DONE], how long to wait for the end of the body before giving up the connection."""
ERROR_BODY_LIMIT = 65_536
"""Bytes of an error response read before giving up the connection."""

PATHS = {ApiKind.OPENAI_CHAT: "/chat/completions", ApiKind.OPENAI_COMPLETIONS: "/completions"}


def request_url(target: Target) -> str:
    """The base URL is the API root, e.g. http://host:8000/v1 (as the OpenAI SDK expects)."""
    return target.base_url.rstrip("/") + PATHS[target.api_kind]


def _ms(delta_ns: int) -> float:
    return delta_ns / NS_PER_MS


class _Phase:
    """Which deadline is armed, so a timeout can be classified."""

    def __init__(self) -> None:
        self.first_token_seen = False
        self.response_started = False


def encode_request(body: Mapping[str, Any], headers: Mapping[str, str]
                   ) -> tuple[bytes, dict[str, str]]:
    """Serialise before t_send, so JSON encoding is not counted as endpoint latency."""
    return json.dumps(body, separators=(",", ":")).encode(), {
        **headers, "content-type": "application/json", "accept": "text/event-stream"
        if body.get("stream") else "application/json"}


async def send_openai(
    client: httpx.AsyncClient,
    target: Target,
    encoded: tuple[bytes, dict[str, str]],
    stream: bool,
    t_send_ns: int,
) -> Measurement:
    """Send one encoded request (see encode_request) and measure it. Never raises for endpoint
    misbehaviour.

    Deadlines: connect (httpx), first token and total (asyncio, from t_send). There are no
    retries: a measured request is sent exactly once.
    """
    payload, request_headers = encoded
    loop = asyncio.get_running_loop()
    start_loop = loop.time() - (time.perf_counter_ns() - t_send_ns) / 1e9
    total_deadline = start_loop + target.timeout_total_s
    first_deadline = min(start_loop + target.timeout_first_token_s, total_deadline)
    phase = _Phase()
    timeout = httpx.Timeout(
        connect=target.timeout_connect_s, read=None, write=target.timeout_total_s, pool=None
    )
    state = StreamState()
    status: int | None = None
    end_ns: int | None = None
    try:
        async with asyncio.timeout_at(first_deadline if stream else total_deadline) as deadline:
            async with client.stream(
                "POST", request_url(target), content=payload, headers=request_headers,
                timeout=timeout,
            ) as response:
                phase.response_started = True
                status = response.status_code
                failed = error_class_for_status(status)
                if failed is not None:
                    await _drain(response, ERROR_BODY_LIMIT)
                    return failure(t_send_ns, status, failed, f"HTTP {status}")
                if not stream:
                    return await _read_whole(response, t_send_ns, status)
                content_type = response.headers.get("content-type", "")
                if not content_type.startswith("text/event-stream"):
                    return failure(
                        t_send_ns, status, ErrorClass.PROTOCOL, "stream is not text/event-stream"
                    )
                decoder = SSEDecoder()
                async for chunk in response.aiter_bytes():
                    now = time.perf_counter_ns()
                    if state.done:
                        continue  # the body's last bytes: read them so the connection is reused
                    for event in decoder.feed(chunk):
                        state.on_event(event, now)
                    if state.first_output_ns is not None and not phase.first_token_seen:
                        phase.first_token_seen = True
                        deadline.reschedule(total_deadline)
                    if state.failure is not None:
                        break
                    if state.done:
                        end_ns = now
                        deadline.reschedule(min(total_deadline, loop.time() + DRAIN_S))
                if end_ns is None:
                    for event in decoder.close():
                        state.on_event(event, time.perf_counter_ns())
                    end_ns = time.perf_counter_ns()
    except TimeoutError:
        if not state.done:
            late = ErrorClass.TIMEOUT_FIRST_TOKEN
            if not stream or phase.first_token_seen or loop.time() >= total_deadline:
                late = ErrorClass.TIMEOUT_TOTAL
            return partial_result(state, t_send_ns, status, late, "deadline exceeded")
    except UnicodeDecodeError:
        return partial_result(state, t_send_ns, status, ErrorClass.PROTOCOL,
                              "invalid UTF-8 in stream")
    except httpx.HTTPError as exc:
        if not (state.complete and state.failure is None):
            error = classify_transport_error(exc, response_started=phase.response_started)
            return partial_result(state, t_send_ns, status, error, type(exc).__name__)
        end_ns = end_ns or time.perf_counter_ns()
    error_class, detail = state.outcome()
    return from_state(state, t_send_ns, end_ns or time.perf_counter_ns(), status, error_class,
                       detail)


async def _drain(response: httpx.Response, limit: int) -> None:
    """Read up to `limit` bytes of an error body, so a short one leaves the connection usable."""
    seen = 0
    async for chunk in response.aiter_bytes():
        seen += len(chunk)
        if seen > limit:
            return


async def _read_whole(response: httpx.Response, t_send_ns: int, status: int) -> Measurement:
    raw = await response.aread()
    return whole_response(raw, t_send_ns, time.perf_counter_ns(), status)


def whole_response(raw: bytes, t_send_ns: int, end: int, status: int) -> Measurement:
    """Measure a non-streamed response body that ended at `end` (ns)."""
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, "malformed JSON response")
    if not isinstance(payload, dict):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, "response is not a JSON object")
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
    completion = token_count(usage.get("completion_tokens")) if usage else None
    prompt = token_count(usage.get("prompt_tokens")) if usage else None
    text = message_text(payload)
    counted = completion is not None
    tokens = completion if completion is not None else len(text.split())
    error = None if tokens >= 1 and text else ErrorClass.EMPTY
    return Measurement(
        ttft_ms=None,
        itl_ms=(),
        e2e_ms=_ms(end - t_send_ns),
        output_tokens=tokens,
        tokens_server_counted=counted,
        input_tokens=prompt,
        http_status=status,
        error_class=error,
        error_detail=None if error is None else "no output tokens",
    )


def failure(t_send_ns: int, status: int | None, error: ErrorClass, detail: str) -> Measurement:
    return from_state(StreamState(), t_send_ns, time.perf_counter_ns(), status, error, detail)


def partial_result(
    state: StreamState, t_send_ns: int, status: int | None, error: ErrorClass, detail: str
) -> Measurement:
    return from_state(state, t_send_ns, time.perf_counter_ns(), status, error, detail)


def from_state(
    state: StreamState,
    t_send_ns: int,
    end_ns: int,
    status: int | None,
    error: ErrorClass | None,
    detail: str | None,
) -> Measurement:
    return Measurement(
        ttft_ms=None if state.first_output_ns is None else _ms(state.first_output_ns - t_send_ns),
        itl_ms=tuple(_ms(gap) for gap in state.itl_ns),
        e2e_ms=_ms(end_ns - t_send_ns),
        output_tokens=state.output_tokens,
        tokens_server_counted=state.completion_tokens is not None,
        input_tokens=state.prompt_tokens,
        http_status=status,
        error_class=error,
        error_detail=detail,
    )
