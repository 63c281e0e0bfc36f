"""Reading transcriptions: OpenAI's stream events and vLLM's chat-like chunks, whole answers,
and an empty transcript as an answer rather than a failure."""

from __future__ import annotations

import json
from typing import Any

from sustain.probes.client.sse import SSEEvent
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols.openai_transcriptions import (
    TranscriptionStream,
    encode_transcription,
    whole_response,
)
from sustain.probes.workload.audio import synthetic_wav, wav_seconds


def event(payload: dict[str, Any] | str) -> SSEEvent:
    return SSEEvent("message", payload if isinstance(payload, str) else json.dumps(payload))


def feed(*events: tuple[dict[str, Any] | str, int]) -> TranscriptionStream:
    state = TranscriptionStream()
    for payload, at_ns in events:
        state.on_event(event(payload), at_ns)
    return state


def test_openai_deltas_time_the_first_text_and_done_carries_usage() -> None:
    state = feed(({"type": "transcript.text.delta", "delta": "hello"}, 30_000_000),
                 ({"type": "transcript.text.delta", "delta": " world"}, 35_000_000),
                 ({"type": "transcript.text.done", "text": "hello world", "usage": {
                     "type": "tokens", "input_tokens": 50, "output_tokens": 2}}, 35_000_001))
    assert state.first_output_ns == 30_000_000
    assert list(state.itl_ns) == [5_000_000]
    assert (state.completion_tokens, state.prompt_tokens) == (2, 50)
    assert state.outcome() == (None, None)


def test_vllm_chat_like_chunks_are_read_too() -> None:
    state = feed(({"object": "transcription.chunk",
                   "choices": [{"delta": {"content": "hi"}, "finish_reason": None}]}, 10),
                 ({"object": "transcription.chunk",
                   "choices": [{"delta": {"content": " there"}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 9, "completion_tokens": 2}}, 20),
                 ("[DONE]", 21))
    assert (state.first_output_ns, state.output_tokens, state.prompt_tokens) == (10, 2, 9)
    assert state.outcome() == (None, None)


def test_an_empty_transcript_is_an_answer_and_a_cut_stream_is_truncated() -> None:
    assert feed(({"type": "transcript.text.done", "text": ""}, 5)).outcome() == (None, None)
    cut = feed(({"type": "transcript.text.delta", "delta": "a"}, 5))
    assert cut.outcome()[0] is ErrorClass.TRUNCATED


def test_an_error_event_fails_the_stream() -> None:
    state = feed(({"type": "transcript.text.delta", "delta": "a"}, 5),
                 ({"type": "error", "error": {"code": "server_error", "message": "x"}}, 6))
    assert state.outcome()[0] is ErrorClass.HTTP_5XX


def test_a_whole_transcript_counts_usage_or_words() -> None:
    counted = whole_response(json.dumps({"text": "a b c", "usage": {
        "type": "tokens", "input_tokens": 40, "output_tokens": 4}}).encode(), 0, 2_000_000, 200)
    assert (counted.error_class, counted.output_tokens, counted.input_tokens,
            counted.tokens_server_counted, counted.e2e_ms) == (None, 4, 40, True, 2.0)
    estimated = whole_response(b'{"text": "a b c"}', 0, 1, 200)
    assert (estimated.output_tokens, estimated.tokens_server_counted) == (3, False)
    assert whole_response(b'{"text": ""}', 0, 1, 200).error_class is None
    assert whole_response(b'{"words": []}', 0, 1, 200).error_class is ErrorClass.PROTOCOL


def test_the_form_carries_the_fields_and_the_wav() -> None:
    wav = synthetic_wav(1.5, seed=7)
    body, headers = encode_transcription({"model": "whisper", "stream": "true"}, wav,
                                         {"x-a": "1"})
    assert headers["content-type"].startswith("multipart/form-data; boundary=")
    assert headers["accept"] == "text/event-stream"
    assert headers["x-a"] == "1"
    assert b'name="model"\r\n\r\nwhisper' in body
    assert b'filename="audio.wav"' in body
    assert wav in body


def test_synthetic_audio_is_a_wav_of_its_length_new_for_each_seed() -> None:
    one, two = synthetic_wav(2.0, seed=1), synthetic_wav(2.0, seed=2)
    assert wav_seconds(one) == 2.0
    assert one != two
    assert synthetic_wav(2.0, seed=1) == one
    assert wav_seconds(b"not a wav") is None
