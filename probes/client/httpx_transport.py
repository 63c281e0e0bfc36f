"""The httpx transport: measured API requests (every kind of probes/protocols) to HTTP/2
endpoints (the lean HTTP/1.1 pool in http1.py carries the rest), and httpx failures as error
classes (shared with the plain `http` checks, which also go through httpx). What is measured
is decided by the target's protocol (probes/protocols: its stream reader, its whole answer);
this module only reads the response through httpx and stamps chunks as they come out of it.
`call_over_httpx` is a kind's plain request (base.HttpCall) through the same client: the
requests of an exchanged kind's flow."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import httpx

from sustain.probes.client.egress_connect import egress_denial
from sustain.probes.client.error_body import (
    ErrorBody,
    is_html,
    media_type,
    refusal_detail,
    request_secrets,
)
from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.phases import RESOLVING, HttpxPhases
from sustain.probes.client.sse import EventTooLarge, SSEDecoder, size_text
from sustain.probes.client.status import error_class_for_status
from sustain.probes.client.target import Target
from sustain.probes.client.trace_context import trace_id_of, tracing
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.base import Answer, ApiProtocol, CallFailed, raw_reader
from sustain.probes.protocols.registry import protocol_for, request_url
from sustain.probes.protocols.streaming import (
    DEADLINE_EXCEEDED,
    DRAIN_S,
    ERROR_BODY_LIMIT,
    INVALID_UTF8,
    NOT_EVENT_STREAM,
    Deadlines,
    EncodedRequest,
    StreamState,
    answered_whole,
    failure,
    from_state,
    is_event_stream,
    is_whole_answer,
    partial_result,
)


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def classify_transport_error(exc: httpx.HTTPError, *, response_started: bool) -> ErrorClass:
    """Error class of an httpx failure; after the response began, a broken stream is truncated.
    A connection the egress policy refused is egress_denied."""
    if egress_denial(exc) is not None:
        return ErrorClass.EGRESS_DENIED
    if isinstance(exc, httpx.ConnectTimeout):
        return ErrorClass.TIMEOUT_CONNECT
    if isinstance(exc, httpx.TimeoutException):
        return ErrorClass.TIMEOUT_TOTAL
    causes = _causes(exc)
    if any(isinstance(c, socket.gaierror) for c in causes):
        return ErrorClass.DNS
    if any(isinstance(c, ssl.SSLError) for c in causes):
        return ErrorClass.TLS
    if isinstance(exc, httpx.ConnectError):
        text = str(exc).lower()
        if "name or service not known" in text or "nodename nor servname" in text:
            return ErrorClass.DNS
        if "ssl" in text or "certificate" in text:
            return ErrorClass.TLS
        return ErrorClass.CONNECT
    if response_started:
        return ErrorClass.TRUNCATED
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.DecodingError)):
        return ErrorClass.PROTOCOL
    return ErrorClass.CONNECT


def failure_detail(exc: httpx.HTTPError) -> str:
    """A short, secret-free detail of an httpx failure: the egress refusal's reason (host or
    address and rule), the resolver's or TLS library's reason (as the lean transport gives
    them: `[Errno -2] Name or service not known`, `WRONG_VERSION_NUMBER`), else the
    exception's type."""
    denied = egress_denial(exc)
    if denied is not None:
        return str(denied)
    for cause in _causes(exc):
        if isinstance(cause, socket.gaierror):
            return str(cause)
        if isinstance(cause, ssl.SSLError):
            return cause.reason or type(cause).__name__
    return type(exc).__name__


class _Phase:
    """How far the exchange got, so a failure can be classified."""

    def __init__(self) -> None:
        self.first_token_seen = False
        self.response_started = False


