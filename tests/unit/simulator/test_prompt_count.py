"""The simulator counts a prompt in whitespace words, or, when asked, as a subword tokenizer
under a chat template would: each word ceil(length / chars_per_token) tokens, and a fixed
number more for every chat-shaped request."""

from __future__ import annotations

import httpx

from sustain.simulator.completion import prompt_token_count
from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator


def test_a_word_is_one_token_unless_longer_words_are_split() -> None:
    words = ["mu", "alpha", "epsilon", "s0123456789abcdef"]
    assert prompt_token_count(words, None) == 4
    assert prompt_token_count(words, 3.0) == 1 + 2 + 3 + 6
    assert prompt_token_count([], 3.0) == 0


def test_usage_counts_subwords_and_the_chat_template() -> None:
    config = SimulatorConfig(ttft_ms=1, itl_ms=0, output_tokens=1, prompt_chars_per_token=3.0,
                             chat_template_tokens=20, prefix_cache=False)
    with BackgroundSimulator(config) as sim:
        chat = httpx.post(f"{sim.base_url}/chat/completions", json={
            "model": "m", "messages": [{"role": "user", "content": "mu alpha epsilon"}],
            "max_tokens": 1}).json()
        completion = httpx.post(f"{sim.base_url}/completions", json={
            "model": "m", "prompt": "mu alpha epsilon", "max_tokens": 1}).json()
    assert chat["usage"]["prompt_tokens"] == 20 + 6
    assert completion["usage"]["prompt_tokens"] == 6  # no template around a bare prompt


def test_cached_tokens_are_counted_as_the_prompt_is() -> None:
    config = SimulatorConfig(ttft_ms=1, itl_ms=0, output_tokens=1, prompt_chars_per_token=3.0)
    prompt = " ".join(["epsilon"] * 40)  # 3 tokens a word; 32 words make two cache blocks
    with BackgroundSimulator(config) as sim:
        for _ in range(2):
            usage = httpx.post(f"{sim.base_url}/completions", json={
                "model": "m", "prompt": prompt, "max_tokens": 1}).json()["usage"]
    assert usage["prompt_tokens"] == 120
    assert usage["prompt_tokens_details"]["cached_tokens"] == 96
