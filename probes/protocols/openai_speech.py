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
connection closed before the body's end) too.

An answer is the endpoint's to shape, and read as hostile: a body (or an SSE stream's event
data) past MAX_SPEECH_BYTES, audio in more than MAX_AUDIO_PIECES pieces (each piece is an ITL
gap held), a WAV head or a content type whose format is no audio format (a rate, channels or
bits of 0, or past MAX_RATE_HZ, MAX_CHANNELS, MAX_SAMPLE_BITS), are `protocol`. A WAV head is
read as it arrives, each chunk header once, within WAV_HEADER_LIMIT bytes held.
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
)
from sustain.probes.protocols.usage_counts import token_count

PCM_RATE_HZ = 24_000
"""OpenAI's `pcm`: 24 kHz, 16-bit, mono, little-endian samples."""
PCM_BYTES_PER_S = PCM_RATE_HZ * 2
MAX_SPEECH_BYTES = 64 * 1024 * 1024
"""Most bytes of one speech answer read (a raw body, or the base64 of an SSE stream): some
23 minutes of `pcm`, over four times the longest OpenAI speaks (4,096 characters). Past them
the request ends as `protocol`, without reading the rest."""
WAV_HEADER_LIMIT = 4096
"""Bytes of a WAV answer searched for its `data` chunk (its header, a few dozen bytes, with
any metadata chunks before the audio): the most of its head held."""
MAX_AUDIO_PIECES = 131_072
"""Most pieces carrying audio of one answer (the body's pieces as the transport hands them,
or SSE deltas), each an ITL gap held until the answer ends: 64 MiB of pcm (MAX_SPEECH_BYTES,
23 minutes) in pieces of 10 ms, or of 512 bytes. Past it the answer is `protocol`: a body of
one-byte chunks would otherwise hold an ITL gap a byte."""
MAX_RATE_HZ = 768_000
"""The highest sample rate audio is recorded at; a format claiming more is no audio."""
MAX_CHANNELS = 64
MAX_SAMPLE_BITS = 64
FMT_BYTES = 16
"""The fields of a WAV `fmt ` chunk read here: format, channels, rate, byte rate, block
align, bits."""
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


def bounded_int(text: str, most: int) -> int | None:
    """`text` as an integer from 1 to `most` (a content type's `rate` or `channels`), or None
    when it is not one: ASCII digits only (str.isdigit also takes `²`, which int refuses), and
    no more of them than `most` has (int and float refuse too many)."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(most)):
        return None
    value = int(text)
    return value if 1 <= value <= most else None


def sample_bytes_per_s(rate: int, channels: int, bits: int) -> float | str:
    """Audio bytes a second of samples at `rate` Hz, `channels` and `bits` a sample; why
    when they are no audio format (0, or past what audio is recorded at)."""
    if 1 <= rate <= MAX_RATE_HZ and 1 <= channels <= MAX_CHANNELS and \
            1 <= bits <= MAX_SAMPLE_BITS:
        return rate * channels * bits / 8
    return f"{rate} Hz, {channels} channels, {bits} bits"


def base64_size(text: str) -> int:
    """Bytes that base64 `text` decodes to, from its length and padding alone."""
    padding = 2 if text.endswith("==") else 1 if text.endswith("=") else 0
    return max(len(text) * 3 // 4 - padding, 0)


@dataclass(slots=True)
class WavHead:
    """A WAV answer's head, read as its bytes arrive: the first WAV_HEADER_LIMIT bytes held
    (never more, however large a read), each chunk header read once (the next one's place
    kept between reads), until the `data` chunk's start. The chunks' sizes are taken as
    given, except the data chunk's (a streamed WAV's is often 0 or 0xFFFFFFFF): its audio is
    what the body holds."""

    held: bytearray = field(default_factory=bytearray)
    seen: int = 0
    """Body bytes read so far, held or not."""
    position: int = 12
    """Where the next chunk header starts (after `RIFF`, its size and `WAVE`)."""
    bytes_per_s: float | None = None
    """Audio bytes a second, once a `fmt ` chunk was read; None without one."""

    def feed(self, chunk: bytes) -> int | str | None:
        """The audio bytes read so far, once the data chunk's start is known (those past it,
        `chunk`'s and any before); None while more bytes are needed; why, when the body is no
        WAV or its head is no audio's."""
        self.seen += len(chunk)
        room = WAV_HEADER_LIMIT - len(self.held)
        if room > 0:
            self.held += chunk[:room]
        head = self.held
        if len(head) < 12:
            return None
        if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            return "audio is not a WAV (no RIFF/WAVE header)"
        while self.position + 8 <= len(head):
            at = self.position
            name = bytes(head[at:at + 4])
            size = int.from_bytes(head[at + 4:at + 8], "little")
            if name == b"data":
                return self.seen - (at + 8)
            if name == b"fmt ":
                if size < FMT_BYTES:
                    return f"WAV fmt chunk shorter than {FMT_BYTES} bytes"
                if at + 8 + FMT_BYTES > len(head):
                    break  # its fields are in bytes still to come
                found = sample_bytes_per_s(
                    int.from_bytes(head[at + 12:at + 16], "little"),
                    int.from_bytes(head[at + 10:at + 12], "little"),
                    int.from_bytes(head[at + 22:at + 24], "little"))
                if isinstance(found, str):
                    return f"WAV fmt chunk of {found} is no audio format"
                self.bytes_per_s = found
            self.position = at + 8 + size + (size & 1)
        if len(head) >= WAV_HEADER_LIMIT:
            return f"no WAV data chunk in the first {size_text(WAV_HEADER_LIMIT)}"
        return None


