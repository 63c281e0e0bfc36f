"""The OpenAI text-to-speech protocol (`POST /v1/audio/speech`: `model`, `input`, `voice`,
`response_format`, and `stream_format: "sse"` where events are asked for), as OpenAI, LiteLLM
and the OpenAI-compatible speech servers speak it. The input text is the request's prompt
(synthetic words, the fixed prompt or a dataset's line, as for every prompt kind).

The answer always streams, one of two ways, told apart by its content type:

- raw audio bytes (`audio/*`, or `application/octet-stream`), read chunk by chunk as they
  arrive (a RawStreamState: counted, never kept). `pcm` is OpenAI's: 24 kHz, 16-bit, mono,
  little-endian, 48,000 bytes a second (an `audio/L16` or `audio/pcm` type's `rate` and
  `channels` parameters say otherwise); a `wav` answer's seconds come from its header (the
  `fmt ` chunk's rate, channels and bits; its data chunk's first byte is the first audio
  byte); the compressed formats (mp3, opus, aac, flac) are counted in bytes only, their
  seconds unknown (no real-time factor);
- SSE (`text/event-stream`): `speech.audio.delta` events whose `audio` is base64 (its bytes
  counted from its length, never decoded), then `speech.audio.done` with the usage; the
  deltas' audio is the requested format's (seconds known for pcm).

TTFT is the first audio byte's arrival; ITL the gaps between reads (or deltas) that carried
audio; E2E the end of the body. The audio's seconds are Measurement.audio_s, so the real-time
factor (E2E over the audio's seconds, Measurement.rtf) comes with them, and the input's
characters are Measurement.input_chars. An answer with no audio at all is `empty`; an SSE
stream that ends before `speech.audio.done` is `truncated`, a raw one cut off (its
connection closed before the body's end) too; a body past MAX_SPEECH_BYTES is `protocol`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import orjson

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.sse import SSEEvent, size_text
from sustain.probes.client.target import ApiKind
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.base import ApiProtocol, KindSettings, RawStreamState
from sustain.probes.protocols.openai_responses import error_class_of
from sustain.probes.protocols.streaming import (
    EncodedRequest,
    StreamState,
    encode_request,
    failure,
    token_count,
)

PCM_RATE_HZ = 24_000
"""OpenAI's `pcm`: 24 kHz, 16-bit, mono, little-endian samples."""
PCM_BYTES_PER_S = PCM_RATE_HZ * 2
MAX_SPEECH_BYTES = 64 * 1024 * 1024
"""Most bytes of one speech answer read (a raw body, or the base64 of an SSE stream): some
23 minutes of `pcm`, over four times the longest OpenAI speaks (4,096 characters). Past them
the request ends as `protocol`, without reading the rest."""
WAV_HEADER_LIMIT = 4096
"""Bytes of a WAV answer searched for its `data` chunk (its header, a few dozen bytes, with
any metadata chunks before the audio)."""
WAV_TYPES = frozenset({"audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"})
PCM_TYPES = frozenset({"audio/pcm", "audio/l16", "audio/raw", "audio/x-raw"})
OCTET_STREAM = "application/octet-stream"
ACCEPT_AUDIO = "audio/*, application/octet-stream"


def media_type(content_type: str) -> tuple[str, dict[str, str]]:
    """A content type's media type (lower case) and its parameters."""
    media, *params = content_type.split(";")
    found = {}
    for param in params:
        name, _, value = param.partition("=")
        found[name.strip().lower()] = value.strip().strip('"')
    return media.strip().lower(), found


def positive_int(text: str | None, default: int) -> int:
    """`text` as a positive integer (a content type's `rate` or `channels`), else
    `default`."""
    return int(text) if text is not None and text.isdigit() and int(text) > 0 else default


