"""The one table from ApiKind to the object that implements that kind (base.ApiProtocol), and
what follows from a target's kind: where its requests go, how its key and fixed headers are
sent. Adding a kind is adding its module beside this one and its row here (and its name to
client/target.py's ApiKind); the request builder, the senders, the transports, the CLI and
the API's schemas read this table."""

from __future__ import annotations

from sustain.probes.client.target import ApiKind, Target
from sustain.probes.protocols.anthropic_messages import ANTHROPIC_MESSAGES
from sustain.probes.protocols.base import ApiProtocol, RagStage
from sustain.probes.protocols.http import HTTP
from sustain.probes.protocols.openai_chat import OPENAI_CHAT
from sustain.probes.protocols.openai_completions import OPENAI_COMPLETIONS
from sustain.probes.protocols.openai_embeddings import OPENAI_EMBEDDINGS
from sustain.probes.protocols.openai_images import OPENAI_IMAGES
from sustain.probes.protocols.openai_responses import OPENAI_RESPONSES
from sustain.probes.protocols.openai_speech import OPENAI_SPEECH
from sustain.probes.protocols.openai_transcriptions import OPENAI_TRANSCRIPTIONS
from sustain.probes.protocols.openai_videos import OPENAI_VIDEOS
from sustain.probes.protocols.rerank import RERANK

PROTOCOLS: dict[ApiKind, ApiProtocol] = {protocol.kind: protocol for protocol in (
    OPENAI_CHAT, OPENAI_COMPLETIONS, OPENAI_RESPONSES, ANTHROPIC_MESSAGES, OPENAI_EMBEDDINGS,
    RERANK, OPENAI_TRANSCRIPTIONS, OPENAI_SPEECH, OPENAI_IMAGES, OPENAI_VIDEOS, HTTP)}
"""Every API kind, in the order the CLI's help and the API's schema list them."""
KIND_NAMES: tuple[str, ...] = tuple(kind.value for kind in PROTOCOLS)
"""The kinds' names, as an endpoint's `api_kind` and `sustain probe --api` take them."""
CONVERSATION_KINDS = frozenset(kind for kind, p in PROTOCOLS.items() if p.conversation)
"""Kinds whose requests are conversations (a list of messages), not a bare prompt."""


_BY_NAME: dict[str, ApiProtocol] = {kind.value: protocol for kind, protocol in PROTOCOLS.items()}


def protocol_of(kind: str) -> ApiProtocol:
    """The object of a kind, by its ApiKind or its name (an ApiKind is the str of its name);
    KeyError for an unknown one."""
    return _BY_NAME[kind]


def find_protocol(kind: str) -> ApiProtocol | None:
    """The object of a kind by its name, or None for a name that is no kind."""
    return _BY_NAME.get(kind)


def is_conversation(kind: str) -> bool:
    """Whether requests of this kind are conversations (sessions, images, RAG generation)."""
    protocol = _BY_NAME.get(kind)
    return protocol is not None and protocol.conversation


def is_check(kind: str) -> bool:
    """Whether requests of this kind are plain HTTP checks (the `check` form: an endpoint's
    HttpCheck, client/http_check.py), not measured API requests."""
    protocol = _BY_NAME.get(kind)
    return protocol is not None and protocol.form == "check"


def rag_stage_of(kind: str) -> RagStage | None:
    """The RAG stage an endpoint of this kind may be, if any (base.RagStage)."""
    protocol = _BY_NAME.get(kind)
    return None if protocol is None else protocol.rag_stage


def protocol_for(target: Target) -> ApiProtocol:
    return PROTOCOLS[target.api_kind]


def request_url(target: Target) -> str:
    """The base URL is the API root, e.g. http://host:8000/v1 (as the OpenAI and Anthropic
    SDKs expect)."""
    return target.base_url.rstrip("/") + protocol_for(target).path


def auth_headers(target: Target, secret: str) -> dict[str, str]:
    """The headers that carry `secret` to this target."""
    return protocol_for(target).auth(secret)


def protocol_headers(target: Target) -> dict[str, str]:
    """Headers the target's protocol sends with every request, where the endpoint does not
    set its own (compared case-insensitively)."""
    given = {name.lower() for name in target.headers}
    return {name: value for name, value in protocol_for(target).headers
            if name.lower() not in given}
