"""Sessions files and conversations in play (probes/workload/sessions.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sustain.probes.measure.reply import Reply, ToolCall
from sustain.probes.workload.dataset import DatasetError
from sustain.probes.workload.sessions import (
    MAX_HISTORY_CHARS,
    Conversation,
    Sessions,
    SessionTurn,
    dialogue,
    parse_sessions,
)


def lines(*records: dict[str, Any]) -> list[str]:
    return [json.dumps(r) for r in records]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_turns_are_grouped_by_conversation_in_turn_order() -> None:
    conversations = parse_sessions(lines(
        {"conversation_id": "b", "turn": 1, "messages": [user("b1")], "delay_seconds": 2},
        {"conversation_id": 7, "turn": 0, "messages": [user("x")]},
        {"conversation_id": "b", "turn": 0, "messages": [user("b0")], "max_tokens": 9},
    ), "f.jsonl")
    assert [c.id for c in conversations] == ["b", "7"]
    b = conversations[0]
    assert [t.messages[0]["content"] for t in b.turns] == ["b0", "b1"]
    assert (b.turns[0].max_tokens, b.turns[1].delay_s) == (9, 2.0)


@pytest.mark.parametrize(("record", "message"), [
    ({"turn": 0, "messages": []}, "'conversation_id'"),
    ({"conversation_id": "a", "turn": -1, "messages": []}, "'turn'"),
    ({"conversation_id": "a", "turn": 0, "messages": [{"content": "x"}]}, "'role'"),
    ({"conversation_id": "a", "turn": 0, "messages": [{"role": "tool", "content": "x"}]},
     "'tool_call_id'"),
    ({"conversation_id": "a", "turn": 0, "messages": [], "delay_seconds": 1e9},
     "'delay_seconds'"),
    ({"conversation_id": "a", "turn": 0, "messages": [], "tools": "all"}, "'tools'"),
    ({"conversation_id": "a", "turn": 0, "messages": [], "max_tokens": 0}, "'max_tokens'"),
])
def test_a_bad_line_is_refused_naming_file_line_and_field(record: dict[str, Any],
                                                          message: str) -> None:
    with pytest.raises(DatasetError, match=rf"f.jsonl:2: .*{message}"):
        parse_sessions(["", json.dumps(record)], "f.jsonl")


def test_a_repeated_turn_is_refused() -> None:
    with pytest.raises(DatasetError, match="turn 0 twice"):
        parse_sessions(lines({"conversation_id": "a", "turn": 0, "messages": [user("x")]},
                             {"conversation_id": "a", "turn": 0, "messages": [user("y")]}),
                       "f")


def test_history_grows_by_each_turn_and_each_actual_reply() -> None:
    talk = dialogue(Conversation("a", (SessionTurn((user("one"),)), SessionTurn((user("two"),)))),
                    allow_cache=True, header=False)
    first = talk.request(lambda: "unused")
    assert [m["content"] for m in first.messages] == ["one"]
    talk.answered(Reply("reply one"))
    second = talk.request(lambda: "unused")
    assert [(m["role"], m["content"]) for m in second.messages] == [
        ("user", "one"), ("assistant", "reply one"), ("user", "two")]
    assert talk.done
    assert second.index == 1


def test_the_salt_leads_the_first_user_message_after_the_system_prompt() -> None:
    turn = SessionTurn(({"role": "system", "content": "rules"}, user("hello")))
    talk = dialogue(Conversation("a", (turn, SessionTurn((user("again"),)))),
                    allow_cache=False, header=True)
    sent = talk.request(lambda: "")
    assert sent.messages[0]["content"] == "rules"
    salt, _, rest = sent.messages[1]["content"].partition(" ")
    assert salt.startswith("s")
    assert len(salt) == 17
    assert rest == "hello"
    talk.answered(Reply("ok"))
    assert talk.request(lambda: "").messages[-1]["content"] == "again"  # salted once only
    assert sent.session_id is not None
    assert sent.session_id.startswith("a-")


def test_tool_results_answer_the_calls_the_endpoint_really_made() -> None:
    recorded = ({"id": "rec", "type": "function",
                 "function": {"name": "f", "arguments": "{}"}},)
    turns = (SessionTurn((user("go"),), recorded_calls=recorded),
             SessionTurn(({"role": "tool", "tool_call_id": "rec", "content": "42"},)))
    live = dialogue(Conversation("a", turns), allow_cache=True, header=False)
    live.request(lambda: "")
    live.answered(Reply("", (ToolCall("call_live", "f", "{}"),)))
    sent = live.request(lambda: "")
    assert sent.messages[1]["tool_calls"][0]["id"] == "call_live"
    assert sent.messages[2]["tool_call_id"] == "call_live"


def test_recorded_calls_stand_in_when_the_endpoint_made_none() -> None:
    recorded = ({"id": "rec", "type": "function",
                 "function": {"name": "f", "arguments": "{}"}},)
    turns = (SessionTurn((user("go"),), recorded_calls=recorded),
             SessionTurn(({"role": "tool", "tool_call_id": "rec", "content": "42"},)))
    talk = dialogue(Conversation("a", turns), allow_cache=True, header=False)
    talk.request(lambda: "")
    talk.answered(Reply("I will not call it"))
    sent = talk.request(lambda: "")
    assert sent.messages[1]["tool_calls"] == list(recorded)
    assert sent.messages[2]["tool_call_id"] == "rec"


def test_synthetic_turns_are_written_when_sent_and_shards_deal_conversations() -> None:
    sessions = Sessions(synthetic_turns=2, synthetic_delay_s=1.5)
    stream = sessions.stream(1, 3)
    first, second = next(stream), next(stream)
    assert (first.id, second.id) == ("c1", "c4")
    assert [t.delay_s for t in first.turns] == [0.0, 1.5]
    talk = dialogue(first, allow_cache=True, header=False)
    assert talk.request(lambda: "w1 w2").messages == ({"role": "user", "content": "w1 w2"},)
    filed = Sessions(conversations=tuple(Conversation(str(i), ()) for i in range(5)))
    assert [c.id for c in filed.stream(0, 2)] == ["0", "2", "4"]


def test_calls_left_unanswered_leave_the_history_and_results_without_a_call_are_dropped(
        ) -> None:
    turns = (SessionTurn((user("go"),)),
             SessionTurn(({"role": "tool", "tool_call_id": "a", "content": "1"},
                          {"role": "tool", "tool_call_id": "b", "content": "2"})),
             SessionTurn((user("next"),)))
    talk = dialogue(Conversation("a", turns), allow_cache=True, header=False)
    talk.request(lambda: "")
    talk.answered(Reply("", (ToolCall("live", "f", "{}"),)))  # one call, two results
    sent = talk.request(lambda: "")
    assert [m.get("tool_call_id") for m in sent.messages[2:]] == ["live"]
    talk.answered(Reply("", (ToolCall("x", "f", "{}"), ToolCall("y", "g", "{}"))))
    last = talk.request(lambda: "")  # a user turn: the two calls go unanswered
    assert last.messages[-2] == {"role": "assistant", "content": ""}
    assert last.messages[-1] == {"role": "user", "content": "next"}


def test_a_history_past_its_bound_ends_the_conversation() -> None:
    talk = dialogue(Conversation("a", (SessionTurn((user("x"),)),) * 2), allow_cache=True,
                    header=False)
    talk.request(lambda: "")
    assert not talk.too_long
    talk.answered(Reply("y" * (MAX_HISTORY_CHARS + 1)))
    assert talk.too_long