async def send_over_httpx(
    client: httpx.AsyncClient,
    target: Target,
    encoded: EncodedRequest,
    stream: bool,
    t_send_ns: int,
    *,
    keep_reply: bool = False,
    expect: ExpectedItems | None = None,
) -> Measurement:
    """Send one encoded request of any API kind (its protocol's `encode`) and measure it by
    the target's protocol (probes/protocols); with `keep_reply`, keep what it answered
    (Measurement.reply); with `expect`, check the items of a whole answer (expected.py).
    Never raises for endpoint misbehaviour; no retries.

    Deadlines: connect (httpx), first token and total (asyncio, from t_send; see
    protocols.streaming.Deadlines). Its HTTP phases, as httpx's `trace` extension tells them,
    and its trace id are part of the measurement (phases.py, trace_context.py); a fresh
    connection per request is the client's (HttpClients.httpx `fresh`).
    """
    protocol = protocol_for(target)
    state = protocol.stream_state_for(encoded[0], keep_reply)
    phases = HttpxPhases() if tracing() else None
    measurement = protocol.stream_figures(
        await _send(client, target, encoded, stream, t_send_ns, state, protocol,
                    keep_reply=keep_reply, expect=expect, phases=phases), state)
    updates: dict[str, Any] = {}
    if stream and measurement.streamed is None:  # streamed, unless answered whole
        updates["streamed"] = True
    if phases is not None:
        updates.update(phases.fields(trace_id_of(encoded[1])))
    return replace(measurement, **updates) if updates else measurement


def traced_request(phases: HttpxPhases | None) -> dict[str, Any] | None:
    """The request extensions that time `phases` (httpx's `trace`), or None without; the
    caller sets phases.RESOLVING for the name resolution while the request is sent."""
    return None if phases is None else {"trace": phases}


async def _send(client: httpx.AsyncClient, target: Target, encoded: EncodedRequest,
                stream: bool, t_send_ns: int, state: StreamState, protocol: ApiProtocol, *,
                keep_reply: bool, expect: ExpectedItems | None,
                phases: HttpxPhases | None = None) -> Measurement:
    payload, request_headers = encoded
    loop = asyncio.get_running_loop()
    deadlines = Deadlines.from_t_send(target, t_send_ns, loop)
    phase = _Phase()
    timeout = httpx.Timeout(
        connect=target.timeout_connect_s, read=None, write=target.timeout_total_s, pool=None
    )
    status: int | None = None
    end_ns: int | None = None
    resolving = RESOLVING.set(phases)
    try:
        async with asyncio.timeout_at(deadlines.initial(stream)) as deadline:
            async with client.stream(
                "POST", request_url(target), content=payload, headers=request_headers,
                timeout=timeout, extensions=traced_request(phases),
            ) as response:
                phase.response_started = True
                status = response.status_code
                failed = error_class_for_status(status)
                content_type = response.headers.get("content-type", "")
                if failed is not None or (200 <= status < 300 and is_html(content_type)):
                    # a refusal (an HTML page where an API answer was due is one) ends at
                    # its head; its words are read for up to DRAIN_S
                    result = failure(t_send_ns, status, failed or ErrorClass.PROTOCOL,
                                     f"HTTP {status}")
                    kept = await _drain(response, ERROR_BODY_LIMIT, loop.time() + DRAIN_S)
                    return replace(result, error_detail=refusal_detail(
                        status, content_type, kept, request_secrets(request_headers)))
                if not stream or is_whole_answer(content_type):
                    whole = await _read_whole(response, t_send_ns, status, keep_reply,
                                              protocol, expect)
                    return answered_whole(whole) if stream else whole
                raw = raw_reader(state, content_type)
                if raw is None and not is_event_stream(content_type):
                    return failure(t_send_ns, status, ErrorClass.PROTOCOL,
                                   f"{NOT_EVENT_STREAM}: {media_type(content_type)}")
                decoder = SSEDecoder(protocol.event_bytes(target.max_event_bytes))
                async for chunk in response.aiter_bytes():
                    now = time.perf_counter_ns()
                    if state.done:
                        continue  # the body's last bytes: read them so the connection is reused
                    if raw is not None:
                        raw.on_bytes(chunk, now)
                    else:
                        for event in decoder.feed(chunk):
                            state.on_event(event, now)
                    if state.first_output_ns is not None and not phase.first_token_seen:
                        phase.first_token_seen = True
                        deadline.reschedule(deadlines.total)
                    if state.failure is not None:
                        break
                    if state.done:
                        end_ns = now
                        deadline.reschedule(deadlines.drain(loop.time()))
                if end_ns is None:
                    if raw is not None:
                        if state.failure is None:
                            raw.on_end(time.perf_counter_ns())
                    else:
                        for event in decoder.close():
                            state.on_event(event, time.perf_counter_ns())
                    end_ns = time.perf_counter_ns()
    except TimeoutError:
        if not state.done:
            late = deadlines.expired(stream=stream, first_token_seen=phase.first_token_seen,
                                     now=loop.time())
            return partial_result(state, t_send_ns, status, late, DEADLINE_EXCEEDED)
    except UnicodeDecodeError:
        return partial_result(state, t_send_ns, status, ErrorClass.PROTOCOL, INVALID_UTF8)
    except EventTooLarge as exc:
        return partial_result(state, t_send_ns, status, ErrorClass.PROTOCOL, str(exc))
    except httpx.HTTPError as exc:
        if not (state.complete and state.failure is None):
            error = classify_transport_error(exc, response_started=phase.response_started)
            return partial_result(state, t_send_ns, status, error, failure_detail(exc))
        end_ns = end_ns or time.perf_counter_ns()
    finally:
        RESOLVING.reset(resolving)
    error_class, detail = state.outcome()
    return from_state(state, t_send_ns, end_ns or time.perf_counter_ns(), status, error_class,
                      detail)


