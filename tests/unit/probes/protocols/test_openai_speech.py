"""Reading speech: raw audio counted chunk by chunk (pcm at OpenAI's 24 kHz 16-bit mono, wav by
its header however the header is split, compressed formats in bytes only), SSE deltas counted
from their base64's length, the request's shape, and the bound on what one answer may send."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from sustain.probes.client.sse import SSEEvent
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols.base import raw_reader
from sustain.probes.protocols.openai_speech import (
    MAX_SPEECH_BYTES,
    OPENAI_SPEECH,
    PCM_BYTES_PER_S,
    SpeechStream,
    base64_size,
    wav_head,
)
from sustain.probes.protocols.streaming import StreamState
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import Workload
from sustain.simulator.speech import wav_header

MS = 1_000_000


def raw(content_type: str, *chunks: bytes, asked: str = "pcm") -> SpeechStream:
    """A stream that read `chunks` (1 ms apart) of a body of `content_type`, then its end."""
    state = SpeechStream(request=json.dumps({"response_format": asked}).encode())
    assert raw_reader(state, content_type) is state
    for k, chunk in enumerate(chunks):
        state.on_bytes(chunk, (k + 1) * MS)
    state.on_end((len(chunks) + 1) * MS)
    return state


def test_pcm_is_24_khz_16_bit_mono_timed_from_its_first_byte() -> None:
    state = raw("audio/pcm", bytes(48_000), bytes(24_000), bytes(24_000))
    assert state.outcome() == (None, None)
    assert state.audio_s == pytest.approx(2.0)
    assert state.first_output_ns == MS
    assert list(state.itl_ns) == [MS, MS]
    assert state.output_tokens == 0  # raw audio has no tokens; its measure is seconds


def test_a_pcm_type_with_its_own_rate_and_channels_is_read_by_them() -> None:
    state = raw("audio/L16; rate=16000; channels=2", bytes(64_000))
    assert state.audio_s == pytest.approx(1.0)


@pytest.mark.parametrize("split", [1, 5, 20, 43, 44, 45, 100])
def test_a_wav_head_split_anywhere_gives_its_seconds_and_the_first_audio_byte(split: int
                                                                            ) -> None:
    body = wav_header(48_000) + bytes(48_000)
    state = raw("audio/wav", body[:split], body[split:])
    assert state.outcome() == (None, None)
    assert state.audio_s == pytest.approx(1.0)
    first_audio_ms = 1 if split > 44 else 2  # the first chunk holding a byte past the head
    assert state.first_output_ns == first_audio_ms * MS


def test_a_wav_with_metadata_before_its_data_is_read_past_it() -> None:
    head = wav_header(4_800)
    listed = head[:36] + b"LIST" + (5).to_bytes(4, "little") + b"abcde\x00" + head[36:]
    assert wav_head(listed) == (len(listed), PCM_BYTES_PER_S)
    assert raw("audio/x-wav", listed + bytes(4_800)).audio_s == pytest.approx(0.1)


def test_a_body_that_is_no_wav_or_never_reaches_its_data_is_protocol() -> None:
    assert raw("audio/wav", b"ID3\x04" + bytes(100)).outcome()[0] is ErrorClass.PROTOCOL
    endless = wav_header(0)[:36] + b"LIST" + (10**6).to_bytes(4, "little")
    state = raw("audio/wav", endless, bytes(5000))
    assert state.outcome() == (ErrorClass.PROTOCOL, "no WAV data chunk in the first 4 KiB")


def test_compressed_audio_is_counted_in_bytes_with_no_seconds() -> None:
    state = raw("audio/mpeg", b"\xff\xfb" + bytes(998))
    assert state.outcome() == (None, None)
    assert (state.audio_bytes, state.audio_s) == (1000, None)


def test_typeless_bytes_are_read_as_the_format_asked_for() -> None:
    assert raw("application/octet-stream", bytes(48_000)).audio_s == pytest.approx(1.0)
    wav = wav_header(24_000) + bytes(24_000)
    assert raw("application/octet-stream", wav, asked="wav").audio_s == pytest.approx(0.5)
    assert raw("application/octet-stream", bytes(10), asked="opus").audio_s is None


def test_json_and_event_streams_are_not_read_raw() -> None:
    state = SpeechStream()
    assert raw_reader(state, "application/json") is None
    assert raw_reader(state, "text/event-stream") is None
    assert raw_reader(StreamState(), "audio/pcm") is None  # a kind without raw reading


def test_no_audio_is_empty() -> None:
    assert raw("audio/pcm").outcome()[0] is ErrorClass.EMPTY


def test_a_body_over_its_bound_fails_at_once_and_keeps_nothing() -> None:
    state = SpeechStream()
    assert raw_reader(state, "audio/pcm") is state
    chunk = bytes(1024 * 1024)
    for k in range(MAX_SPEECH_BYTES // len(chunk) + 2):
        state.on_bytes(chunk, k)
    assert state.failure is ErrorClass.PROTOCOL
    assert state.detail == "streamed body over 64 MiB"
    assert state.audio_bytes == MAX_SPEECH_BYTES  # counted up to the bound, then no more


def event(payload: dict[str, Any] | str) -> SSEEvent:
    return SSEEvent("message", payload if isinstance(payload, str) else json.dumps(payload))


def delta(size: int) -> dict[str, Any]:
    return {"type": "speech.audio.delta", "audio": base64.b64encode(bytes(size)).decode()}


def test_sse_deltas_count_their_base64_and_done_carries_the_usage() -> None:
    state = SpeechStream(request=b'{"response_format": "pcm", "stream_format": "sse"}')
    for at_ms, payload in ((5, delta(4800)), (7, delta(4801)), (9, delta(4802)),
                           (9, {"type": "speech.audio.done", "usage": {
                               "input_tokens": 3, "output_tokens": 40}})):
        state.on_event(event(payload), at_ms * MS)
    assert state.outcome() == (None, None)
    assert state.audio_bytes == 4800 + 4801 + 4802
    assert state.first_output_ns == 5 * MS
    assert list(state.itl_ns) == [2 * MS, 2 * MS]
    assert (state.output_tokens, state.prompt_tokens) == (40, 3)
    assert state.audio_s == pytest.approx((4800 + 4801 + 4802) / PCM_BYTES_PER_S)


def test_an_sse_stream_cut_before_done_is_truncated_and_an_error_event_fails_it() -> None:
    cut = SpeechStream()
    cut.on_event(event(delta(10)), 1)
    assert cut.outcome()[0] is ErrorClass.TRUNCATED
    failed = SpeechStream()
    failed.on_event(event({"type": "error", "error": {"code": "server_error"}}), 1)
    assert failed.outcome()[0] is ErrorClass.HTTP_5XX


@pytest.mark.parametrize("size", range(0, 9))
def test_the_base64_size_is_the_decoded_size(size: int) -> None:
    assert base64_size(base64.b64encode(bytes(size)).decode()) == size


def test_a_speech_request_carries_its_input_voice_and_format_and_no_output_cap() -> None:
    workload = Workload(prompt="say this", voice="nova", audio_format="wav",
                        stream_format="sse", cache="allow")
    body = RequestBuilder(workload, OPENAI_SPEECH.kind, "tts").body(0)
    assert body == {"model": "tts", "input": "say this", "voice": "nova",
                    "response_format": "wav", "stream_format": "sse"}
    _, headers = OPENAI_SPEECH.encode(body, {})
    assert headers["accept"] == "text/event-stream"
    assert OPENAI_SPEECH.request_figures(body) == {"input_chars": 8}
    raw_body = RequestBuilder(Workload(prompt="x"), OPENAI_SPEECH.kind, "tts").body(0)
    assert "stream_format" not in raw_body
    assert raw_body["response_format"] == "pcm"
    assert OPENAI_SPEECH.encode(raw_body, {})[1]["accept"].startswith("audio/")
    assert OPENAI_SPEECH.streamed(False)  # its audio always streams
