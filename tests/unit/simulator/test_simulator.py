"""The simulator speaks the OpenAI protocol and keeps its timing promises."""

from __future__ import annotations

import json
import time

import httpx

from simulator.config import SimulatorConfig
from simulator.server import BackgroundSimulator


def stream_events(sim: BackgroundSimulator, body: dict[str, object]) -> list[tuple[float, str]]:
    events: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    with httpx.stream("POST", f"{sim.base_url}/chat/completions", json=body, timeout=30) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append((time.perf_counter() - t0, line[6:]))
    return events


def test_models_lists_the_configured_model() -> None:
    with BackgroundSimulator(SimulatorConfig(model="sim-x")) as sim:
        data = httpx.get(f"{sim.base_url}/models").json()
    assert [m["id"] for m in data["data"]] == ["sim-x"]


def test_max_tokens_and_include_usage_are_honoured() -> None:
    with BackgroundSimulator(SimulatorConfig(ttft_ms=5, itl_ms=1, output_tokens=32)) as sim:
        body = {"model": "m", "messages": [{"role": "user", "content": "a b c"}],
                "max_tokens": 5, "stream": True, "stream_options": {"include_usage": True}}
        events = stream_events(sim, body)
        without_usage = stream_events(sim, {**body, "stream_options": {}})
    payloads = [json.loads(d) for _, d in events if d != "[DONE]"]
    contents = [p["choices"][0]["delta"].get("content") for p in payloads if p["choices"]]
    assert [c for c in contents if c] == [f"tok{k} " for k in range(5)]
    assert payloads[-1]["choices"] == []
    assert payloads[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 5,
                                     "total_tokens": 8}
    assert events[-1][1] == "[DONE]"
    assert all("usage" not in json.loads(d) for _, d in without_usage if d != "[DONE]")


def test_token_deadlines_do_not_accumulate_error() -> None:
    config = SimulatorConfig(ttft_ms=20, itl_ms=5, output_tokens=200)
    with BackgroundSimulator(config) as sim:
        events = stream_events(sim, {"model": "m", "messages": [], "stream": True,
                                     "max_tokens": 200})
    content_times = [t for t, d in events
                     if d != "[DONE]" and json.loads(d)["choices"]
                     and json.loads(d)["choices"][0].get("delta", {}).get("content")]
    assert len(content_times) == 200
    span = content_times[-1] - content_times[0]
    assert abs(span - 199 * 5 / 1000) < 0.025, span


def test_non_streaming_completion_returns_text_and_usage() -> None:
    with BackgroundSimulator(SimulatorConfig(ttft_ms=1, itl_ms=0, output_tokens=4)) as sim:
        r = httpx.post(f"{sim.base_url}/completions",
                       json={"model": "m", "prompt": "x y", "max_tokens": 10})
    payload = r.json()
    assert payload["choices"][0]["text"] == "tok0 tok1 tok2 tok3 "
    assert payload["usage"]["completion_tokens"] == 4


def test_unknown_route_is_404_with_openai_error_shape() -> None:
    with BackgroundSimulator() as sim:
        r = httpx.get(f"{sim.base_url}/nope")
    assert r.status_code == 404
    assert "error" in r.json()
