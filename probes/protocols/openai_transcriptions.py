"""The OpenAI transcription protocol (`POST /v1/audio/transcriptions`, multipart: the audio
file, `model`, `response_format=json`, and `stream=true` where the server streams), as OpenAI,
vLLM, `transformers serve` and LiteLLM speak it. A whole answer is `{"text": ...}` (with
`usage` where the server counts); a stream is either OpenAI's typed events
(`transcript.text.delta`, then `transcript.text.done` with usage) or vLLM's chat-like chunks
(`choices[].delta.content`, `[DONE]`), both read here.

The first text delta is the first output (TTFT: first-text latency). A transcript may be empty
(the audio held no speech) and still be an answer: unlike generation, a transcription that
returns no text succeeds, with 0 output tokens. Timing and the Measurement are those of
streaming.py; the audio's length and the real-time factor are the sender's
(probes/load/senders.py), which knows what it sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from urllib3 import encode_multipart_formdata

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.sse import SSEEvent
from sustain.probes.client.target import ApiKind
from sustain.probes.client.trace_context import traced
from sustain.probes.measure.sample import NS_PER_MS, ErrorClass, Measurement
from sustain.probes.protocols.base import ApiProtocol, RequestForm
from sustain.probes.protocols.openai_responses import error_class_of
from sustain.probes.protocols.streaming import (
    EncodedRequest,
    StreamState,
    failure,
    json_object,
)
from sustain.probes.protocols.usage_counts import token_count


def encode_transcription(fields: dict[str, str], audio: bytes, headers: dict[str, str]
                         ) -> EncodedRequest:
    """The multipart body (the form fields, then the audio as `file`, a WAV) and its
    headers (a fresh traceparent among them), encoded before t_send as every request body
    is."""
    body, content_type = encode_multipart_formdata(
        [*fields.items(), ("file", ("audio.wav", audio, "audio/wav"))])
    stream = fields.get("stream") == "true"
    return body, traced({**headers, "content-type": content_type,
                         "accept": "text/event-stream" if stream else "application/json"})


def usage_counts(usage: Any) -> tuple[int | None, int | None]:
    """(output, input) tokens of a transcription's usage: OpenAI's `{type: tokens,
    input_tokens, output_tokens}`, or chat's `prompt_tokens`/`completion_tokens` (vLLM); a
    `{type: duration}` usage counts no tokens."""
    if not isinstance(usage, dict):
        return None, None
    output = token_count(usage.get("output_tokens", usage.get("completion_tokens")))
    prompt = token_count(usage.get("input_tokens", usage.get("prompt_tokens")))
    return output, prompt


@dataclass(slots=True)
class TranscriptionStream(StreamState):
    """A streamed transcript, read event by event (see StreamState)."""

    def on_event(self, event: SSEEvent, now_ns: int) -> None:
        found = self.typed(event, error_class_of)
        if found is None:
            return
        kind, payload = found
        if kind == "transcript.text.delta":
            delta = payload.get("delta")
            if isinstance(delta, str) and delta:
                self._text(delta, now_ns)
        elif kind == "transcript.text.done":
            self.counted(*usage_counts(payload.get("usage")), None)
            self.finished = self.done = True
        else:  # vLLM: chat-like chunks
            if (usage := payload.get("usage")) is not None:
                self.counted(*usage_counts(usage), None)
            choices = payload.get("choices")
            for choice in choices if isinstance(choices, list) else []:
                delta = choice.get("delta") if isinstance(choice, dict) else None
                content = delta.get("content") if isinstance(delta, dict) else None
                if isinstance(content, str) and content:
                    self._text(content, now_ns)
                if isinstance(choice, dict) and choice.get("finish_reason"):
                    self.finished = True

    def _text(self, text: str, now_ns: int) -> None:
        self.output_at(now_ns)
        if self.reply is not None:
            self.reply.add_text(text)

    def outcome(self) -> tuple[ErrorClass | None, str | None]:
        """As StreamState's, except that an empty transcript is an answer."""
        if self.failure is not None:
            return self.failure, self.detail
        if not self.complete:
            return ErrorClass.TRUNCATED, "stream ended before transcript.text.done or [DONE]"
        return None, None

    @property
    def output_tokens(self) -> int:
        return self.completion_tokens if self.completion_tokens is not None \
            else self.output_events


def whole_response(raw: bytes, t_send_ns: int, end: int, status: int,
                   _keep_reply: bool = False, _expect: ExpectedItems | None = None
                   ) -> Measurement:
    """Measure a whole transcription (`{"text": ...}`) that ended at `end` (ns)."""
    payload = json_object(raw)
    if isinstance(payload, str):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, payload)
    text = payload.get("text")
    if not isinstance(text, str):
        return failure(t_send_ns, status, ErrorClass.PROTOCOL, "text is not a string")
    completion, prompt = usage_counts(payload.get("usage"))
    return Measurement(
        ttft_ms=None, itl_ms=(), e2e_ms=(end - t_send_ns) / NS_PER_MS,
        output_tokens=completion if completion is not None else len(text.split()),
        tokens_server_counted=completion is not None, input_tokens=prompt,
        http_status=status, error_class=None)


class OpenAITranscriptions(ApiProtocol):
    kind: ClassVar[ApiKind] = ApiKind.OPENAI_TRANSCRIPTIONS
    path: ClassVar[str] = "/audio/transcriptions"
    otel_operation: ClassVar[str | None] = "generate_content"
    otel_provider: ClassVar[str | None] = "openai"
    form: ClassVar[RequestForm] = "audio"
    stream_type: ClassVar[type[StreamState]] = TranscriptionStream
    workload_fields: ClassVar[frozenset[str]] = frozenset({"audio_s"})
    figures: ClassVar[tuple[str, ...]] = ("ttft_ms", "itl_ms", "output_tokens", "input_tokens",
                                          "audio_s")
    """audio_s, the clip's length, is the sender's (load/senders.py): the real-time factor."""

    def whole(self, raw: bytes, t_send_ns: int, end: int, status: int,
              keep_reply: bool = False, expect: ExpectedItems | None = None) -> Measurement:
        return whole_response(raw, t_send_ns, end, status, keep_reply, expect)

    def encode_upload(self, fields: Mapping[str, str], data: bytes,
                      headers: Mapping[str, str]) -> EncodedRequest:
        return encode_transcription(dict(fields), data, dict(headers))


OPENAI_TRANSCRIPTIONS = OpenAITranscriptions()
