"""A closed loop is held to its max_rate however many users it has and however fast the
endpoint answers: the requests it sends never outnumber 1 + max_rate x the seconds it ran.

The bounds here are upper bounds on a count against the configured rate; a slow machine only
sends fewer, so they hold anywhere."""

from __future__ import annotations

import asyncio
import itertools
import time

from sustain.probes.load.clock import RunClock
from sustain.probes.load.drivers import Pacer, Request, StageContext, run_closed_loop
from sustain.probes.load.sessions import run_sessions
from sustain.probes.measure.reply import Reply
from sustain.probes.measure.sample import Measurement
from sustain.probes.workload.sessions import Conversation, Dialogue, SessionTurn


class Instant:
    """An endpoint that answers at once and counts the requests it is sent."""

    def __init__(self) -> None:
        self.sent = 0
        self.in_flight = 0
        self.peak = 0
        """The most requests in flight at once."""

    def prepare(self, _seq: int, talk: Dialogue | None = None) -> Request:
        self.sent += 1
        if talk is not None:
            talk.request(lambda: "")

        async def send(_t_send_ns: int) -> Measurement:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            await asyncio.sleep(0)
            self.in_flight -= 1
            return Measurement(ttft_ms=0.1, itl_ms=(), e2e_ms=0.1, output_tokens=1,
                               tokens_server_counted=True, input_tokens=1, http_status=200,
                               error_class=None, reply=Reply("ok"))
        return send


def paced(max_rate: float | None) -> StageContext:
    return StageContext(clock=RunClock.start(), seqs=itertools.count(), max_rate=max_rate)


async def test_closed_loop_of_many_users_never_sends_faster_than_max_rate() -> None:
    endpoint = Instant()
    began = time.perf_counter()
    samples, _ = await asyncio.wait_for(  # a hang guard only
        run_closed_loop(500, endpoint.prepare, paced(40.0), duration_s=0.5,
                        max_requests=None, warmup_s=0.1), timeout=30)
    elapsed = time.perf_counter() - began
    assert endpoint.sent <= 1 + 40.0 * elapsed
    assert len(samples) <= endpoint.sent
    assert samples, "the loop still sends, at its pace"


async def test_closed_loop_without_max_rate_is_unpaced() -> None:
    """The other side of the test above: unpaced, the 500 users send their first requests
    together (hundreds in flight at once, whatever the machine's speed), where a pace of 40
    requests/s lets one go every 25 ms; so the pace is what held the loop above. The run is
    bounded by its requests, not by time: a loop stalled past a short duration on a busy
    machine would end before its users started."""
    endpoint = Instant()
    await asyncio.wait_for(  # a hang guard only
        run_closed_loop(500, endpoint.prepare, paced(None), duration_s=None,
                        max_requests=1000), timeout=30)
    assert endpoint.sent == 1000
    assert endpoint.peak >= 100


async def test_paced_closed_loop_ends_at_max_requests_without_waiting_out_the_queue() -> None:
    """Users queued for a turn leave as soon as the request cap is met: 1,000 users at 200
    requests/s would otherwise wait five seconds for turns they no longer need."""
    endpoint = Instant()
    samples, _ = await asyncio.wait_for(  # a hang guard, far above the 0.05 s the cap takes
        run_closed_loop(1000, endpoint.prepare, paced(200.0), duration_s=None,
                        max_requests=10), timeout=4)
    assert len(samples) == 10
    assert endpoint.sent == 10


async def test_sessions_closed_loop_never_sends_turns_faster_than_max_rate() -> None:
    turns = tuple(SessionTurn(({"role": "user", "content": f"t{i}"},)) for i in range(50))
    conversations = iter([Conversation(f"c{i}", turns) for i in range(300)])
    endpoint = Instant()
    began = time.perf_counter()
    await asyncio.wait_for(  # a hang guard only
        run_sessions(300, conversations, endpoint.prepare, paced(40.0), duration_s=0.5,
                     max_requests=None), timeout=30)
    assert endpoint.sent <= 1 + 40.0 * (time.perf_counter() - began)


async def test_pacer_lets_turn_k_go_no_sooner_than_k_intervals_after_the_first() -> None:
    pacer = Pacer(100.0)
    start = time.perf_counter_ns()
    for k in range(5):
        assert await pacer.turn(lambda: True)
        assert time.perf_counter_ns() - start >= k * 10_000_000
    assert not await pacer.turn(lambda: False)
