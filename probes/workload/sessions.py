"""Multi-turn sessions (agentic conversations), in MLPerf Endpoints' layout: one JSONL line
per turn, `conversation_id`, `turn`, `messages` (the new user or tool messages of that turn),
optional `tools`, `tool_calls` (the assistant's recorded calls), `delay_s` (think or tool
time before the turn, in seconds; MLPerf's `delay_seconds` is read too) and `max_tokens`.
Or a synthetic form: `turns` turns of one user message each, of the workload's input length.

A conversation is played in order, one turn in flight: each turn sends the history so far
plus its own messages, and the assistant's actual reply (text and tool calls) joins the
history. Tool results of a turn answer the calls the endpoint really made (their
`tool_call_id`s are mapped onto the live ids); when the endpoint made none where the file
recorded some, the recorded calls stand in, so the conversation stays valid.

Read once before a run, only from where the DatasetPolicy allows and up to its size cap;
errors name the file and line. Plain data and pure functions: the driver is load/sessions.py.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sustain.probes.measure.reply import Reply
from sustain.probes.workload.dataset import DatasetError, DatasetPolicy
from sustain.probes.workload.spec import Workload

MAX_CONVERSATIONS = 100_000
MAX_TURNS = 1_000
"""Turns of one conversation."""
MAX_TURN_MESSAGES = 256
MAX_DELAY_S = 3600.0
MAX_TOOLS = 128
MAX_HISTORY_CHARS = 4 * 1024 * 1024
"""A conversation whose history grows past this (as JSON) ends before its next turn: every
turn re-sends the history, encoded on the loop that times requests."""
ROLES = frozenset({"system", "user", "tool", "assistant", "developer"})


@dataclass(frozen=True, slots=True)
class SessionTurn:
    """One turn as the file (or the synthetic form) gives it."""

    messages: tuple[dict[str, Any], ...]
    """The turn's new messages; empty for a synthetic turn (one user message of the
    workload's input length, written when it is sent)."""
    tools: tuple[dict[str, Any], ...] | None = None
    recorded_calls: tuple[dict[str, Any], ...] = ()
    """The assistant's tool calls the file recorded in answer to this turn."""
    delay_s: float = 0.0
    """Think or tool time before this turn is sent (after the previous reply)."""
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    turns: tuple[SessionTurn, ...]


@dataclass(frozen=True, slots=True)
class Sessions:
    """A run's conversations: a file's, in file order, or synthetic ones (`c0`, `c1`, ...,
    each `turns` turns long, as many as the profile's bounds allow)."""

    conversations: tuple[Conversation, ...] = ()
    synthetic_turns: int | None = None
    synthetic_delay_s: float = 0.0
    header: bool = False
    """Send each turn's conversation as an `X-Session-ID` header (sticky routing)."""
    allow_cache: bool = False
    """No salt: a conversation's first message is the same in every run."""

    def stream(self, index: int = 0, count: int = 1) -> Iterator[Conversation]:
        """The conversations one shard plays: every `count`-th, from `index` (a stage split
        over worker processes plays each conversation once); endless when synthetic."""
        if self.synthetic_turns is None:
            yield from self.conversations[index::count]
            return
        number = index
        while True:
            yield Conversation(f"c{number}", tuple(
                SessionTurn(messages=(), delay_s=0.0 if turn == 0 else self.synthetic_delay_s)
                for turn in range(self.synthetic_turns)))
            number += count


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """What one turn sends: the whole message list (history, then the turn's own), the
    tools, the output cap and, when asked, the session header's value."""

    conversation: str
    index: int
    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] | None
    max_tokens: int | None
    session_id: str | None


