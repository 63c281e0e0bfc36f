"""What one API kind is to the probes: the interface each kind's module implements, as one
object (registry.py maps each ApiKind to it). Everything that differs between kinds is here, so
the rest of the probes (the request builder, the senders, the transports) and the service
(the CLI's flags, the API's schemas) ask the kind's object instead of switching on the kind:

- where its requests go (`path`) and how its key and fixed headers are sent (`auth`,
  `headers`);
- how its request is built and encoded: the form of its requests (`form`: a prompt or a
  conversation, a batch of items, an audio upload, a plain check), how a chat-shaped body
  becomes its own (`shape`), a prompt's place in the body (`set_prompt`), an items body
  (`item_body`) and what its answer must hold (`expected_items`), and the bytes on the wire
  (`encode`, `encode_upload`);
- how a stream event (`stream_type`, a StreamState) or a whole answer (`whole`) becomes the
  Measurement, and which per-kind figures it adds (`figures`);
- the workload fields (and so the `sustain probe` flags) that apply to it (`workload_fields`),
  and how they enter its body (`body_for`);
- how its answers are read where they are not one JSON body or an SSE stream: a raw streamed
  body (a RawStreamState, chosen by the answer's content type: audio bytes), a larger body or
  event than a chat answer's (`whole_body_limit`, `event_bytes`), and the figures known from
  the request or its stream (`request_figures`, `stream_figures`);
- a sample that is a flow of several requests (an asynchronous job: create, poll, fetch), the
  kind's own `exchange` over the sender's connections (`HttpCall`) in place of one request;
- what it needs from the simulator (`simulator_path`: the route it must serve).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.sse import size_text
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.reply_collector import ReplyCollector
from sustain.probes.protocols.streaming import (
    WHOLE_BODY_LIMIT,
    EncodedRequest,
    StreamState,
    encode_request,
)

RequestForm = Literal["prompt", "items", "audio", "check"]
"""What a kind's requests carry: `prompt`, a generation's prompt or conversation (streamed
or whole); `items`, a batch of texts answered whole (latency end to end, throughput items per
second); `audio`, a multipart upload of an audio clip; `check`, a plain HTTP request
(client/http_check.py), timed end to end."""
RagStage = Literal["generate", "embed", "rerank"]
"""The stage of a RAG pipeline an endpoint of the kind may be (load/rag.py)."""
SIMULATOR_ROOT = "/v1"
"""The simulator's API root: a kind's `path` below it is the route the simulator serves."""


class ItemSizes(Protocol):
    """The workload's sizes an items request is built from (workload/spec.py's Workload)."""

    @property
    def batch_size(self) -> int: ...
    @property
    def documents(self) -> int: ...
    @property
    def dimensions(self) -> int | None: ...


class KindSettings(Protocol):
    """The workload's settings of the kinds that generate media (workload/spec.py's
    Workload): what `body_for` puts in their bodies."""

    @property
    def stream(self) -> bool: ...
    @property
    def voice(self) -> str: ...
    @property
    def audio_format(self) -> str: ...
    @property
    def stream_format(self) -> str: ...
    @property
    def output_images(self) -> int: ...
    @property
    def output_image_size(self) -> str: ...
    @property
    def partial_images(self) -> int: ...
    @property
    def poll_interval_s(self) -> float: ...


@dataclass(slots=True)
class RawStreamState(StreamState):
    """A stream state that also reads a streamed body that is not SSE (raw audio bytes), for
    the kinds whose answers are such bodies (their `stream_type`). The transports hand it the
    body's chunks as they arrive (`on_bytes`, stamped as SSE events are) once its head's
    content type is one it `accepts`, then `on_end` when the body ended whole.

    It runs on the event loop that times every other request: a chunk costs work in
    proportion to itself only, and is counted, never kept (a small header aside), so what one
    answer holds is bounded whatever its length; past `max_bytes` of body the state fails as
    `protocol` and the transport stops reading (the connection is given up)."""

    max_bytes: ClassVar[int] = 64 * 1024 * 1024
    """Most body bytes read of one answer."""
    body_bytes: int = 0
    """Bytes of body read so far."""

    def accepts(self, content_type: str) -> bool:  # noqa: ARG002 - none here
        """Whether a 2xx body of `content_type` is read raw by this state (none, here)."""
        return False

    def on_bytes(self, chunk: bytes, now_ns: int) -> None:
        """A chunk of the body that arrived at `now_ns`: counted against `max_bytes`, then
        handed to `on_chunk`."""
        if self.failure is not None or self.done:
            return
        self.body_bytes += len(chunk)
        if self.body_bytes > self.max_bytes:
            self.fail(ErrorClass.PROTOCOL, f"streamed body over {size_text(self.max_bytes)}")
            return
        self.on_chunk(chunk, now_ns)

    def on_chunk(self, chunk: bytes, now_ns: int) -> None:
        """What the kind reads in a chunk (its output's first byte and gaps, its size)."""

    def on_end(self, now_ns: int) -> None:  # noqa: ARG002 - a kind may time its end
        """The body ended whole (its framing complete): the stream is done."""
        if self.failure is None:
            self.done = True


def raw_reader(state: StreamState, content_type: str) -> RawStreamState | None:
    """`state`, when it reads a body of `content_type` raw (RawStreamState.accepts); None
    when the body is to be read as SSE or one JSON answer."""
    if isinstance(state, RawStreamState) and state.accepts(content_type):
        return state
    return None


@dataclass(frozen=True, slots=True)
class Answer:
    """One plain HTTP answer read by a kind's `exchange`: its status, content type, the first
    `keep` bytes of its body, how many it had in all, and when it ended (perf_counter_ns)."""

    status: int
    content_type: str
    body: bytes
    size: int
    end_ns: int


class CallFailed(Exception):
    """A request of an exchange that got no complete answer: the transport's failure (its
    error class and a secret-free detail), or a body over its `limit` (`protocol`)."""

    def __init__(self, error: ErrorClass, detail: str) -> None:
        super().__init__(f"{error}: {detail}")
        self.error = error
        self.detail = detail


class HttpCall(Protocol):
    """One plain request over the sender's connections (the lean pool or httpx, as its
    single requests go): `method` to the target's base URL + `path`, the encoded `payload`
    with `headers` as given (the encoded request's: the auth and the target's own headers
    among them); its body read to the end but kept only up to `keep` bytes, and counted up
    to `limit` bytes, past which the call fails (CallFailed, `protocol`) without reading the
    rest. Raises CallFailed for every failure of the endpoint; cancelling it gives its
    connection up."""

    async def __call__(self, method: str, path: str, payload: bytes,
                       headers: Mapping[str, str], *, keep: int, limit: int) -> Answer: ...


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


class ApiProtocol(ABC):
    """One API kind (an abstract base: each kind's module defines a subclass and its one
    instance). The class attributes are plain data; the methods are pure, without I/O, but
    for an exchanged kind's `exchange`, which does its I/O through the call it is given."""

    kind: ClassVar[ApiKind]
    path: ClassVar[str]
    """Appended to the endpoint's base URL, the API root (e.g. http://host:8000/v1)."""
    form: ClassVar[RequestForm] = "prompt"
    stream_type: ClassVar[type[StreamState]] = StreamState
    """How a streamed answer is read, event by event (streaming.py)."""
    headers: ClassVar[tuple[tuple[str, str], ...]] = ()
    """Headers every request carries unless the endpoint sets them itself."""
    conversation: ClassVar[bool] = False
    """Requests are conversations (a list of messages), not a bare prompt: sessions, images
    and RAG generation need such a kind."""
    counts_prompt: ClassVar[bool] = False
    """A request carries one prompt the server counts as its prompt tokens, so synthetic
    prompts can be sized to a length in tokens (workload/requests.py)."""
    first_token: ClassVar[bool] = True
    """Whether an answer has a first token (TTFT, TPOT): False for the kinds answering whole,
    whose latency SLO is end to end only (service/evaluation/thresholds.py)."""
    rag_stage: ClassVar[RagStage | None] = None
    workload_fields: ClassVar[frozenset[str]] = frozenset()
    """The Workload fields that apply to this kind alone (each has its `sustain probe` flag);
    the common ones (lengths, cache, seed, extra_body, ...) apply to every kind."""
    figures: ClassVar[tuple[str, ...]] = ()
    """The Measurement fields this kind fills besides latency, status and error: its
    per-kind figures (TTFT and ITL of a stream, items of a batch, audio seconds)."""
    whole_body_limit: ClassVar[int] = WHOLE_BODY_LIMIT
    """Bytes of a whole (JSON) answer read: past them the request ends as `protocol`
    (streaming.WHOLE_BODY_LIMIT, unless the kind's answers are larger: images)."""
    exchanged: ClassVar[bool] = False
    """Whether one sample of this kind is a flow of several requests (`exchange`), not one
    request measured by the transport."""
    otel_operation: ClassVar[str | None] = None
    """Its requests' `gen_ai.operation.name` in OpenTelemetry's GenAI semantic conventions
    (docs/opentelemetry.md): a well-known value where one applies (`chat`,
    `text_completion`, `embeddings`, `generate_content`), else the kind's own; None for a
    kind whose requests are no GenAI operation (a plain HTTP check), which exports none."""
    otel_provider: ClassVar[str | None] = None
    """Its requests' `gen_ai.provider.name`: the provider whose API (and telemetry flavour)
    the kind speaks (`openai`, `anthropic`, `cohere`), whoever serves it; None with
    `otel_operation`."""

    @property
    def simulator_path(self) -> str:
        """The route the simulator must serve for this kind (simulator/app.py)."""
        return SIMULATOR_ROOT + self.path

    def auth(self, secret: str) -> dict[str, str]:
        """The headers that carry the endpoint's key."""
        return bearer(secret)

    def stream_state(self, keep_reply: bool) -> StreamState:
        return self.stream_type(reply=ReplyCollector() if keep_reply else None)

    def stream_state_for(self, payload: bytes, keep_reply: bool) -> StreamState:  # noqa: ARG002
        """The state that reads the answer to the encoded request `payload` (the transports'
        call): `stream_state`, unless the kind's reading depends on what it asked (the audio
        format a speech request named, read from `payload` only when its answer comes)."""
        return self.stream_state(keep_reply)

    def streamed(self, stream: bool) -> bool:
        """Whether a request is read as a stream, given the workload's `stream`: as asked,
        unless the kind's answers always stream (speech's audio)."""
        return stream

    def event_bytes(self, target_cap: int) -> int:
        """The cap on one SSE event of this kind's streams, given the target's
        (`max_event_bytes`): the target's, unless the kind's events are larger (a partial
        image)."""
        return target_cap

    def request_figures(self, body: Mapping[str, Any]) -> dict[str, Any]:  # noqa: ARG002
        """Measurement fields known from the request's `body` alone (the characters a
        speech request asks to be spoken), set on its measurement once it ended."""
        return {}

    def stream_figures(self, measurement: Measurement,
                       state: StreamState) -> Measurement:  # noqa: ARG002 - none here
        """`measurement`, with the figures its stream's `state` counted that the shared
        builders (streaming.from_state) do not know of (audio seconds, images)."""
        return measurement

    async def exchange(self, call: HttpCall, target: Target, encoded: EncodedRequest,
                       settings: KindSettings, t_send_ns: int) -> Measurement:
        """One sample of an `exchanged` kind: its requests over `call`, the first being
        `encoded`, sent at `t_send_ns`, under the target's deadlines, paced by the
        workload's `settings` (a job's poll interval). Never raises for endpoint
        misbehaviour. The one method of a kind that does I/O, and only through `call`."""
        raise NotImplementedError(f"{self.kind} requests are single requests")

    @abstractmethod
    def whole(self, raw: bytes, t_send_ns: int, end: int, status: int,
              keep_reply: bool = False, expect: ExpectedItems | None = None) -> Measurement:
        """The Measurement of a whole (non-streamed) answer `raw` that ended at `end` (ns);
        with `keep_reply`, keeping what it answered; with `expect`, checking its items."""

    def shape(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body`, written as OpenAI chat writes it, in this kind's shape (changed in place
        and returned; shapes.py)."""
        return body

    def body_for(self, body: dict[str, Any],
                 settings: KindSettings) -> dict[str, Any]:  # noqa: ARG002 - none here
        """`body`, written as OpenAI chat writes it (prompt, model, output cap, streaming),
        in this kind's shape with the workload's `settings` that apply to it (changed in
        place and returned): the shape alone, unless the kind takes settings of its own."""
        return self.shape(body)

    def set_prompt(self, body: dict[str, Any], text: str) -> None:
        """Put a request's prompt text in `body`: one user message of a conversation kind,
        else `prompt`."""
        if self.conversation:
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text

    def item_body(self, body: dict[str, Any], model: str, sizes: ItemSizes,
                  texts: Callable[[int], list[str]], query: Callable[[], str]) -> None:
        """Fill an items request's `body`: `texts(count)` makes that many salted texts,
        `query()` a salted query."""
        raise NotImplementedError(f"{self.kind} requests carry no items")

    def expected_items(self, body: Mapping[str, Any], sizes: ItemSizes) -> ExpectedItems:
        """What the answer to an items request's `body` must hold (client/expected.py)."""
        raise NotImplementedError(f"{self.kind} requests carry no items")

    def encode(self, body: Mapping[str, Any], headers: Mapping[str, str]) -> EncodedRequest:
        """A JSON body and its headers, encoded before t_send (streaming.encode_request)."""
        return encode_request(body, headers)

    def encode_upload(self, fields: Mapping[str, str], data: bytes,
                      headers: Mapping[str, str]) -> EncodedRequest:
        """A multipart upload (form fields and a file), for the `audio` form."""
        raise NotImplementedError(f"{self.kind} requests upload nothing")
