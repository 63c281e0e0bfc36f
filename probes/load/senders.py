"""Which send function measures a target, bound to its connections and request bodies.

The one dispatch from the form of a target's requests (its protocol's, probes/protocols) and
its transport to a sender:

- every API kind (the `prompt`, `items` and `audio` forms) over HTTP/1.1: the lean pool
  (client/http1.py); with `http2` set, httpx (client/httpx_transport.py), which offers HTTP/2;
  each form has its `prepare` (PREPARES); a kind whose sample is a flow of several requests
  (`exchanged`: a video job) runs its own `exchange` over the same pool or client, through
  their plain call (call_over_http1, call_over_httpx);
- the `check` form (`http`): a plain check through httpx (client/http_check.py).

A sender builds what it needs up front (the workload's request builder, which may raise
DatasetError or ValueError before anything is sent; its dataset is read only where the
DatasetPolicy allows) and returns `prepare(seq)`, the shape the
load drivers take: each call builds request `seq` (its body encoded before t_send) and returns
a SendFn, called with t_send in ns (perf_counter_ns), that sends it once and measures it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.http1 import call_over_http1, send_over_http1
from sustain.probes.client.http_check import send_http
from sustain.probes.client.httpx_transport import call_over_httpx, send_over_httpx
from sustain.probes.client.target import HttpCheck, Target
from sustain.probes.client.trace_context import trace_id_of, traced
from sustain.probes.load.calibrate import SizedPrompts
from sustain.probes.load.drivers import Prepare
from sustain.probes.measure.expect import Expect
from sustain.probes.measure.quality import meets
from sustain.probes.measure.sample import Measurement
from sustain.probes.protocols.base import HttpCall
from sustain.probes.protocols.registry import is_check
from sustain.probes.protocols.streaming import EncodedRequest
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.sessions import Dialogue
from sustain.probes.workload.spec import Workload
from sustain.probes.workload.traces import Replay

SESSION_HEADER = "x-session-id"
"""The header naming a turn's conversation, when the workload asks for it (as MLPerf
Endpoints' agentic workload sends it, for sticky routing)."""

SendFn = Callable[[int], Awaitable[Measurement]]
"""send(t_send_ns) -> Measurement: one request, bound to its connection and payload, sent
exactly once; never raises for endpoint misbehaviour (load.drivers.Request)."""
PrepareFn = Prepare
"""prepare(seq, dialogue) builds request `seq` (the next turn of `dialogue`, when given)
before its send time is taken (load.drivers.Prepare)."""
Sender = Callable[[HttpClients, Target, Workload, Mapping[str, str], DatasetPolicy,
                   Replay | None], PrepareFn]
"""sender(clients, target, workload, headers, datasets, replay) -> prepare; `headers` already
carry the auth; `datasets` says where the workload's dataset may be read from; `replay` is a
trace profile's loaded trace (each request's lengths), else None."""


def fresh_connections(workload: Workload) -> bool:
    """Whether each request opens a connection of its own (the workload's `connection:
    new`)."""
    return workload.connection == "new"


def api_over_http1(clients: HttpClients, target: Target, workload: Workload,
                   headers: Mapping[str, str], datasets: DatasetPolicy,
                   replay: Replay | None = None) -> PrepareFn:
    """Every API kind over the lean HTTP/1.1 pool (client/http1.py), on kept-alive
    connections or a new one per request (the workload's `connection`)."""
    pool = clients.pool(tls_verify=target.tls_verify)
    fresh = fresh_connections(workload)
    return api_prepare(partial(send_over_http1, pool, target, fresh=fresh), target, workload,
                       headers, datasets, replay,
                       call=partial(call_over_http1, pool, target, fresh=fresh))


def api_over_httpx(clients: HttpClients, target: Target, workload: Workload,
                   headers: Mapping[str, str], datasets: DatasetPolicy,
                   replay: Replay | None = None) -> PrepareFn:
    """Every API kind over httpx, offering HTTP/2 (client/httpx_transport.py)."""
    client = clients.httpx(tls_verify=target.tls_verify, http2=True,
                           fresh=fresh_connections(workload))
    return api_prepare(partial(send_over_httpx, client, target), target, workload,
                       headers, datasets, replay, call=partial(call_over_httpx, client, target))


