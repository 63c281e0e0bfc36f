"""Which generation protocol a target speaks: where its requests go, how its key is sent, how
its stream is read and how a whole answer is measured. The one table from ApiKind to the
protocol modules, so the transports stay the same for every protocol."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sustain.probes.client import (
    anthropic_protocol,
    embeddings_protocol,
    openai_protocol,
    rerank_protocol,
    responses_protocol,
    transcription_protocol,
)
from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.openai_protocol import ReplyCollector, StreamState
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.measure.sample import Measurement

WholeResponse = Callable[[bytes, int, int, int, bool, ExpectedItems | None], Measurement]
"""whole(raw, t_send_ns, end_ns, status, keep_reply, expect) -> Measurement."""


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def anthropic_key(secret: str) -> dict[str, str]:
    return {anthropic_protocol.KEY_HEADER: secret}


@dataclass(frozen=True, slots=True)
class Protocol:
    path: str
    """Appended to the endpoint's base URL, the API root (e.g. http://host:8000/v1)."""
    stream: type[StreamState]
    whole: WholeResponse
    auth: Callable[[str], dict[str, str]] = bearer
    """The headers that carry the endpoint's key."""
    headers: tuple[tuple[str, str], ...] = ()
    """Headers every request carries unless the endpoint sets them itself."""

    def stream_state(self, keep_reply: bool) -> StreamState:
        return self.stream(reply=ReplyCollector() if keep_reply else None)


PROTOCOLS = {
    ApiKind.OPENAI_CHAT: Protocol("/chat/completions", StreamState,
                                  openai_protocol.whole_response),
    ApiKind.OPENAI_COMPLETIONS: Protocol("/completions", StreamState,
                                         openai_protocol.whole_response),
    ApiKind.OPENAI_RESPONSES: Protocol("/responses", responses_protocol.ResponsesStream,
                                       responses_protocol.whole_response),
    ApiKind.ANTHROPIC_MESSAGES: Protocol(
        "/messages", anthropic_protocol.MessagesStream, anthropic_protocol.whole_response,
        auth=anthropic_key,
        headers=((anthropic_protocol.VERSION_HEADER, anthropic_protocol.API_VERSION),)),
    # the item kinds answer whole (probes/load/senders.py never streams them)
    ApiKind.OPENAI_EMBEDDINGS: Protocol("/embeddings", StreamState,
                                        embeddings_protocol.whole_response),
    ApiKind.RERANK: Protocol("/rerank", StreamState, rerank_protocol.whole_response),
    ApiKind.OPENAI_TRANSCRIPTIONS: Protocol(
        "/audio/transcriptions", transcription_protocol.TranscriptionStream,
        transcription_protocol.whole_response),
}
"""The generation protocols; `http` checks are not one (probes/client/http_check.py)."""


def protocol_for(target: Target) -> Protocol:
    return PROTOCOLS[target.api_kind]


def request_url(target: Target) -> str:
    """The base URL is the API root, e.g. http://host:8000/v1 (as the OpenAI and Anthropic
    SDKs expect)."""
    return target.base_url.rstrip("/") + protocol_for(target).path


def auth_headers(target: Target, secret: str) -> dict[str, str]:
    """The headers that carry `secret` to this target, and those its protocol always sends
    (unless the endpoint's own headers set them, compared case-insensitively)."""
    protocol = PROTOCOLS.get(target.api_kind)
    if protocol is None:
        return bearer(secret)
    return protocol.auth(secret)


def protocol_headers(target: Target) -> dict[str, str]:
    """Headers the target's protocol sends with every request, where the endpoint does not
    set its own."""
    protocol = PROTOCOLS.get(target.api_kind)
    given = {name.lower() for name in target.headers}
    return {} if protocol is None else {
        name: value for name, value in protocol.headers if name.lower() not in given}
