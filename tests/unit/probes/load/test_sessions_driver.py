"""The sessions driver (probes/load/sessions.py) over a fake endpoint: one turn in flight per
conversation, a failed turn ends its conversation, the turn cap counts turns."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from datetime import UTC, datetime

from sustain.probes.load.clock import RunClock
from sustain.probes.load.drivers import Request, StageContext
from sustain.probes.load.sessions import run_sessions
from sustain.probes.measure.reply import Reply
from sustain.probes.measure.sample import ErrorClass, Measurement, Sample
from sustain.probes.measure.sessions import session_counts
from sustain.probes.workload.sessions import Conversation, Dialogue, SessionTurn

THREE = tuple(SessionTurn(({"role": "user", "content": f"t{i}"},)) for i in range(3))


class Endpoint:
    """Answers every turn at once, failing the turns named in `fail` (conversation, turn);
    records the history length each turn was sent with."""

    def __init__(self, fail: set[tuple[str, int]] | None = None) -> None:
        self.fail = fail or set()
        self.sent: list[tuple[str, int, int]] = []

    def prepare(self, _seq: int, talk: Dialogue | None = None) -> Request:
        assert talk is not None
        key = (talk.conversation.id, talk.next_turn)
        request = talk.request(lambda: "")
        self.sent.append((key[0], key[1], len(request.messages)))
        failed = key in self.fail

        async def send(_t_send_ns: int) -> Measurement:
            return Measurement(
                ttft_ms=1.0, itl_ms=(), e2e_ms=2.0, output_tokens=0 if failed else 3,
                tokens_server_counted=True, input_tokens=len(request.messages),
                http_status=500 if failed else 200,
                error_class=ErrorClass.HTTP_5XX if failed else None,
                reply=None if failed else Reply("answer"))
        return send


def context() -> StageContext:
    return StageContext(clock=RunClock.start(), seqs=itertools.count())


async def test_a_failed_turn_ends_its_conversation_and_others_complete() -> None:
    endpoint = Endpoint(fail={("b", 1)})
    conversations = iter([Conversation(name, THREE) for name in "abc"])
    samples, _ = await run_sessions(2, conversations, endpoint.prepare, context(),
                                    duration_s=None, max_requests=None)
    assert Counter(name for name, _, _ in endpoint.sent) == {"a": 3, "b": 2, "c": 3}
    assert [length for name, _, length in endpoint.sent if name == "a"] == [1, 3, 5]
    counts = session_counts(samples)
    assert counts is not None
    assert counts.model_dump() == {"conversations": 3, "completed": 2, "turns": 8,
                                   "failed_turns": 1}
    failed = next(s for s in samples if s.conversation == "b" and s.turn == 1)
    assert failed.session_end
    assert failed.measurement.reply is None


async def test_the_turn_cap_counts_turns_across_conversations() -> None:
    endpoint = Endpoint()
    conversations = iter([Conversation(str(i), THREE) for i in range(10)])
    samples, _ = await run_sessions(3, conversations, endpoint.prepare, context(),
                                    duration_s=None, max_requests=7)
    assert len(samples) == len(endpoint.sent) == 7


async def test_reaching_the_turn_cap_stops_users_in_their_think_time_at_once() -> None:
    slow = tuple(SessionTurn(({"role": "user", "content": f"t{i}"},), delay_s=30.0 * i)
                 for i in range(3))
    conversations = iter([Conversation(str(i), slow) for i in range(3)])
    loop = asyncio.get_running_loop()
    began = loop.time()
    samples, _ = await run_sessions(3, conversations, Endpoint().prepare, context(),
                                    duration_s=None, max_requests=3)
    assert len(samples) == 3
    # Only guards against a hang: the cap ends the run at once, not after the 30 s think
    # time of the second turns.
    assert loop.time() - began < 5.0


def test_every_stage_plays_its_conversations_anew_and_counts_them_on_their_own() -> None:
    def turn(stage: int, name: str, index: int, *, last: bool, failed: bool = False) -> Sample:
        return Sample(seq=0, stage=stage, t_sched_ms=None, t_send_ms=0.0,
                      sent_at=datetime(2026, 12, 4, tzinfo=UTC), measurement=Measurement(
                          ttft_ms=1.0, itl_ms=(), e2e_ms=2.0, output_tokens=1,
                          tokens_server_counted=True, input_tokens=1,
                          http_status=500 if failed else 200,
                          error_class=ErrorClass.HTTP_5XX if failed else None),
                      conversation=name, turn=index, session_end=last)
    samples = [turn(0, "a", 0, last=True), turn(0, "b", 0, last=True),
               turn(1, "a", 0, last=True), turn(1, "b", 0, last=True, failed=True)]
    counts = session_counts(samples)
    assert counts is not None
    assert (counts.conversations, counts.completed, counts.failed_turns) == (4, 3, 1)