def api_prepare(transport: Callable[..., Awaitable[Measurement]], target: Target,
                workload: Workload, headers: Mapping[str, str], datasets: DatasetPolicy,
                replay: Replay | None, *, call: HttpCall | None = None) -> PrepareFn:
    """`prepare` over a transport bound to its connections and target (called as
    transport(encoded, stream, t_send_ns, keep_reply=...)): a request keeps its reply when it
    is a session's turn (the history needs it) or a quality canary (scored, then let go).
    Synthetic prompts get a SizedPrompts, to be calibrated before the run (calibrate.py),
    and each measurement carries the prompt length its request asked for, and the figures
    its kind knows from the request (its `request_figures`). An exchanged kind's sample is
    its `exchange` over `call`, the plain request of the same connections."""
    builder = RequestBuilder(workload, target.api_kind, target.model, datasets, replay)
    protocol = builder.protocol
    if protocol.exchanged:
        if call is None:
            raise ValueError(f"{target.api_kind} needs a transport's plain call")
        return exchange_prepare(call, target, builder, headers)
    form_prepare = PREPARES.get(protocol.form)
    if form_prepare is not None:
        return form_prepare(transport, builder, headers)
    stream = protocol.streamed(workload.stream)

    def prepare(seq: int, dialogue: Dialogue | None = None) -> SendFn:
        if dialogue is not None:
            return partial(transport, turn_request(builder, seq, dialogue, headers),
                           workload.stream, keep_reply=True)
        expect = builder.expectation(seq)
        body = builder.body(seq)
        send: SendFn = partial(transport, protocol.encode(body, headers), stream,
                               keep_reply=expect is not None)
        size, asked = builder.image_size(seq), builder.requested_tokens(seq)
        figures = protocol.request_figures(body)
        if size is not None or asked is not None or figures:
            send = labelled(send, size, asked, figures)
        return send if expect is None else scored(send, expect)
    if builder.synthetic:
        return SizedPrompts(prepare, builder, transport, headers, target)
    return prepare


def labelled(send: SendFn, image_size: str | None, prompt_tokens_requested: int | None,
             figures: Mapping[str, Any] | None = None) -> SendFn:
    """`send`, its measurement labelled with the size of the images it attached, the
    prompt length it asked for and the figures its kind knows from the request (a speech
    request's characters), after the response: never part of the request's time."""
    async def request(t_send_ns: int) -> Measurement:
        return replace(await send(t_send_ns), image_size=image_size,
                       prompt_tokens_requested=prompt_tokens_requested, **(figures or {}))
    return request


def exchange_prepare(call: HttpCall, target: Target, builder: RequestBuilder,
                     headers: Mapping[str, str]) -> PrepareFn:
    """`prepare` for an exchanged kind (an asynchronous job): request `seq`'s first request
    encoded before t_send, then the kind's `exchange` (its requests over `call`) is the
    sample. Its requests all carry the first one's traceparent (one trace per sample), whose
    trace id the measurement keeps; the flow has no phases of its own."""
    def prepare(seq: int, _dialogue: Dialogue | None = None) -> SendFn:
        body = builder.body(seq)
        encoded = builder.protocol.encode(body, headers)
        exchange: SendFn = partial(builder.protocol.exchange, call, target, encoded,
                                   builder.workload)
        trace_id = trace_id_of(encoded[1])
        if trace_id is None:
            return exchange

        async def request(t_send_ns: int) -> Measurement:
            return replace(await exchange(t_send_ns), trace_id=trace_id)
        return request
    return prepare


def items_prepare(transport: Callable[..., Awaitable[Measurement]], builder: RequestBuilder,
                  headers: Mapping[str, str]) -> PrepareFn:
    """`prepare` for the item kinds: each request whole (never streamed), its answer checked
    against the items it sent (probes/client/expected.py)."""
    def prepare(seq: int, _dialogue: Dialogue | None = None) -> SendFn:
        body = builder.body(seq)
        return partial(transport, builder.protocol.encode(body, headers), False,
                       expect=builder.expected_items(body))
    return prepare


