"""The simulator's OpenAI transcription answers (`POST /v1/audio/transcriptions`), as data: the
multipart form read (stdlib `email`, which parses MIME multipart), the audio's length from its
WAV header, and a Completion's tokens as the transcript: OpenAI's stream events
(`transcript.text.delta` ..., `transcript.text.done` with usage) or the whole `{"text": ...}`.
The input is counted as 10 tokens per second of audio."""

from __future__ import annotations

import email.parser
import email.policy
import io
import wave
from typing import Any

from sustain.simulator.completion import Completion, sse

AUDIO_TOKENS_PER_S = 10


def read_form(content_type: str, body: bytes) -> dict[str, Any] | str:
    """The form's fields (`file` as bytes, the rest as text) and `audio_s`, the length of the
    WAV in `file`; or why the request is refused."""
    if not content_type.startswith("multipart/form-data"):
        return "content-type must be multipart/form-data"
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode("latin-1") + body)
    if not message.is_multipart():
        return "malformed multipart body"
    form: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            form[name] = payload if name == "file" else payload.decode("utf-8", "replace")
    audio = form.get("file")
    if not isinstance(audio, bytes):
        return "file: required"
    try:
        with wave.open(io.BytesIO(audio), "rb") as wav:
            form["audio_s"] = wav.getnframes() / max(1, wav.getframerate())
    except (wave.Error, EOFError):
        return "file: not a WAV"
    form["stream"] = form.get("stream") == "true"
    return form


class TranscriptionEvents:
    """A Completion as a transcript, streamed or whole (completion.py's StreamEvents)."""

    def __init__(self, completion: Completion, audio_s: float) -> None:
        self.completion = completion
        self.tokens = completion.tokens
        self.audio_tokens = round(audio_s * AUDIO_TOKENS_PER_S)

    def usage(self) -> dict[str, Any]:
        return {"type": "tokens", "input_tokens": self.audio_tokens,
                "input_token_details": {"text_tokens": 0, "audio_tokens": self.audio_tokens},
                "output_tokens": self.tokens,
                "total_tokens": self.audio_tokens + self.tokens}

    def opening(self, zero: bool) -> list[bytes]:  # noqa: ARG002
        return []

    def token_event(self, k: int) -> bytes:
        return self.text_event(Completion.token(k))

    def text_event(self, text: str) -> bytes:
        return sse({"type": "transcript.text.delta", "delta": text})

    def error_event(self) -> bytes:
        return sse({"type": "error", "error": {"code": "server_error",
                                                "message": "injected engine error"}})

    def closing(self, finish: str, include_usage: bool) -> list[bytes]:  # noqa: ARG002
        return [sse({"type": "transcript.text.done", "text": self.completion.text(),
                      "usage": self.usage()})]

    def usage_only(self) -> list[bytes]:
        return [sse({"type": "transcript.text.done", "text": "", "usage": self.usage()})]

    def whole(self, finish: str) -> dict[str, Any]:  # noqa: ARG002
        return {"text": self.completion.text(), "usage": self.usage()}
