"""Where and how a probe sends its requests: the endpoint as plain data."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import Field

from sustain.probes.client.sse import MAX_EVENT_BYTES
from sustain.probes.inputs import InputModel
from sustain.probes.measure.deployment import Deployment


class ApiKind(enum.StrEnum):
    """The API an endpoint speaks: the name of a kind, whose object (what its requests and
    answers are) is probes/protocols/registry.py's."""

    OPENAI_CHAT = "openai-chat"
    OPENAI_COMPLETIONS = "openai-completions"
    OPENAI_RESPONSES = "openai-responses"
    ANTHROPIC_MESSAGES = "anthropic-messages"
    OPENAI_EMBEDDINGS = "openai-embeddings"
    RERANK = "rerank"
    OPENAI_TRANSCRIPTIONS = "openai-transcriptions"
    OPENAI_SPEECH = "openai-speech"
    OPENAI_IMAGES = "openai-images"
    OPENAI_VIDEOS = "openai-videos"
    HTTP = "http"


CLIENT_HEADERS = frozenset({
    # Message framing: the client frames the body it sends; a second Content-Length or a
    # Transfer-Encoding beside it is a malformed (or smuggled) request.
    "content-length", "transfer-encoding", "expect",
    # The target: the client names the host it connects to (the egress policy judged it).
    "host",
    # Hop-by-hop (RFC 9110 7.6.1, RFC 9112 9.6): about this connection, not the request.
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade",
    "http2-settings", "proxy-authenticate", "proxy-authorization",
})
"""Header names (lower case) only the HTTP client may set: an endpoint may not give them."""
MAX_CHECK_BODY_CHARS = 1_000_000
"""Longest request body of an `http` check."""
MAX_BODY_CONTAINS_CHARS = 10_000
"""Longest text an `http` check looks for in a response."""


def client_headers(names: Iterable[str]) -> list[str]:
    """Those of `names` (compared case-insensitively) that only the client may set, in
    order."""
    return [name for name in names if name.lower() in CLIENT_HEADERS]


class HttpCheck(InputModel):
    """What an `http` probe sends and expects: a plain request, timed end to end."""

    method: str = Field(default="GET", pattern=r"^(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS)$")
    path: str = Field(default="/", pattern=r"^/[^\s]*$", max_length=2048,
                      description="Appended to the endpoint's base URL.")
    expected_status: int = Field(default=200, ge=100, le=599)
    body: str | None = Field(default=None, max_length=MAX_CHECK_BODY_CHARS,
                             description="Request body, sent as is.")
    body_contains: str | None = Field(
        default=None, min_length=1, max_length=MAX_BODY_CONTAINS_CHARS,
        description="The response must contain this text. The service allows it only on "
        "targets the operator listed in SUSTAIN_ALLOWED_TARGETS.")


@dataclass(frozen=True, slots=True)
class Target:
    """An endpoint to measure. The auth secret is a reference, resolved at request time."""

    base_url: str
    api_kind: ApiKind
    model: str
    headers: Mapping[str, str] = field(default_factory=dict)
    auth_secret_ref: str | None = None
    timeout_connect_s: float = 5.0
    timeout_first_token_s: float = 30.0
    timeout_total_s: float = 120.0
    tls_verify: bool = True
    http2: bool = False
    """Offer HTTP/2 (ALPN on https; plain http stays HTTP/1.1)."""
    http_check: HttpCheck | None = None
    """For api_kind http: the request and its expectations."""
    metrics_url: str | None = None
    """The server's Prometheus exposition, read beside every run (probes/telemetry)."""
    metrics_interval_s: float = 1.0
    metrics_names: tuple[str, ...] = ()
    """Sample names read besides the built-in series."""
    deployment: Deployment | None = None
    """What serves the endpoint (accelerators, price, power): each run's efficiency."""
    rag: RagEndpoints | None = None
    """A RAG probe's other endpoints (its embeddings and rerank ones); this target
    generates."""
    max_event_bytes: int = MAX_EVENT_BYTES
    """Cap on one server-sent event line, and on one event's data, in bytes: a stream that
    sends more ends at once as `protocol` (see sse.py). Not an endpoint setting: the default
    fits every OpenAI-compatible server; a library user or a test may lower or raise it."""


@dataclass(frozen=True, slots=True)
class RagEndpoints:
    """The endpoints a RAG probe chains before its generating target."""

    embed: Target
    """An openai-embeddings endpoint: embeds the corpus once per run, then each question."""
    rerank: Target | None = None
    """A rerank endpoint, when the pipeline reranks what it retrieved."""
