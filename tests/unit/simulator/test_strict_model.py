"""`strict_model` (`sustain simulate --strict-model`): a request naming another model than the
simulator's is answered as vLLM answers it, 404 with vLLM's error body, on every kind that
names a model; its own model, or none, is served. Off (the default), any model is served, as
the many tests that name `m` rely on."""

from __future__ import annotations

import httpx
import pytest

from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.mark.parametrize(("path", "body"), [
    ("/chat/completions", CHAT),
    ("/completions", {"prompt": "hi", "max_tokens": 2}),
    ("/embeddings", {"input": ["a b"]}),
])
def test_another_model_gets_vllms_404_and_its_own_or_none_is_served(
        path: str, body: dict[str, object]) -> None:
    config = SimulatorConfig(ttft_ms=1.0, itl_ms=0.0, model="llama-3-8b", strict_model=True)
    with BackgroundSimulator(config) as sim:
        wrong = httpx.post(f"{sim.base_url}{path}", json={**body, "model": "gpt-4o"})
        own = httpx.post(f"{sim.base_url}{path}", json={**body, "model": "llama-3-8b"})
        unnamed = httpx.post(f"{sim.base_url}{path}", json=body)
    assert wrong.status_code == 404
    assert wrong.json() == {"object": "error", "message": "The model `gpt-4o` does not exist.",
                            "type": "NotFoundError", "param": None, "code": 404}
    assert own.status_code == 200, own.text
    assert unnamed.status_code == 200, unnamed.text


def test_without_strict_model_any_model_is_served() -> None:
    with BackgroundSimulator(SimulatorConfig(ttft_ms=1.0, itl_ms=0.0)) as sim:
        answer = httpx.post(f"{sim.base_url}/chat/completions", json={**CHAT, "model": "m"})
    assert answer.status_code == 200, answer.text
