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
- the workload fields (and so the `sustain probe` flags) that apply to it (`workload_fields`);
- what it needs from the simulator (`simulator_path`: the route it must serve).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, Protocol

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import Measurement
from sustain.probes.protocols.streaming import (
    EncodedRequest,
    ReplyCollector,
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


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


class ApiProtocol(ABC):
    """One API kind (an abstract base: each kind's module defines a subclass and its one
    instance). The class attributes are plain data; the methods are pure, without I/O."""

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

    @property
    def simulator_path(self) -> str:
        """The route the simulator must serve for this kind (simulator/app.py)."""
        return SIMULATOR_ROOT + self.path

    def auth(self, secret: str) -> dict[str, str]:
        """The headers that carry the endpoint's key."""
        return bearer(secret)

    def stream_state(self, keep_reply: bool) -> StreamState:
        return self.stream_type(reply=ReplyCollector() if keep_reply else None)

    @abstractmethod
    def whole(self, raw: bytes, t_send_ns: int, end: int, status: int,
              keep_reply: bool = False, expect: ExpectedItems | None = None) -> Measurement:
        """The Measurement of a whole (non-streamed) answer `raw` that ended at `end` (ns);
        with `keep_reply`, keeping what it answered; with `expect`, checking its items."""

    def shape(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body`, written as OpenAI chat writes it, in this kind's shape (changed in place
        and returned; shapes.py)."""
        return body

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
