"""The simulator's pathological but well-formed streams send exactly what config.Fault says:
the ASGI app is driven directly, so every `send` (write) is seen with its time."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sustain.simulator.app import SimulatorApp
from sustain.simulator.config import FAULT_HEADER, Fault, SimulatorConfig

TTFT_S = 0.030
ITL_S = 1.0
"""Large against a busy machine's scheduling noise, so a wait between tokens cannot pass
unseen."""
SLACK_S = ITL_S
"""Most a write may come after its due time, or after another with no wait between them:
the least a stream that did wait between its tokens would be late by (so the checks hold on
a machine however busy, and still fail a stream that waits). Only the normal stream below
waits it out."""
CHAT = "/v1/chat/completions"
ASK = {"model": "m", "messages": [{"role": "user", "content": "a b c"}], "max_tokens": 5,
       "stream": True, "stream_options": {"include_usage": True}}


@dataclass(frozen=True, slots=True)
class Write:
    """One body message the app sent: when (perf_counter s, from the call) and its events'
    data (decoded JSON, or the text `[DONE]`)."""

    at: float
    events: list[Any]


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    writes: list[Write]
    """Body messages with bytes in them (the closing empty one left out)."""

    @property
    def events(self) -> list[Any]:
        return [event for write in self.writes for event in write.events]

    @property
    def whole(self) -> Any:
        (write,) = self.writes
        return write.events[0]

    def contents(self) -> list[str]:
        """The text of each event that carries output (chat content or completion text)."""
        texts = []
        for event in self.events:
            for choice in event["choices"] if isinstance(event, dict) else []:
                text = choice.get("delta", {}).get("content") or choice.get("text")
                if text:
                    texts.append(text)
        return texts

    def finishes(self) -> list[str]:
        return [choice["finish_reason"] for event in self.events if isinstance(event, dict)
                for choice in event["choices"] if choice["finish_reason"]]

    def usages(self) -> list[dict[str, Any]]:
        return [event["usage"] for event in self.events
                if isinstance(event, dict) and "usage" in event]


def events_of(body: bytes, streamed: bool) -> list[Any]:
    if not streamed:
        return [json.loads(body)]
    assert body.endswith(b"\n\n")
    found = []
    for block in body.decode().split("\n\n")[:-1]:
        assert block.startswith("data: ")
        data = block.removeprefix("data: ")
        found.append(data if data == "[DONE]" else json.loads(data))
    return found


async def call(app: SimulatorApp, body: dict[str, Any], fault: Fault | None = None,
               path: str = CHAT, method: str = "POST") -> Response:
    """Send `body` to the app, with `fault` in the fault header when given."""
    headers = [] if fault is None else [(FAULT_HEADER.encode(), fault.value.encode())]
    scope = {"type": "http", "method": method, "path": path, "headers": headers}
    raw = json.dumps(body).encode()
    messages: list[tuple[float, dict[str, Any]]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: Any) -> None:
        messages.append((time.perf_counter(), dict(message)))

    start = time.perf_counter()
    await app(scope, receive, send)
    head = messages[0][1]
    assert head["type"] == "http.response.start"
    bodies = messages[1:]
    assert bodies[-1][1].get("more_body", False) is False
    streamed = bool(body.get("stream"))
    return Response(head["status"], [Write(at - start, events_of(m["body"], streamed))
                                     for at, m in bodies if m["body"]])


def simulator(**kw: Any) -> SimulatorApp:
    settings: dict[str, Any] = {"ttft_ms": TTFT_S * 1000, "itl_ms": ITL_S * 1000,
                                "output_tokens": 32, "prefix_cache": False}
    return SimulatorApp(SimulatorConfig(**(settings | kw)))


def tokens(n: int) -> list[str]:
    return [f"tok{k} " for k in range(n)]


ROLE = {"role": "assistant", "content": ""}


def delta(event: Any) -> Any:
    return event["choices"][0]["delta"]


async def test_one_write_sends_the_whole_stream_in_one_write_at_ttft() -> None:
    r = await call(simulator(), ASK, Fault.ONE_WRITE)
    (write,) = r.writes
    assert TTFT_S <= write.at < TTFT_S + SLACK_S
    assert delta(write.events[0]) == ROLE
    assert r.contents() == tokens(5)
    assert r.finishes() == ["length"]
    assert [u["completion_tokens"] for u in r.usages()] == [5]
    assert write.events[-1] == "[DONE]"


async def test_one_write_is_chosen_by_config_and_answers_a_whole_body_at_ttft() -> None:
    app = simulator(fault=Fault.ONE_WRITE, fault_rate=1.0)
    streamed = await call(app, {**ASK, "stream_options": {}})
    whole = await call(app, {**ASK, "stream": False})
    assert len(streamed.writes) == 1
    assert streamed.usages() == []
    assert whole.writes[0].at < TTFT_S + SLACK_S
    assert whole.whole["choices"][0]["message"]["content"] == "".join(tokens(5))
    assert whole.whole["usage"]["completion_tokens"] == 5


async def test_single_token_sends_one_token_whatever_max_tokens_allows() -> None:
    app = simulator()
    r = await call(app, {**ASK, "max_tokens": 10}, Fault.SINGLE_TOKEN)
    whole = await call(app, {**ASK, "stream": False}, Fault.SINGLE_TOKEN)
    assert r.contents() == tokens(1)
    assert r.finishes() == ["stop"]
    assert [u["completion_tokens"] for u in r.usages()] == [1]
    assert r.events[-1] == "[DONE]"
    choice = whole.whole["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("tok0 ", "stop")
    assert whole.whole["usage"]["completion_tokens"] == 1


async def test_zero_tokens_sends_finish_and_usage_in_one_write_without_a_role_chunk() -> None:
    app = simulator()
    r = await call(app, {**ASK, "stream_options": {}}, Fault.ZERO_TOKENS)
    whole = await call(app, {**ASK, "stream": False}, Fault.ZERO_TOKENS)
    (write,) = r.writes
    assert write.at >= TTFT_S
    assert [delta(e) for e in write.events if isinstance(e, dict) and e["choices"]] == [{}]
    assert r.contents() == []
    assert r.finishes() == ["stop"]
    assert [u["completion_tokens"] for u in r.usages()] == [0]  # though not asked
    assert write.events[-1] == "[DONE]"
    choice = whole.whole["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("", "stop")
    assert whole.whole["usage"]["completion_tokens"] == 0


async def test_zero_tokens_differs_from_empty() -> None:
    empty = await call(simulator(), {**ASK, "stream_options": {}}, Fault.EMPTY)
    assert len(empty.writes) == 2  # the role chunk at once, the rest at TTFT
    assert delta(empty.events[0]) == ROLE
    assert empty.contents() == []
    assert empty.finishes() == ["length"]
    assert empty.usages() == []


async def test_usage_only_sends_no_choices_only_usage_even_when_not_asked() -> None:
    app = simulator()
    r = await call(app, {**ASK, "stream_options": {}}, Fault.USAGE_ONLY)
    whole = await call(app, {**ASK, "stream": False}, Fault.USAGE_ONLY)
    (write,) = r.writes
    assert TTFT_S <= write.at < TTFT_S + SLACK_S
    usage_chunk, done = write.events
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == 5
    assert done == "[DONE]"
    assert whole.whole["choices"] == []
    assert whole.whole["usage"]["completion_tokens"] == 5


async def test_identical_timestamps_writes_each_event_alone_with_no_wait_between() -> None:
    r = await call(simulator(), ASK, Fault.IDENTICAL_TIMESTAMPS)
    assert [len(w.events) for w in r.writes] == [1] * 9  # role, 5 tokens, finish, usage, DONE
    role, *rest = r.writes
    assert delta(role.events[0]) == ROLE
    assert rest[0].at >= TTFT_S
    assert rest[-1].at - rest[0].at < SLACK_S
    assert r.contents() == tokens(5)
    assert r.finishes() == ["length"]
    assert [u["completion_tokens"] for u in r.usages()] == [5]
    assert r.events[-1] == "[DONE]"
    assert len({e["created"] for e in r.events if isinstance(e, dict)}) == 1


async def test_normal_stream_waits_itl_between_tokens() -> None:
    """The contrast that makes the timing checks above mean something."""
    r = await call(simulator(), {**ASK, "max_tokens": 2})
    content = [w.at for w in r.writes if any(
        isinstance(e, dict) and e["choices"] and e["choices"][0]["delta"].get("content")
        for e in w.events)]
    # Never before its deadline: the second token is due ITL after the first, which is due
    # at TTFT (a stream that did not wait would end at TTFT).
    assert len(content) == 2
    assert content[0] >= TTFT_S
    assert content[-1] >= TTFT_S + ITL_S


async def test_overlong_streams_more_tokens_than_max_tokens() -> None:
    app = simulator(itl_ms=0)
    limited = await call(app, {**ASK, "max_tokens": 4}, Fault.OVERLONG)
    unlimited = await call(app, {k: v for k, v in ASK.items() if k != "max_tokens"},
                           Fault.OVERLONG)
    whole = await call(app, {**ASK, "max_tokens": 4, "stream": False}, Fault.OVERLONG)
    assert limited.contents() == tokens(11)
    assert limited.finishes() == ["length"]
    assert [u["completion_tokens"] for u in limited.usages()] == [11]
    assert len(unlimited.contents()) == 2 * 32 + 3
    assert [u["completion_tokens"] for u in unlimited.usages()] == [2 * 32 + 3]
    assert whole.whole["choices"][0]["message"]["content"] == "".join(tokens(11))
    assert whole.whole["usage"]["completion_tokens"] == 11


async def test_overlong_answers_in_text_even_when_a_tool_is_offered() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    r = await call(simulator(itl_ms=0), {**ASK, "tools": tools}, Fault.OVERLONG)
    assert r.contents() == tokens(13)  # max_tokens 5


async def test_instant_sends_all_content_in_one_delta_in_the_same_write_as_the_end() -> None:
    app = simulator()
    r = await call(app, ASK, Fault.INSTANT)
    text = await call(app, {"model": "m", "prompt": "x", "max_tokens": 5, "stream": True},
                      Fault.INSTANT, path="/v1/completions")
    (write,) = r.writes
    assert TTFT_S <= write.at < TTFT_S + SLACK_S
    assert delta(write.events[0]) == ROLE
    assert r.contents() == ["".join(tokens(5))]
    assert r.finishes() == ["length"]
    assert [u["completion_tokens"] for u in r.usages()] == [5]
    assert write.events[-1] == "[DONE]"
    assert len(text.writes) == 1
    assert text.contents() == ["".join(tokens(5))]


@pytest.mark.parametrize("fault", [Fault.IDENTICAL_TIMESTAMPS, Fault.INSTANT])
async def test_at_once_faults_answer_the_normal_whole_body_at_ttft(fault: Fault) -> None:
    whole = await call(simulator(), {**ASK, "stream": False}, fault)
    assert whole.writes[0].at < TTFT_S + SLACK_S
    assert whole.whole["choices"][0]["message"]["content"] == "".join(tokens(5))
    assert whole.whole["usage"]["completion_tokens"] == 5


PATHOLOGICAL = [Fault.ONE_WRITE, Fault.SINGLE_TOKEN, Fault.ZERO_TOKENS, Fault.USAGE_ONLY,
                Fault.IDENTICAL_TIMESTAMPS, Fault.OVERLONG, Fault.INSTANT]


@pytest.mark.parametrize("fault", PATHOLOGICAL)
async def test_truth_log_marks_every_pathological_stream(fault: Fault, tmp_path: Path) -> None:
    log = tmp_path / "truth.jsonl"
    await call(simulator(itl_ms=1, truth_log=str(log)), ASK, fault)
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert record["start"] <= record["first_byte"] <= record["first_token"] \
        <= record["last_byte"]
    assert record["first_token"] >= record["first_token_due"]
    if fault in (Fault.ONE_WRITE, Fault.ZERO_TOKENS, Fault.USAGE_ONLY, Fault.INSTANT):
        assert record["first_byte"] == record["first_token"] == record["last_byte"]


@pytest.mark.parametrize("fault", PATHOLOGICAL)
async def test_fault_switch_selects_each_pathological_stream(fault: Fault) -> None:
    app = simulator()
    switched = await call(app, {"fault": fault.value, "fault_rate": 1.0}, path="/sim/fault",
                          method="PUT")
    assert switched.status == 200
    assert app.config.fault is fault
