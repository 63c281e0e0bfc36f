"""The simulator speaks the OpenAI protocol and keeps its timing promises."""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from sustain.simulator.completion import anthropic_history_problem, responses_history_problem
from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator
from tests.processes import wait_until


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
                                     "total_tokens": 8,
                                     "prompt_tokens_details": {"cached_tokens": 0}}
    assert events[-1][1] == "[DONE]"
    assert all("usage" not in json.loads(d) for _, d in without_usage if d != "[DONE]")


STALL_S = 0.5


def test_token_deadlines_do_not_accumulate_error(tmp_path: Path) -> None:
    """Tokens are due at times fixed from the start of generation, so a stall of the server
    delays only the tokens due during it: after it the stream is back on its schedule and
    the last token leaves when it was due, not a stall later. The stall is made here, so the
    check does not depend on the machine: the simulator runs on a thread of this process,
    and this thread holds the GIL for STALL_S mid-stream."""
    log = tmp_path / "truth.jsonl"
    config = SimulatorConfig(ttft_ms=20, itl_ms=5, output_tokens=200, truth_log=str(log))
    first = threading.Event()

    def read(sim: BackgroundSimulator) -> list[float]:
        times = []
        with httpx.stream("POST", f"{sim.base_url}/chat/completions", timeout=30, json={
                "model": "m", "messages": [], "stream": True, "max_tokens": 200}) as r:
            for line in r.iter_lines():
                if line.startswith("data: {") and json.loads(line[6:])["choices"] and \
                        json.loads(line[6:])["choices"][0].get("delta", {}).get("content"):
                    times.append(time.perf_counter())
                    first.set()
        return times

    with BackgroundSimulator(config) as sim, ThreadPoolExecutor(1) as pool:
        reading = pool.submit(read, sim)
        assert first.wait(30)
        switching = sys.getswitchinterval()
        sys.setswitchinterval(10 * STALL_S)  # no other thread runs until this one waits
        try:
            until = time.perf_counter() + STALL_S
            while time.perf_counter() < until:
                pass
        finally:
            sys.setswitchinterval(switching)
        content_times = reading.result(30)
    assert len(content_times) == 200
    gaps = [b - a for a, b in itertools.pairwise(content_times)]
    assert max(gaps) >= STALL_S / 2, "the stall happened mid-stream"
    (record,) = truth(log)
    late = record["last_byte"] - (record["first_token_due"] + 199 * config.itl_ms / 1000)
    assert late >= 0.0, "never before its deadline"
    # Back on schedule: late by the last sleep's overshoot (milliseconds), where a deadline
    # counted from the previous write would have carried the whole stall.
    assert late < STALL_S / 2, late


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


def truth(log: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_batch_capacity_queues_requests_so_ttft_rises_past_saturation(tmp_path: Path) -> None:
    log = tmp_path / "truth.jsonl"
    config = SimulatorConfig(ttft_ms=300, itl_ms=1, output_tokens=2, max_batch=1,
                             truth_log=str(log))
    body = {"model": "m", "messages": [], "stream": True}
    with BackgroundSimulator(config) as sim, ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda _: stream_events(sim, body), range(3)))
    records = sorted(truth(log), key=lambda r: r["start"])
    for before, after in itertools.pairwise(records):
        assert after["start"] >= before["last_byte"] - 0.001  # one generation at a time
    # Three requests sent at once, each generation at least 301 ms: the last to start waits
    # at least 602 ms less the spread of the arrivals, and its TTFT is 300 ms more; these
    # hold unless the three arrive over 450 ms apart.
    waits = [r["start"] - r["arrival"] for r in records]
    assert max(waits) > 0.05
    assert max(r["first_token"] - r["arrival"] for r in records) > 0.45


def gauge(sim: BackgroundSimulator, name: str) -> float:
    """A gauge of the simulator's /metrics (one model, so one series)."""
    text = httpx.get(f"{sim.base_url.removesuffix('/v1')}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{"))