async def _drain(response: httpx.Response, limit: int, until: float) -> bytes:
    """Read up to `limit` bytes of an error body until loop time `until` (s), so a short one
    leaves the connection usable; its first KiB (the server's words) is returned. Past
    either, the rest is left unread (leaving the `client.stream` block closes the
    connection)."""
    kept = ErrorBody()
    seen = 0
    try:
        async with asyncio.timeout_at(until):
            async for chunk in response.aiter_bytes():
                kept.add(chunk)
                seen += len(chunk)
                if seen > limit:
                    break
    except TimeoutError:
        pass
    return bytes(kept.kept)


async def _read_whole(response: httpx.Response, t_send_ns: int, status: int,
                      keep_reply: bool, protocol: ApiProtocol,
                      expect: ExpectedItems | None = None) -> Measurement:
    """A non-streamed body, up to the kind's whole_body_limit (WHOLE_BODY_LIMIT unless it
    says otherwise): past it the request ends as `protocol` without reading the rest (leaving
    the `client.stream` block closes the connection)."""
    chunks: list[bytes] = []
    size = 0
    limit = protocol.whole_body_limit
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            return failure(t_send_ns, status, ErrorClass.PROTOCOL,
                           f"response body over {size_text(limit)}")
        chunks.append(chunk)
    return protocol.whole(b"".join(chunks), t_send_ns, time.perf_counter_ns(), status,
                          keep_reply, expect)


async def call_over_httpx(client: httpx.AsyncClient, target: Target, method: str, path: str,
                          payload: bytes, headers: Mapping[str, str], *, keep: int,
                          limit: int) -> Answer:
    """One plain request of an exchanged kind's flow through httpx (base.HttpCall): `method`
    to the target's base URL + `path`; its body counted as it arrives, its first `keep` bytes
    kept, and past `limit` bytes given up (leaving the `client.stream` block closes the
    connection) as `protocol`. CallFailed for an httpx failure."""
    timeout = httpx.Timeout(connect=target.timeout_connect_s, read=None,
                            write=target.timeout_total_s, pool=None)
    started = False
    try:
        async with client.stream(method, target.base_url.rstrip("/") + path,
                                 content=payload or None, headers=dict(headers),
                                 timeout=timeout) as response:
            started = True
            body = bytearray()
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise CallFailed(ErrorClass.PROTOCOL, f"response body over {size_text(limit)}")
                room = keep - len(body)
                if room > 0:
                    body.extend(memoryview(chunk)[:room])
            return Answer(response.status_code, response.headers.get("content-type", ""),
                          bytes(body), size, time.perf_counter_ns())
    except httpx.InvalidURL as exc:  # not an HTTPError: a path an endpoint's answer made
        raise CallFailed(ErrorClass.PROTOCOL, f"invalid URL ({exc})") from None
    except httpx.HTTPError as exc:
        raise CallFailed(classify_transport_error(exc, response_started=started),
                         failure_detail(exc)) from None
