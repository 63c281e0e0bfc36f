"""Where and how a probe sends its requests: the endpoint as plain data."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import Field

from sustain.probes.client.sse import MAX_EVENT_BYTES
from sustain.probes.inputs import InputModel
from sustain.probes.measure.deployment import Deployment


class ApiKind(enum.StrEnum):
    OPENAI_CHAT = "openai-chat"
    OPENAI_COMPLETIONS = "openai-completions"
    HTTP = "http"


class HttpCheck(InputModel):
    """What an `http` probe sends and expects: a plain request, timed end to end."""

    method: str = Field(default="GET", pattern=r"^(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS)$")
    path: str = Field(default="/", pattern=r"^/[^\s]*$", max_length=2048,
                      description="Appended to the endpoint's base URL.")
    expected_status: int = Field(default=200, ge=100, le=599)
    body: str | None = Field(default=None, max_length=1_000_000,
                             description="Request body, sent as is.")
    body_contains: str | None = Field(default=None, min_length=1, max_length=10_000,
                                      description="The response must contain this text.")


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
    max_event_bytes: int = MAX_EVENT_BYTES
    """Cap on one server-sent event line, and on one event's data, in bytes: a stream that
    sends more ends at once as `protocol` (see sse.py). Not an endpoint setting: the default
    fits every OpenAI-compatible server; a library user or a test may lower or raise it."""