def test_a_batch_limit_switched_mid_flight_lets_every_queued_request_finish() -> None:
    """Requests keep the slot of the limit they were admitted under: the one in flight gives
    its slot back to the request queued behind it, not to the new limit's. The first holds
    its slot for 3 s, time enough for the second to queue however busy the machine."""
    config = SimulatorConfig(ttft_ms=3000, itl_ms=1, output_tokens=2, max_batch=1)
    body = {"model": "m", "messages": [], "stream": True}
    with BackgroundSimulator(config) as sim, ThreadPoolExecutor(2) as pool:
        in_flight = pool.submit(stream_events, sim, body)
        wait_until(lambda: gauge(sim, "vllm:num_requests_running") == 1, 30)
        queued = pool.submit(stream_events, sim, body)
        wait_until(lambda: gauge(sim, "vllm:num_requests_waiting") == 1, 30)
        root = sim.base_url.removesuffix("/v1")
        assert httpx.put(f"{root}/sim/fault", json={"max_batch": 4}).status_code == 200
        assert in_flight.result(timeout=30)[-1][1] == "[DONE]"
        assert queued.result(timeout=30)[-1][1] == "[DONE]"  # a hang guard: never, unwoken


def test_lognormal_jitter_is_seeded_around_the_median(tmp_path: Path) -> None:
    runs = []
    for attempt in range(2):
        log = tmp_path / f"truth{attempt}.jsonl"
        config = SimulatorConfig(ttft_ms=20, itl_ms=1, output_tokens=2, ttft_sigma=0.5, seed=4,
                                 truth_log=str(log))
        with BackgroundSimulator(config) as sim:
            for _ in range(41):
                stream_events(sim, {"model": "m", "messages": [], "stream": True})
        runs.append([r["first_token_due"] - r["start"] for r in truth(log)])
    assert runs[0] == pytest.approx(runs[1], abs=1e-6)
    ordered = sorted(runs[0])
    assert ordered[20] == pytest.approx(0.020, rel=0.3)
    assert ordered[-1] / ordered[0] > 2.0


def test_every_nth_request_fails_and_429_carries_retry_after() -> None:
    body = {"model": "m", "prompt": "x", "max_tokens": 1}
    with BackgroundSimulator(SimulatorConfig(ttft_ms=1, error_every=3)) as sim:
        codes = [httpx.post(f"{sim.base_url}/completions", json=body).status_code
                 for _ in range(6)]
        limited = httpx.post(f"{sim.base_url}/completions", json=body,
                             headers={"x-sim-fault": "http_429"})
    assert codes == [200, 200, 500, 200, 200, 500]
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "1"


def test_fault_switch_breaks_and_heals_a_live_endpoint() -> None:
    body = {"model": "m", "prompt": "x", "max_tokens": 1}
    with BackgroundSimulator(SimulatorConfig(ttft_ms=1, seed=7)) as sim, \
            httpx.Client() as client:
        root = sim.base_url.removesuffix("/v1")
        before = [client.post(f"{sim.base_url}/completions", json=body).status_code
                  for _ in range(20)]
        switched = client.put(f"{root}/sim/fault", json={"fault": "http_500", "fault_rate": 0.5})
        broken = [client.post(f"{sim.base_url}/completions", json=body).status_code
                  for _ in range(200)]
        bad_rate = client.put(f"{root}/sim/fault", json={"fault_rate": 2})
        bad_fault = client.put(f"{root}/sim/fault", json={"fault": "explode"})
        healed = client.put(f"{root}/sim/fault", json={"fault_rate": 0})
        after = [client.post(f"{sim.base_url}/completions", json=body).status_code
                 for _ in range(20)]
        state = client.get(f"{root}/sim/fault").json()
    assert set(before) == {200}
    assert set(after) == {200}
    assert switched.json() == {"fault": "http_500", "fault_rate": 0.5, "max_batch": None}
    assert 70 <= broken.count(500) <= 130
    assert broken.count(500) + broken.count(200) == 200
    assert bad_rate.status_code == 422
    assert "fault_rate" in bad_rate.json()["error"]["message"]
    assert bad_fault.status_code == 422
    assert healed.status_code == 200
    assert state == {"fault": "http_500", "fault_rate": 0.0, "max_batch": None}