@dataclass(slots=True)
class Dialogue:
    """One conversation in play: its history grows by each turn's messages and each actual
    reply. A fresh salt leads its first user message (unless the workload allows the
    cache), so no conversation or run reuses another's prefix while later turns reuse their
    own history, as a real conversation does."""

    conversation: Conversation
    salt: str
    session_id: str | None
    history: list[dict[str, Any]] = field(default_factory=list)
    next_turn: int = 0
    last_reply: Reply | None = None
    chars: int = 0
    """The history's size as JSON (characters)."""

    @property
    def done(self) -> bool:
        return self.next_turn >= len(self.conversation.turns)

    @property
    def delay_s(self) -> float:
        """Think or tool time before the next turn."""
        return 0.0 if self.done else self.conversation.turns[self.next_turn].delay_s

    @property
    def too_long(self) -> bool:
        """The history has grown past MAX_HISTORY_CHARS: the conversation ends here."""
        return self.chars > MAX_HISTORY_CHARS

    def request(self, write: Callable[[], str]) -> TurnRequest:
        """The next turn's request; `write()` gives a synthetic turn's user text. Call
        `answered` with its reply before asking for the turn after."""
        index = self.next_turn
        turn = self.conversation.turns[index]
        own = self._answering(turn.messages, index) if turn.messages else \
            [{"role": "user", "content": write()}]
        if self.salt and not any(m.get("role") not in ("system", "developer")
                                 for m in self.history):
            own = salted(own, self.salt)
        self._extend(own)
        self.next_turn += 1
        return TurnRequest(conversation=self.conversation.id, index=index,
                           messages=tuple(self.history), tools=turn.tools,
                           max_tokens=turn.max_tokens, session_id=self.session_id)

    def answered(self, reply: Reply) -> None:
        self.last_reply = reply
        self._extend([reply.message()])

    def _extend(self, messages: list[dict[str, Any]]) -> None:
        self.history.extend(messages)
        self.chars += sum(len(json.dumps(m)) for m in messages)

    def _answering(self, messages: tuple[dict[str, Any], ...], index: int
                   ) -> list[dict[str, Any]]:
        """The turn's messages, so that the history stays one a server accepts: every tool
        call of the last reply answered, every tool result answering a call. The turn's
        results are paired with the calls the endpoint really made (a result naming a live
        id keeps it, the others take the remaining ids in order); a result left without a
        call is dropped, and a call left without a result is taken out of the reply. Where
        the endpoint made no calls but the turn brings results, the calls the file recorded
        for the previous turn join the last assistant message instead."""
        own = [dict(m) for m in messages]
        last = self.history[-1] if self.history else None
        if last is None or last.get("role") != "assistant":
            return own
        results = [m for m in own if m.get("role") == "tool"]
        calls = list(last.get("tool_calls") or [])
        if not calls and results and index > 0:
            calls = list(self.conversation.turns[index - 1].recorded_calls)
        ids = [str(c.get("id", "")) for c in calls]
        free = [i for i in ids if i not in {m.get("tool_call_id") for m in results}]
        answered: set[str] = set()
        for message in results:
            if message.get("tool_call_id") not in ids or message["tool_call_id"] in answered:
                message["tool_call_id"] = free.pop(0) if free else None
            if message["tool_call_id"] is not None:
                answered.add(message["tool_call_id"])
        own = [m for m in own if m.get("role") != "tool" or m["tool_call_id"] is not None]
        kept = [c for c in calls if str(c.get("id", "")) in answered]
        if kept != list(last.get("tool_calls") or []):
            reply = {key: value for key, value in last.items() if key != "tool_calls"}
            if kept:
                reply["tool_calls"] = kept
            elif reply.get("content") is None:
                reply["content"] = ""
            self.history[-1] = reply
        return own


def salted(messages: list[dict[str, Any]], salt: str) -> list[dict[str, Any]]:
    """`messages` with `salt` at the start of the first one that is not a system prompt."""
    out = [dict(m) for m in messages]
    for message in out:
        if message.get("role") in ("system", "developer"):
            continue
        content = message.get("content")
        if isinstance(content, str):
            message["content"] = f"{salt} {content}" if content else salt
        elif isinstance(content, list):
            message["content"] = [{"type": "text", "text": salt}, *content]
        else:
            continue
        break
    return out


def dialogue(conversation: Conversation, *, allow_cache: bool, header: bool) -> Dialogue:
    """A conversation about to be played: its salt (fresh unless the cache is allowed) and,
    when the header is asked for, a session id of its own (the conversation's id and a
    random part, so replays of one file never share a server-side session)."""
    salt = "" if allow_cache else f"s{secrets.token_hex(8)}"
    session = f"{conversation.id}-{secrets.token_hex(6)}" if header else None
    return Dialogue(conversation, salt, session)


# --- loading ----------------------------------------------------------------------------------