def wav_head(head: bytes | bytearray) -> tuple[int, float | None] | str | None:
    """(offset of the first audio byte, audio bytes per second, None without a `fmt ` chunk)
    of a WAV's first bytes; None when more bytes are needed to tell; why when they are no
    WAV (WavHead, read in one piece)."""
    reader = WavHead()
    found = reader.feed(bytes(head))
    if isinstance(found, int):
        return len(head) - found, reader.bytes_per_s
    return found


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
    wav: WavHead | None = None
    """A WAV answer's head, until its data chunk is found (then None)."""
    asked: str | None = None
    """The request's `response_format`, once read."""
    sse_bytes: int = field(default=0)
    """Characters of SSE event data received, against max_bytes."""
    unreadable: str | None = None
    """Why the answer's content type is no audio format to read (its `rate` or `channels`),
    failing it at its first byte (or its end): the transport reads on until then."""

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
            self.wav = WavHead()
        elif media in PCM_TYPES:
            self.bytes_per_s = self._pcm_rate(media, params)
        elif not media.startswith("audio/"):
            return False
        return True

    def _pcm_rate(self, media: str, params: Mapping[str, str]) -> float | None:
        """Audio bytes a second of a pcm type: 16-bit samples at its `rate` and `channels`
        (OpenAI's 24 kHz mono where it names none); None, and the answer `unreadable`, when
        one it names is no number of them."""
        rate, channels = params.get("rate"), params.get("channels")
        hz = PCM_RATE_HZ if rate is None else bounded_int(rate, MAX_RATE_HZ)
        count = 1 if channels is None else bounded_int(channels, MAX_CHANNELS)
        if hz is None or count is None:
            named = f"rate={rate}" if hz is None else f"channels={channels}"
            self.unreadable = f"{media} with {named[:40]!r}, no audio format"
            return None
        return 2.0 * hz * count

    def on_chunk(self, chunk: bytes, now_ns: int) -> None:
        if self.unreadable is not None:
            self.fail(ErrorClass.PROTOCOL, self.unreadable)
            return
        audio = len(chunk)
        if self.wav is not None:
            audio = self._after_wav_head(chunk)
        if audio > 0:
            self._audio(audio, now_ns)

    def on_end(self, now_ns: int) -> None:
        if self.unreadable is not None:
            self.fail(ErrorClass.PROTOCOL, self.unreadable)
        RawStreamState.on_end(self, now_ns)

    def _audio(self, size: int, now_ns: int) -> None:
        """A piece of `size` bytes of audio arrived at `now_ns` (an ITL gap); past
        MAX_AUDIO_PIECES, `protocol`."""
        if self.output_events >= MAX_AUDIO_PIECES:
            self.fail(ErrorClass.PROTOCOL, f"speech stream in over {MAX_AUDIO_PIECES} pieces")
            return
        self.audio_bytes += size
        self.output_at(now_ns)

    def _after_wav_head(self, chunk: bytes) -> int:
        """Bytes of audio so far, a WAV answer's, while its head is still being read (held,
        at most WAV_HEADER_LIMIT: WavHead)."""
        assert self.wav is not None
        found = self.wav.feed(chunk)
        if found is None:
            return 0
        self.bytes_per_s, self.wav = self.wav.bytes_per_s, None
        if isinstance(found, str):
            self.fail(ErrorClass.PROTOCOL, found)
            return 0
        return found

    def on_event(self, event: SSEEvent, now_ns: int) -> None:
        if self.failure is None and not self.done:  # every event's data, before it is parsed
            self.sse_bytes += len(event.data)
            if self.sse_bytes > self.max_bytes:
                self.fail(ErrorClass.PROTOCOL,
                          f"speech stream over {size_text(self.max_bytes)}")
                return
        found = self.typed(event, error_class_of)
        if found is None:
            return
        kind, payload = found
        if kind == "speech.audio.delta":
            audio = payload.get("audio")
            if isinstance(audio, str) and audio:
                if self.bytes_per_s is None and self.requested_format() == "pcm":
                    self.bytes_per_s = PCM_BYTES_PER_S
                if self.output_events >= MAX_AUDIO_PIECES:
                    self.fail(ErrorClass.PROTOCOL,
                              f"speech stream in over {MAX_AUDIO_PIECES} pieces")
                    return
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
    otel_operation: ClassVar[str | None] = "generate_content"
    otel_provider: ClassVar[str | None] = "openai"
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