def test_truth_log_records_server_side_times(tmp_path: Path) -> None:
    log = tmp_path / "truth.jsonl"
    with BackgroundSimulator(SimulatorConfig(ttft_ms=10, itl_ms=1, output_tokens=3,
                                             truth_log=str(log))) as sim:
        stream_events(sim, {"model": "m", "messages": [], "stream": True})
    (line,) = log.read_text().splitlines()
    record = json.loads(line)
    assert record["arrival"] <= record["first_byte"] <= record["first_token"] \
        <= record["last_byte"]
    assert record["first_token_due"] - record["start"] == pytest.approx(0.010, abs=1e-6)
    assert record["first_token"] >= record["first_token_due"]


def test_offered_tools_are_called_and_a_tool_result_is_answered_in_text() -> None:
    tools = [{"type": "function", "function": {
        "name": "lookup", "parameters": {"type": "object", "required": ["city"]}}}]
    with BackgroundSimulator(SimulatorConfig(ttft_ms=1, itl_ms=0)) as sim:
        asked = [json.loads(d) for _, d in stream_events(sim, {
            "model": "m", "stream": True, "tools": tools,
            "messages": [{"role": "user", "content": "weather?"}]}) if d != "[DONE]"]
        pieces = [c["choices"][0]["delta"]["tool_calls"][0] for c in asked
                  if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
        call_id = pieces[0]["id"]
        arguments = "".join(p["function"]["arguments"] for p in pieces)
        finish = [c["choices"][0]["finish_reason"] for c in asked if c["choices"]][-1]
        history = [{"role": "user", "content": "weather?"},
                   {"role": "assistant", "content": None, "tool_calls": [
                       {"id": call_id, "type": "function",
                        "function": {"name": "lookup", "arguments": arguments}}]}]
        answered = httpx.post(f"{sim.base_url}/chat/completions", json={
            "model": "m", "tools": tools,
            "messages": [*history, {"role": "tool", "tool_call_id": call_id, "content": "sun"}]})
        stray = httpx.post(f"{sim.base_url}/chat/completions", json={
            "model": "m", "messages": [*history, {"role": "tool", "tool_call_id": "other",
                                                  "content": "sun"}]})
        unanswered = httpx.post(f"{sim.base_url}/chat/completions", json={
            "model": "m", "messages": [*history, {"role": "user", "content": "and?"}]})
    assert pieces[0]["function"]["name"] == "lookup"
    assert json.loads(arguments) == {"city": "value of city"}
    assert finish == "tool_calls"
    assert answered.status_code == 200
    assert answered.json()["choices"][0]["message"]["content"].startswith("tok0")
    assert stray.status_code == 400
    assert "answers no pending tool call" in stray.text
    assert unanswered.status_code == 400
    assert "were not answered" in unanswered.text


CALLED = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}


@pytest.mark.parametrize(("items", "problem"), [
    ([{"role": "user", "content": "q"}, CALLED,
      {"type": "function_call_output", "call_id": "c1", "output": "sun"}], None),
    ("just text", None),
    ([CALLED, {"role": "user", "content": "and?"}], "function calls ['c1'] were not answered"),
    ([CALLED], "function calls ['c1'] were not answered"),
    ([{"type": "function_call_output", "call_id": "c9", "output": "x"}],
     "function_call_output answers no pending call ('c9')"),
])
def test_a_responses_history_pairs_each_call_with_its_output(items: object,
                                                             problem: str | None) -> None:
    assert responses_history_problem(items) == problem


USED = {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "lookup",
                                          "input": {}}]}


@pytest.mark.parametrize(("messages", "problem"), [
    ([{"role": "user", "content": "q"}, USED,
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1",
                                    "content": "sun"}, {"type": "text", "text": "and?"}]}],
     None),
    ([{"role": "user", "content": "q"}, USED, {"role": "user", "content": "and?"}],
     "tool uses ['u1'] answered by []"),
    ([{"role": "user", "content": "q"}, USED,
      {"role": "user", "content": [{"type": "text", "text": "and?"},
                                   {"type": "tool_result", "tool_use_id": "u1"}]}],
     "tool_result blocks must come first in a user message"),
    ([{"role": "user", "content": "q"}, {"role": "user", "content": "again"}],
     "messages must alternate user and assistant, from user (wanted assistant)"),
    ([{"role": "user", "content": "q"}, USED], "tool uses ['u1'] were not answered"),
])
def test_an_anthropic_history_alternates_and_answers_each_tool_use(
        messages: object, problem: str | None) -> None:
    assert anthropic_history_problem(messages) == problem
