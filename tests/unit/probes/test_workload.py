from __future__ import annotations

from probes.client.target import ApiKind
from probes.workload.synthetic import Workload, prompt_for, request_body


def test_synthetic_prompts_have_the_input_length_and_are_seeded() -> None:
    workload = Workload(input_tokens=40, seed=3)
    assert len(prompt_for(workload, 0).split()) == 40
    assert prompt_for(workload, 5) == prompt_for(Workload(input_tokens=40, seed=3), 5)
    assert prompt_for(workload, 5) != prompt_for(workload, 6)


def test_streaming_chat_body_asks_for_usage_and_passes_extra_body_through() -> None:
    workload = Workload(max_tokens=16, temperature=0.0,
                        extra_body={"ignore_eos": True, "min_tokens": 16})
    body = request_body(workload, ApiKind.OPENAI_CHAT, "llama", 0)
    assert body["model"] == "llama"
    assert body["max_tokens"] == 16
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True
    assert body["min_tokens"] == 16
    assert body["temperature"] == 0.0
    assert body["messages"][0]["role"] == "user"


def test_completions_body_uses_prompt_and_non_streaming_omits_stream_options() -> None:
    body = request_body(Workload(stream=False, prompt="Hello"), ApiKind.OPENAI_COMPLETIONS,
                        "m", 0)
    assert body["prompt"] == "Hello"
    assert "messages" not in body
    assert "stream_options" not in body
