"""The lean HTTP/1.1 transport: measured API requests (every kind of probes/protocols) over
the connection pool of http1_pool.py, the path every HTTP/1.1 endpoint takes. Events are parsed
and time-stamped (perf_counter_ns) in the call that read them from the socket; what is measured
is decided by the target's protocol (its stream reader, its whole answer), so the result is the
same as over httpx (httpx_transport.py), only cheaper and closer to the wire.

Besides measured requests, `call_over_http1` is a kind's plain request (base.HttpCall) over the
same pool: the requests of an exchanged kind's flow (an asynchronous job's create, polls and
download)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from sustain.probes.client.error_body import (
    ErrorBody,
    is_html,
    media_type,
    refusal_detail,
    request_secrets,
)
from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.http1_pool import ConnectionPool, Exchange, TransportError
from sustain.probes.client.sse import EventTooLarge, SSEDecoder, size_text
from sustain.probes.client.status import error_class_for_status
from sustain.probes.client.target import Target
from sustain.probes.client.trace_context import trace_id_of, tracing
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.base import (
    Answer,
    ApiProtocol,
    CallFailed,
    RawStreamState,
    raw_reader,
)
from sustain.probes.protocols.registry import protocol_for, request_url
from sustain.probes.protocols.streaming import (
    DEADLINE_EXCEEDED,
    DRAIN_S,
    ERROR_BODY_LIMIT,
    INVALID_UTF8,
    NOT_EVENT_STREAM,
    Deadlines,
    EncodedRequest,
    answered_whole,
    failure,
    from_state,
    is_event_stream,
    is_whole_answer,
    partial_result,
)

TRANSPORT_ERRORS = {"connect": ErrorClass.CONNECT, "dns": ErrorClass.DNS,
                    "tls": ErrorClass.TLS, "timeout_connect": ErrorClass.TIMEOUT_CONNECT,
                    "protocol": ErrorClass.PROTOCOL,
                    "egress_denied": ErrorClass.EGRESS_DENIED}


def classify_transport_error(exc: TransportError, *, response_started: bool) -> ErrorClass:
    """Error class of a lean-transport failure: by its kind; a connection closed after the
    response began is a truncated response, before it a protocol error."""
    error = TRANSPORT_ERRORS.get(exc.kind)
    if error is not None:
        return error
    return ErrorClass.TRUNCATED if response_started else ErrorClass.PROTOCOL


class _Reader:
    """Consumes the body as it arrives: SSE events for a 2xx stream (or its raw chunks, where
    the kind's stream state reads its content type raw: base.RawStreamState), else raw bytes.
    The work per chunk is proportional to that chunk alone (never to what was read before),
    and a body past its cap fails the reader at once, so one endpoint cannot stall the
    loop."""

    def __init__(self, stream: bool, loop: asyncio.AbstractEventLoop, deadlines: Deadlines,
                 max_event_bytes: int, keep_reply: bool, protocol: ApiProtocol,
                 expect: ExpectedItems | None = None, payload: bytes = b"") -> None:
        self.stream = stream
        self.loop = loop
        self.deadlines = deadlines
        self.exchange: Exchange | None = None
        self.deadline: asyncio.Timeout | None = None
        self.keep_reply = keep_reply
        self.expect = expect
        self.protocol = protocol
        self.state = protocol.stream_state_for(payload, keep_reply)
        self.decoder = SSEDecoder(protocol.event_bytes(max_event_bytes))
        self.raw = bytearray()
        """A 2xx non-streamed body, up to the kind's whole_body_limit (error bodies are only
        counted, and their first KiB kept in error_body)."""
        self.error_body = ErrorBody()
        """The first KiB of a refusal's body (`refused`): the server's words."""
        self.refusal: bool | None = None
        """Whether the response is a refusal (`refused`); None until its head is read."""
        self.raw_state: RawStreamState | None = None
        """The stream state, when it reads this 2xx stream's body raw (by its content type,
        once the head is in: `raw_stream`)."""
        self.raw_checked = False
        self.whole_answer: bool | None = None
        """A streamed request's 2xx answer came as one JSON body (is_whole_answer); None
        until its head is read."""
        self.reads_sse = False
        """Set at the first chunk of a 2xx event stream read as SSE: the head decided the
        route, so each later chunk (one per token, for most servers) goes straight to the
        decoder."""
        self.body_bytes = 0
        self.end_ns: int | None = None
        self.first_token_seen = False
        self.ended_fields_given = False
        """The measurement was made with its _ended_fields (a stream that ran its course)."""
        self.failed: asyncio.Future[None] = loop.create_future()
        """Set when the response turned out bad: no need to wait for the rest of it."""

    def _status(self) -> int:
        exchange = self.exchange
        return 0 if exchange is None or not exchange.head.done() or exchange.head.cancelled() \
            else exchange.head.result()[0]

    def _fail(self, error: ErrorClass, detail: str) -> None:
        self.state.failure, self.state.detail = error, detail
        if not self.failed.done():
            self.failed.set_result(None)

    def refused(self) -> bool:
        """Whether the response refused the request, by its head (once that is in): an error
        status, or a 2xx HTML page (a login page, a proxy's) where an API answer was due. Its
        body is only counted, its first KiB kept for the server's words."""
        if self.refusal is None:
            exchange = self.exchange
            if exchange is None or not exchange.head.done() or exchange.head.cancelled():
                return False
            status, headers = exchange.head.result()
            self.refusal = error_class_for_status(status) is not None or (
                200 <= status < 300 and is_html(headers.get("content-type", "")))
        return self.refusal

    def answered_whole(self) -> bool:
        """Whether the 2xx answer to a streamed request is one JSON body, not a stream (by
        its content type, once its head is in)."""
        if self.whole_answer is None:
            exchange = self.exchange
            if exchange is None or not exchange.head.done() or exchange.head.cancelled():
                return False
            self.whole_answer = is_whole_answer(
                exchange.head.result()[1].get("content-type", ""))
        return self.whole_answer

    def raw_stream(self) -> RawStreamState | None:
        """The stream state, when it reads this 2xx stream's body raw rather than as SSE (by
        the content type of its head, once that is in)."""
        if not self.raw_checked:
            exchange = self.exchange
            if exchange is None or not exchange.head.done() or exchange.head.cancelled():
                return None
            self.raw_checked = True
            self.raw_state = raw_reader(
                self.state, exchange.head.result()[1].get("content-type", ""))
        return self.raw_state

    def on_body(self, chunk: bytes, now: int) -> None:
        state = self.state
        if not self.reads_sse:
            if self.refused():
                self._on_whole(chunk, error=True)
                return
            status = self._status()
            if not (self.stream and 200 <= status < 300) or self.answered_whole():
                self._on_whole(chunk, error=False)
                return
        if state.done or state.failure is not None:
            if state.failure is not None and not self.failed.done():
                self.failed.set_result(None)  # failed outside on_body: end it now
            return  # the body's last bytes: read so the connection is reused
        if self.reads_sse:
            self._decode(chunk, now)
        else:
            raw = self.raw_stream()
            if raw is not None:
                raw.on_bytes(chunk, now)
            else:
                self.reads_sse = True
                self._decode(chunk, now)
        if state.failure is not None:
            if not self.failed.done():
                self.failed.set_result(None)
            return
        if state.first_output_ns is not None and not self.first_token_seen:
            self.first_token_seen = True
            if self.deadline is not None:
                self.deadline.reschedule(self.deadlines.total)
        if state.done and self.end_ns is None:
            self.end_ns = now
            if self.deadline is not None:
                self.deadline.reschedule(self.deadlines.drain(self.loop.time()))

    def _decode(self, chunk: bytes, now: int) -> None:
        """A chunk of an SSE stream: its complete events, each to the stream state."""
        try:
            events = self.decoder.feed(chunk)
        except UnicodeDecodeError:
            self._fail(ErrorClass.PROTOCOL, INVALID_UTF8)
            return
        except EventTooLarge as exc:
            self._fail(ErrorClass.PROTOCOL, str(exc))
            return
        on_event = self.state.on_event
        for event in events:
            on_event(event, now)

    def _on_whole(self, chunk: bytes, *, error: bool) -> None:
        """A whole body. A response's (non-streamed, or not an event stream) is kept up to
        the kind's whole_body_limit (streaming.WHOLE_BODY_LIMIT unless it says otherwise),
        past which the reader fails as `protocol` without reading the rest; a refusal's is
        only counted (its first KiB kept: error_body), and past ERROR_BODY_LIMIT no longer
        waited for."""
        if self.failed.done():
            return
        self.body_bytes += len(chunk)
        limit = self.protocol.whole_body_limit
        if error:
            self.error_body.add(chunk)
            if self.body_bytes > ERROR_BODY_LIMIT:
                self.failed.set_result(None)
        elif self.body_bytes > limit:
            self.raw = bytearray()
            self._fail(ErrorClass.PROTOCOL, f"response body over {size_text(limit)}")
        else:
            self.raw += chunk

    def ends(self) -> set[asyncio.Future[object]]:
        """What ends the wait for a response: its end, or the reader's failure."""
        assert self.exchange is not None
        return {cast("asyncio.Future[object]", self.exchange.done),
                cast("asyncio.Future[object]", self.failed)}

    async def ended(self) -> None:
        """Wait for the response's end or the reader's failure: `asyncio.wait(self.ends(),
        return_when=FIRST_COMPLETED)` for these two futures, without its sets and counters
        (once per request measured). A cancelled wait (the deadline) leaves no callback
        behind."""
        assert self.exchange is not None
        done, failed = self.exchange.done, self.failed
        if done.done() or failed.done():
            return
        waiter = self.loop.create_future()

        def wake(_: object) -> None:
            if not waiter.done():
                waiter.set_result(None)

        done.add_done_callback(wake)
        failed.add_done_callback(wake)
        try:
            await waiter
        finally:
            done.remove_done_callback(wake)
            failed.remove_done_callback(wake)

    def finish_stream(self, end_ns: int) -> None:
        """The response ended: a trailing event without a blank line is processed (a raw
        body is told it ended)."""
        if self.end_ns is None and self.state.failure is None and not self.state.done:
            raw = self.raw_stream()
            if raw is not None:
                raw.on_end(end_ns)
                self.end_ns = end_ns
                return
            try:
                for event in self.decoder.close():
                    self.state.on_event(event, end_ns)
            except UnicodeDecodeError:
                self.state.failure = ErrorClass.PROTOCOL
                self.state.detail = INVALID_UTF8
            except EventTooLarge as exc:
                self.state.failure = ErrorClass.PROTOCOL
                self.state.detail = str(exc)
            self.end_ns = end_ns


async def send_over_http1(pool: ConnectionPool, target: Target, encoded: EncodedRequest,
                          stream: bool, t_send_ns: int, *, keep_reply: bool = False,
                          expect: ExpectedItems | None = None,
                          fresh: bool = False) -> Measurement:
    """Send one encoded request of any API kind (its protocol's `encode`) and measure it by
    the target's protocol (probes/protocols); with `keep_reply`, keep what it answered
    (Measurement.reply); with `expect`, check the items of a whole answer (expected.py);
    with `fresh`, on a connection of its own (`connection: new`). Its HTTP phases and trace
    id are part of the measurement (phases.py, trace_context.py). Never raises for endpoint
    misbehaviour; no retries. Deadlines: connect, first token and total, from t_send (see
    protocols.streaming.Deadlines)."""
    payload, headers = encoded
    loop = asyncio.get_running_loop()
    deadlines = Deadlines.from_t_send(target, t_send_ns, loop)
    reader = _Reader(stream, loop, deadlines, target.max_event_bytes, keep_reply,
                     protocol_for(target), expect, payload)
    try:
        measurement = reader.protocol.stream_figures(
            await _exchange(pool, target, payload, headers, stream, t_send_ns, reader,
                            deadlines, loop, fresh), reader.state)
        if reader.ended_fields_given:
            return measurement
        return _finished(measurement, stream, reader.exchange, headers)
    except BaseException:  # cancelled: the connection must not be reused
        if reader.exchange is not None:
            pool.abandon(reader.exchange)
        raise
    finally:
        reader.exchange = None  # break the reader <-> exchange cycle for refcounting


def _finished(measurement: Measurement, stream: bool, exchange: Exchange | None,
              headers: Mapping[str, str]) -> Measurement:
    """`measurement` marked streamed when it was asked to stream and not answered whole
    (`streamed` still None), with its phases and trace id: one copy for all of them, after
    the response."""
    updates = _ended_fields(stream and measurement.streamed is None, exchange, headers)
    return replace(measurement, **updates) if updates else measurement


def _ended_fields(streamed: bool, exchange: Exchange | None,
                  headers: Mapping[str, str]) -> dict[str, Any]:
    """The Measurement fields known once the exchange ended: `streamed` (when true), its
    phases and trace id (when tracing)."""
    fields: dict[str, Any] = {"streamed": True} if streamed else {}
    if tracing():
        trace_id = trace_id_of(headers)
        if exchange is not None:
            fields.update(exchange.phases(trace_id))
        elif trace_id is not None:
            fields["trace_id"] = trace_id
    return fields


async def _exchange(pool: ConnectionPool, target: Target, payload: bytes,
                    headers: dict[str, str], stream: bool, t_send_ns: int, reader: _Reader,
                    deadlines: Deadlines, loop: asyncio.AbstractEventLoop,
                    fresh: bool) -> Measurement:
    status: int | None = None
    try:
        async with asyncio.timeout_at(deadlines.initial(stream)) as deadline:
            reader.deadline = deadline
            reader.exchange = await pool.start(
                "POST", request_url(target), headers, payload, reader.on_body,
                connect_timeout_s=target.timeout_connect_s, fresh=fresh)
            status, response_headers = await reader.exchange.head
            content_type = response_headers.get("content-type", "")
            if reader.refused():  # ends at its head; its words are read for up to DRAIN_S
                result = failure(t_send_ns, status,
                                 error_class_for_status(status) or ErrorClass.PROTOCOL,
                                 f"HTTP {status}")
                await asyncio.wait(reader.ends(), timeout=DRAIN_S,
                                   return_when=asyncio.FIRST_COMPLETED)
                if not reader.exchange.done.done() or reader.body_bytes > ERROR_BODY_LIMIT:
                    pool.abandon(reader.exchange)
                return replace(result, error_detail=refusal_detail(
                    status, content_type, bytes(reader.error_body.kept),
                    request_secrets(headers)))
            if not stream or reader.answered_whole():
                await reader.ended()
                if reader.state.failure is not None:
                    pool.abandon(reader.exchange)
                    whole = failure(t_send_ns, status, reader.state.failure,
                                    reader.state.detail or "bad response")
                else:
                    whole = reader.protocol.whole(bytes(reader.raw), t_send_ns,
                                                  await reader.exchange.done, status,
                                                  reader.keep_reply, reader.expect)
                return answered_whole(whole) if stream else whole
            if not is_event_stream(content_type) and reader.raw_stream() is None:
                pool.abandon(reader.exchange)
                return failure(t_send_ns, status, ErrorClass.PROTOCOL,
                               f"{NOT_EVENT_STREAM}: {media_type(content_type)}")
            await reader.ended()
            if reader.state.failure is not None:
                pool.abandon(reader.exchange)
                return partial_result(reader.state, t_send_ns, status, reader.state.failure,
                                      reader.state.detail or "bad stream")
            reader.finish_stream(await reader.exchange.done)
    except TimeoutError:
        if reader.exchange is not None:
            pool.abandon(reader.exchange)
        if reader.state.failure is not None:
            return partial_result(reader.state, t_send_ns, status, reader.state.failure,
                                  reader.state.detail or "bad stream")
        if not reader.state.done:
            late = deadlines.expired(stream=stream, first_token_seen=reader.first_token_seen,
                                     now=loop.time())
            return partial_result(reader.state, t_send_ns, status, late, DEADLINE_EXCEEDED)
    except TransportError as exc:
        if not (reader.state.complete and reader.state.failure is None):
            error = classify_transport_error(exc, response_started=status is not None)
            return partial_result(reader.state, t_send_ns, status, error, exc.detail)
    if status is None:
        return failure(t_send_ns, None, ErrorClass.PROTOCOL, "no response")
    error_class, detail = reader.state.outcome()
    reader.ended_fields_given = True  # one Measurement made, not one and then its copy
    return from_state(reader.state, t_send_ns, reader.end_ns or time.perf_counter_ns(), status,
                      error_class, detail, **_ended_fields(stream, reader.exchange, headers))


async def call_over_http1(pool: ConnectionPool, target: Target, method: str, path: str,
                          payload: bytes, headers: Mapping[str, str], *, keep: int,
                          limit: int, fresh: bool = False) -> Answer:
    """One plain request of an exchanged kind's flow over the lean pool (base.HttpCall):
    `method` to the target's base URL + `path`; its body counted as it arrives, its first
    `keep` bytes kept, and past `limit` bytes given up (the connection with it) as
    `protocol`; with `fresh`, on a connection of its own. CallFailed for a transport
    failure; a cancelled call gives its connection up, as a cancelled request does."""
    body = bytearray()
    size = 0
    over: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_body(chunk: bytes, _now: int) -> None:
        nonlocal size
        size += len(chunk)
        if size > limit:
            if not over.done():
                over.set_result(None)
            return
        room = keep - len(body)
        if room > 0:
            body.extend(memoryview(chunk)[:room])

    exchange: Exchange | None = None
    try:
        exchange = await pool.start(method, target.base_url.rstrip("/") + path, headers,
                                    payload, on_body, connect_timeout_s=target.timeout_connect_s,
                                    fresh=fresh)
        status, response_headers = await exchange.head
        await asyncio.wait({cast("asyncio.Future[object]", exchange.done),
                            cast("asyncio.Future[object]", over)},
                           return_when=asyncio.FIRST_COMPLETED)
        if over.done():
            raise CallFailed(ErrorClass.PROTOCOL, f"response body over {size_text(limit)}")
        end_ns = exchange.done.result()
    except TransportError as exc:
        started = exchange is not None and exchange.head.done() and \
            not exchange.head.cancelled() and exchange.head.exception() is None
        raise CallFailed(classify_transport_error(exc, response_started=started),
                         exc.detail) from None
    except BaseException:  # over its limit, or cancelled: the connection must not be reused
        if exchange is not None:
            pool.abandon(exchange)
        raise
    return Answer(status, response_headers.get("content-type", ""), bytes(body), size, end_ns)