def _number(value: Any, where: str, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not low <= value <= high:
        raise DatasetError(f"{where}: {name!r} must be a number from {low:g} to {high:g}")
    return float(value)


def _messages(value: Any, where: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(value, list) or len(value) > MAX_TURN_MESSAGES:
        raise DatasetError(f"{where}: 'messages' must be a list of at most "
                           f"{MAX_TURN_MESSAGES} messages")
    for message in value:
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise DatasetError(f"{where}: each message needs a 'role' of "
                               f"{', '.join(sorted(ROLES))}")
        content = message.get("content")
        if not (content is None or isinstance(content, str | list)):
            raise DatasetError(f"{where}: a message's 'content' must be text or a list of parts")
        if message["role"] == "tool" and not isinstance(message.get("tool_call_id"), str):
            raise DatasetError(f"{where}: a tool message needs its 'tool_call_id'")
    return tuple(value)


def _objects(value: Any, where: str, name: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(value, list) or len(value) > MAX_TOOLS or \
            not all(isinstance(item, dict) for item in value):
        raise DatasetError(f"{where}: {name!r} must be a list of at most {MAX_TOOLS} objects")
    return tuple(value)


def parse_turn(record: Any, where: str) -> tuple[str, int, SessionTurn]:
    """One line: (conversation id, turn number, the turn). DatasetError names the line."""
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: expected a JSON object")
    conversation = record.get("conversation_id")
    if isinstance(conversation, bool) or not isinstance(conversation, str | int) or \
            not str(conversation) or len(str(conversation)) > 256:
        raise DatasetError(f"{where}: 'conversation_id' must be a string or integer "
                           "(at most 256 characters)")
    number = record.get("turn")
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < 1_000_000:
        raise DatasetError(f"{where}: 'turn' must be a non-negative integer")
    tools = record.get("tools")
    max_tokens = record.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(
            max_tokens, int) or not 1 <= max_tokens <= 1_000_000):
        raise DatasetError(f"{where}: 'max_tokens' must be an integer from 1 to 1000000")
    delay, delay_key = _delay(record, where)
    return str(conversation), number, SessionTurn(
        messages=_messages(record.get("messages"), where),
        tools=None if tools is None else _objects(tools, where, "tools"),
        recorded_calls=() if record.get("tool_calls") is None
        else _objects(record["tool_calls"], where, "tool_calls"),
        delay_s=0.0 if delay is None else _number(delay, where, delay_key, 0, MAX_DELAY_S),
        max_tokens=max_tokens)


def _delay(record: dict[str, Any], where: str) -> tuple[object, str]:
    """A turn's delay and the key it came by: `delay_s`, the name that says its unit, or
    `delay_seconds`, MLPerf Endpoints' (both: the same value, or a DatasetError)."""
    if "delay_s" in record:
        if "delay_seconds" in record and record["delay_seconds"] != record["delay_s"]:
            raise DatasetError(f"{where}: give 'delay_s' or 'delay_seconds', not both")
        return record["delay_s"], "delay_s"
    return record.get("delay_seconds", 0.0), "delay_seconds"


def parse_sessions(lines: list[str], file: str) -> tuple[Conversation, ...]:
    """The conversations of a sessions file, in order of their first line, each turn in
    `turn` order; DatasetError for a bad line, a repeated turn, or too many of anything."""
    turns: dict[str, dict[int, SessionTurn]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise DatasetError(f"{where}: invalid JSON ({exc.args[0]})") from None
        conversation, index, turn = parse_turn(record, where)
        by_index = turns.setdefault(conversation, {})
        if len(turns) > MAX_CONVERSATIONS:
            raise DatasetError(f"{file}: more than {MAX_CONVERSATIONS} conversations")
        if index in by_index:
            raise DatasetError(f"{where}: conversation {conversation!r} has turn {index} twice")
        if len(by_index) >= MAX_TURNS:
            raise DatasetError(f"{where}: conversation {conversation!r} has more than "
                               f"{MAX_TURNS} turns")
        by_index[index] = turn
    if not turns:
        raise DatasetError(f"{file}: no turns")
    return tuple(Conversation(key, tuple(by_index[i] for i in sorted(by_index)))
                 for key, by_index in turns.items())


def load_sessions(path: str, datasets: DatasetPolicy) -> tuple[Conversation, ...]:
    """The sessions file at `path`, where `datasets` allows; DatasetError otherwise."""
    return parse_sessions(datasets.lines(path), path)


def sessions_of(workload: Workload, datasets: DatasetPolicy) -> Sessions | None:
    """A sessions workload's conversations (its file read where `datasets` allows:
    DatasetError otherwise), or None for single-turn workloads."""
    if not workload.in_sessions:
        return None
    conversations = () if workload.sessions is None else \
        load_sessions(workload.sessions, datasets)
    return Sessions(conversations=conversations, synthetic_turns=workload.turns,
                    synthetic_delay_s=workload.turn_delay_s, header=workload.session_header,
                    allow_cache=workload.cache == "allow")