def audio_prepare(transport: Callable[..., Awaitable[Measurement]], builder: RequestBuilder,
                  headers: Mapping[str, str]) -> PrepareFn:
    """`prepare` for transcriptions: each request a multipart form with its own synthetic
    audio, its measurement carrying the audio's length (for the real-time factor)."""
    def prepare(seq: int, _dialogue: Dialogue | None = None) -> SendFn:
        fields, wav, seconds = builder.audio(seq)
        send: SendFn = partial(transport, builder.protocol.encode_upload(fields, wav, headers),
                               builder.workload.stream)

        async def request(t_send_ns: int) -> Measurement:
            return replace(await send(t_send_ns), audio_s=seconds)
        return request
    return prepare


def scored(send: SendFn, expect: Expect) -> SendFn:
    """`send`, its successful reply then scored against `expect` (Measurement.quality) and
    let go: the verdict is kept, not the text. Scoring starts after the response ended, so it
    is never part of the request's time."""
    async def request(t_send_ns: int) -> Measurement:
        measurement = await send(t_send_ns)
        reply = measurement.reply
        verdict = None if reply is None or measurement.error_class is not None \
            else meets(expect, reply, measurement.output_tokens)
        return replace(measurement, reply=None, quality=verdict)
    return request


def turn_request(builder: RequestBuilder, seq: int, dialogue: Dialogue,
                 headers: Mapping[str, str]) -> EncodedRequest:
    """The next turn of `dialogue` as request `seq`, with its session header if asked."""
    body = builder.turn_body(seq, dialogue)
    if dialogue.session_id is not None:
        headers = {**headers, SESSION_HEADER: dialogue.session_id}
    return builder.protocol.encode(body, headers)


def http_check_over_httpx(clients: HttpClients, target: Target, workload: Workload,
                          headers: Mapping[str, str], _datasets: DatasetPolicy,
                          _replay: Replay | None = None) -> PrepareFn:
    """Every request is the same check, with a traceparent of its own; of the workload, only
    `connection` applies."""
    client = clients.httpx(tls_verify=target.tls_verify, http2=target.http2,
                           fresh=fresh_connections(workload))
    check = target.http_check or HttpCheck()

    def prepare(_seq: int, _dialogue: Dialogue | None = None) -> SendFn:
        return partial(send_http, client, target, check, traced(dict(headers)),
                       egress=clients.egress)
    return prepare


def any_transport(clients: HttpClients, *, fresh: bool = False
                  ) -> Callable[..., Awaitable[Measurement]]:
    """One transport for requests to several targets (a RAG pipeline's stages): each over
    the lean pool, or httpx where its target offers HTTP/2 (with `fresh`, each on a
    connection of its own), called as
    transport(target, encoded, stream, t_send_ns, keep_reply=..., expect=...)."""
    async def send(target: Target, encoded: EncodedRequest, stream: bool, t_send_ns: int,
                   **options: Any) -> Measurement:
        if target.http2:
            return await send_over_httpx(
                clients.httpx(tls_verify=target.tls_verify, http2=True, fresh=fresh), target,
                encoded, stream, t_send_ns, **options)
        return await send_over_http1(clients.pool(tls_verify=target.tls_verify), target,
                                     encoded, stream, t_send_ns, fresh=fresh, **options)
    return send


def sender_for(target: Target) -> Sender:
    """The sender for this target's protocol (a plain check, or an API request) and
    transport."""
    if is_check(target.api_kind):  # through httpx, whatever the endpoint offers
        return http_check_over_httpx
    return api_over_httpx if target.http2 else api_over_http1


FormPrepare = Callable[[Callable[..., Awaitable[Measurement]], RequestBuilder,
                        Mapping[str, str]], PrepareFn]
PREPARES: dict[str, FormPrepare] = {"items": items_prepare, "audio": audio_prepare}
"""The `prepare` of each request form but `prompt` (api_prepare's own) and `check` (which
never gets there: sender_for)."""
