"""The simulator's OpenAI speech answers (`POST /v1/audio/speech`), as data: the request read
(`input`, `voice`, `response_format` pcm or wav, `stream_format` audio or sse), the audio's
length (speech_audio_ms_per_char of the input's characters) cut into chunks of
speech_chunk_ms, and each chunk as it goes out: raw bytes (24 kHz 16-bit mono silence, a WAV
header before the first chunk of a `wav` answer) or an SSE `speech.audio.delta` event (its
base64), then `speech.audio.done` with the usage. The app (app.py) sends the chunks on their
schedule and logs when it wrote the first audio."""

from __future__ import annotations

import base64
import functools
import json
import math
from dataclasses import dataclass
from typing import Any

PCM_RATE_HZ = 24_000
BYTES_PER_SAMPLE = 2
BYTES_PER_MS = PCM_RATE_HZ * BYTES_PER_SAMPLE // 1000
MAX_INPUT_CHARS = 100_000
"""Longest input taken (OpenAI takes 4,096 characters; a probe's fixed prompt may be more)."""
FORMATS = {"pcm": b"audio/pcm", "wav": b"audio/wav"}
"""The formats the simulator speaks, and their content types."""
WAV_HEADER_BYTES = 44


@dataclass(frozen=True, slots=True)
class SpeechRequest:
    text: str
    voice: str
    audio_format: str
    sse: bool


def read_speech(body: dict[str, Any]) -> SpeechRequest | str:
    """The request, or why it is refused (a 400)."""
    text = body.get("input")
    if not isinstance(text, str) or not text or len(text) > MAX_INPUT_CHARS:
        return f"input: must be a string of 1 to {MAX_INPUT_CHARS} characters"
    voice = body.get("voice")
    if not isinstance(voice, str) or not voice:
        return "voice: required"
    audio_format = body.get("response_format", "pcm")
    if audio_format not in FORMATS:
        return "response_format: the simulator speaks pcm or wav"
    stream_format = body.get("stream_format", "audio")
    if stream_format not in ("audio", "sse"):
        return "stream_format: must be audio or sse"
    return SpeechRequest(text, voice, audio_format, stream_format == "sse")


def chunk_sizes(chars: int, ms_per_char: float, chunk_ms: float) -> list[int]:
    """The audio's chunks in bytes (whole samples): chars * ms_per_char of audio, at least
    one sample, cut every chunk_ms."""
    total = max(1, round(chars * ms_per_char * PCM_RATE_HZ / 1000)) * BYTES_PER_SAMPLE
    step = max(1, round(chunk_ms * PCM_RATE_HZ / 1000)) * BYTES_PER_SAMPLE
    full, rest = divmod(total, step)
    return [step] * full + ([rest] if rest else [])


def wav_header(data_bytes: int) -> bytes:
    """A 44-byte WAV header (PCM, 24 kHz, mono, 16-bit) for `data_bytes` of samples."""
    byte_rate = PCM_RATE_HZ * BYTES_PER_SAMPLE
    return (b"RIFF" + (36 + data_bytes).to_bytes(4, "little") + b"WAVE"
            + b"fmt " + (16).to_bytes(4, "little") + (1).to_bytes(2, "little")
            + (1).to_bytes(2, "little") + PCM_RATE_HZ.to_bytes(4, "little")
            + byte_rate.to_bytes(4, "little") + BYTES_PER_SAMPLE.to_bytes(2, "little")
            + (8 * BYTES_PER_SAMPLE).to_bytes(2, "little")
            + b"data" + data_bytes.to_bytes(4, "little"))


@functools.lru_cache(maxsize=16)
def silence(size: int) -> bytes:
    """`size` bytes of silent samples (made once per size)."""
    return bytes(size)


@functools.lru_cache(maxsize=16)
def delta_event(size: int) -> bytes:
    """A `speech.audio.delta` event of `size` bytes of silence (made once per size)."""
    audio = base64.b64encode(silence(size)).decode()
    return sse({"type": "speech.audio.delta", "audio": audio})


def done_event(input_chars: int, audio_bytes: int) -> bytes:
    """`speech.audio.done` with the usage: a token per 4 characters in, per 20 ms out."""
    output = max(1, audio_bytes // (20 * BYTES_PER_MS))
    prompt = max(1, math.ceil(input_chars / 4))
    return sse({"type": "speech.audio.done", "usage": {
        "input_tokens": prompt, "output_tokens": output, "total_tokens": prompt + output}})


def error_event() -> bytes:
    return sse({"type": "error", "error": {"code": "server_error",
                                            "message": "injected engine error"}})


def sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()
