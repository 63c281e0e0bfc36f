"""The OpenAI completions protocol (`POST /v1/completions`): a bare `prompt` in; a stream of
`choices[].text` chunks or a whole `choices[].text` out, read and measured as chat's are
(openai_chat.py, streaming.StreamState). Not a conversation: no sessions, images or RAG."""

from __future__ import annotations

from typing import Any, ClassVar

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import Measurement
from sustain.probes.protocols.base import ApiProtocol
from sustain.probes.protocols.openai_chat import GENERATION_FIGURES, whole_response


class OpenAICompletions(ApiProtocol):
    kind: ClassVar[ApiKind] = ApiKind.OPENAI_COMPLETIONS
    path: ClassVar[str] = "/completions"
    otel_operation: ClassVar[str | None] = "text_completion"
    otel_provider: ClassVar[str | None] = "openai"
    counts_prompt: ClassVar[bool] = True
    figures: ClassVar[tuple[str, ...]] = GENERATION_FIGURES

    def whole(self, raw: bytes, t_send_ns: int, end: int, status: int,
              keep_reply: bool = False, expect: ExpectedItems | None = None) -> Measurement:
        return whole_response(raw, t_send_ns, end, status, keep_reply, expect)

    def shape(self, body: dict[str, Any]) -> dict[str, Any]:
        body.pop("thinking", None)  # a completion takes no reasoning settings
        body.pop("reasoning_effort", None)
        return body


OPENAI_COMPLETIONS = OpenAICompletions()