def base64_size(text: str) -> int:
    """Bytes that base64 `text` decodes to, from its length and padding alone."""
    padding = 2 if text.endswith("==") else 1 if text.endswith("=") else 0
    return max(len(text) * 3 // 4 - padding, 0)


def wav_head(head: bytes | bytearray) -> tuple[int, float | None] | str | None:
    """(offset of the first audio byte, audio bytes per second, None without a `fmt ` chunk)
    of a WAV's first bytes; None when more bytes are needed to tell; why when they are no
    WAV. The chunks' sizes are taken as given, except the data chunk's (a streamed WAV's is
    often 0 or 0xFFFFFFFF): its audio is what the body holds."""
    if len(head) < 12:
        return None
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return "audio is not a WAV (no RIFF/WAVE header)"
    position, per_second = 12, None
    while position + 8 <= len(head):
        chunk = bytes(head[position:position + 4])
        size = int.from_bytes(head[position + 4:position + 8], "little")
        if chunk == b"data":
            return position + 8, per_second
        if chunk == b"fmt ":
            if position + 24 > len(head):
                return None
            channels = int.from_bytes(head[position + 10:position + 12], "little")
            rate = int.from_bytes(head[position + 12:position + 16], "little")
            bits = int.from_bytes(head[position + 22:position + 24], "little")
            bytes_per_s = rate * channels * bits / 8
            per_second = bytes_per_s if bytes_per_s > 0 else None
        position += 8 + size + (size & 1)
    return None


@dataclass(slots=True)
class SpeechStream(RawStreamState):
    """A speech answer, raw audio or SSE deltas, counted as it arrives (see the module)."""

    max_bytes: ClassVar[int] = MAX_SPEECH_BYTES
    request: bytes = b""
    """The encoded request, read (for its `response_format`) only once an answer came."""
    audio_bytes: int = 0
    """Audio bytes received (a WAV's header aside; base64 counted as the bytes it holds)."""
    bytes_per_s: float | None = None
    """Audio bytes a second of the answer's format; None when unknown (compressed)."""
    wav: bytearray | None = None
    """A WAV answer's first bytes, until its data chunk is found (then None)."""
    asked: str | None = None
    """The request's `response_format`, once read."""
    sse_bytes: int = field(default=0)
    """Base64 characters of SSE audio received, against max_bytes."""

    def requested_format(self) -> str:
        """The `response_format` the request named (`pcm` when it is not to be read)."""
        if self.asked is None:
            try:
                body = orjson.loads(self.request) if self.request else {}
            except (ValueError, RecursionError):
                body = {}
            asked = body.get("response_format") if isinstance(body, dict) else None
            self.asked = asked.lower() if isinstance(asked, str) else "pcm"
        return self.asked

    def accepts(self, content_type: str) -> bool:
        media, params = media_type(content_type)
        if media == OCTET_STREAM:  # typeless bytes: the format asked for
            media = {"wav": "audio/wav", "pcm": "audio/pcm"}.get(
                self.requested_format(), "audio/*")
        if media in WAV_TYPES:
            self.wav = bytearray()
        elif media in PCM_TYPES:
            self.bytes_per_s = 2.0 * positive_int(params.get("rate"), PCM_RATE_HZ) * \
                positive_int(params.get("channels"), 1)
        elif not media.startswith("audio/"):
            return False
        return True

    def on_chunk(self, chunk: bytes, now_ns: int) -> None:
        audio = len(chunk)
        if self.wav is not None:
            audio = self._after_wav_head(chunk)
        if audio > 0:
            self.audio_bytes += audio
            self.output_at(now_ns)

    def _after_wav_head(self, chunk: bytes) -> int:
        """Bytes of audio in `chunk`, a WAV answer's, while its head is still being read
        (held, at most WAV_HEADER_LIMIT and one chunk)."""
        assert self.wav is not None
        self.wav += chunk
        found = wav_head(self.wav)
        if isinstance(found, str):
            self.fail(ErrorClass.PROTOCOL, found)
            return 0
        if found is None:
            if len(self.wav) > WAV_HEADER_LIMIT:
                self.fail(ErrorClass.PROTOCOL,
                          f"no WAV data chunk in the first {size_text(WAV_HEADER_LIMIT)}")
            return 0
        offset, self.bytes_per_s = found
        audio = max(len(self.wav) - offset, 0)
        self.wav = None
        return audio

    def on_event(self, event: SSEEvent, now_ns: int) -> None:
        found = self.typed(event, error_class_of)
        if found is None:
            return
        kind, payload = found
        if kind == "speech.audio.delta":
            audio = payload.get("audio")
            if isinstance(audio, str) and audio:
                self.sse_bytes += len(audio)
                if self.sse_bytes > self.max_bytes:
                    self.fail(ErrorClass.PROTOCOL,
                              f"speech stream over {size_text(self.max_bytes)}")
                    return
                if self.bytes_per_s is None and self.requested_format() == "pcm":
                    self.bytes_per_s = PCM_BYTES_PER_S
                self.audio_bytes += base64_size(audio)
                self.output_at(now_ns)
        elif kind == "speech.audio.done":
            usage = payload.get("usage")
            if isinstance(usage, dict):
                self.counted(token_count(usage.get("output_tokens")),
                             token_count(usage.get("input_tokens")), None)
            self.done = True

    def outcome(self) -> tuple[ErrorClass | None, str | None]:
        """Failed as the stream said; else truncated before its end, or empty of audio."""
        if self.failure is not None:
            return self.failure, self.detail
        if not self.complete:
            return ErrorClass.TRUNCATED, "speech stream ended before speech.audio.done"
        if self.audio_bytes == 0:
            return ErrorClass.EMPTY, "no audio"
        return None, None

    @property
    def output_tokens(self) -> int:
        """The server's count of output (audio) tokens, where its usage gave one; else 0:
        raw audio has no tokens to count (its measure is audio_s)."""
        return self.completion_tokens if self.completion_tokens is not None else 0

    @property
    def audio_s(self) -> float | None:
        """Seconds of audio received, where the format tells them."""
        if self.bytes_per_s is None or self.audio_bytes == 0:
            return None
        return self.audio_bytes / self.bytes_per_s


class OpenAISpeech(ApiProtocol):
    kind: ClassVar[ApiKind] = ApiKind.OPENAI_SPEECH
    path: ClassVar[str] = "/audio/speech"
    stream_type: ClassVar[type[StreamState]] = SpeechStream
    workload_fields: ClassVar[frozenset[str]] = frozenset(
        {"voice", "audio_format", "stream_format"})
    figures: ClassVar[tuple[str, ...]] = ("ttft_ms", "itl_ms", "audio_s", "input_chars",
                                          "output_tokens", "input_tokens")
    """audio_s: seconds of audio received (the real-time factor); input_chars: the text's
    characters (request_figures)."""

    def set_prompt(self, body: dict[str, Any], text: str) -> None:
        body["input"] = text

    def body_for(self, body: dict[str, Any], settings: KindSettings) -> dict[str, Any]:
        """`input`, `voice`, `response_format` and, for SSE, `stream_format`; a speech
        request has no output cap and no `stream` (its audio always streams)."""
        for key in ("max_tokens", "stream", "stream_options"):
            body.pop(key, None)
        body["voice"] = settings.voice
        body["response_format"] = settings.audio_format
        if settings.stream_format == "sse":
            body["stream_format"] = "sse"
        return body

    def streamed(self, stream: bool) -> bool:  # noqa: ARG002 - speech always streams
        return True

    def stream_state_for(self, payload: bytes, keep_reply: bool) -> StreamState:  # noqa: ARG002
        """A SpeechStream that knows its request (for the audio format it asked for)."""
        return SpeechStream(request=payload)

    def encode(self, body: Mapping[str, Any], headers: Mapping[str, str]) -> EncodedRequest:
        payload, encoded = encode_request(body, headers)
        encoded["accept"] = "text/event-stream" if body.get("stream_format") == "sse" \
            else ACCEPT_AUDIO
        return payload, encoded

    def request_figures(self, body: Mapping[str, Any]) -> dict[str, Any]:
        text = body.get("input")
        return {"input_chars": len(text)} if isinstance(text, str) else {}

    def stream_figures(self, measurement: Measurement, state: StreamState) -> Measurement:
        if not isinstance(state, SpeechStream):
            return measurement
        return replace(measurement, audio_s=state.audio_s)

    def whole(self, raw: bytes, t_send_ns: int, end: int,  # noqa: ARG002 - no audio in it
              status: int, keep_reply: bool = False,  # noqa: ARG002
              expect: ExpectedItems | None = None) -> Measurement:  # noqa: ARG002
        """A JSON body is no audio: `protocol`."""
        return failure(t_send_ns, status, ErrorClass.PROTOCOL,
                       "speech answered with JSON, not audio")


OPENAI_SPEECH = OpenAISpeech()
