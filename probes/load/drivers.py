"""The drivers that execute a stage: open loop (intended times) and closed loop (N users).

Both take `prepare(seq)`, which builds request `seq` before its send time is read, and return
the stage's measured samples (warmup left out) with the measured time in seconds: from the end
of the warmup to the end of the last measured response.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from sustain.probes.load.clock import RunClock
from sustain.probes.load.deadline_timer import DeadlineTimer, spin_until_ns
from sustain.probes.load.live import LiveStats
from sustain.probes.measure.sample import Measurement, Sample
from sustain.probes.workload.sessions import Dialogue

Request = Callable[[int], Awaitable[Measurement]]
"""request(t_send_ns) -> Measurement. Must not raise for endpoint misbehaviour."""


class Prepare(Protocol):
    """prepare(seq, dialogue) builds request `seq` (body, headers) before its send time is
    taken: the next turn of `dialogue` (whose history it extends) when one is given."""

    def __call__(self, seq: int, dialogue: Dialogue | None = None, /) -> Request: ...


@dataclass(slots=True)
class StageContext:
    """What every driver needs: the run's clock and sequence numbers, the stage index, the
    live counters."""

    clock: RunClock
    seqs: Iterator[int]
    stage: int = 0
    live: LiveStats | None = None
    on_sample: Callable[[Sample], None] | None = None
    """Called with each measured sample (warmup left out) as soon as it completes."""
    max_rate: float | None = None
    """Requests/s a closed-loop stage may send in all (this process's share of it when the
    stage is sharded over workers); None: as fast as the endpoint answers. Open-loop stages
    keep their planned times, which the limits already hold to the same rate."""

    def pacer(self) -> Pacer | None:
        """A fresh pacer for a closed-loop stage, or None when it is not paced."""
        return None if self.max_rate is None else Pacer(self.max_rate)

    def measured(self, sample: Sample) -> Sample:
        if self.on_sample is not None:
            self.on_sample(sample)
        return sample

    async def send(self, prepare: Prepare, t_sched_ms: float | None,
                   dialogue: Dialogue | None = None) -> Sample:
        seq = next(self.seqs)
        turn = None if dialogue is None else dialogue.next_turn
        request = prepare(seq, dialogue)
        t_send_ns = time.perf_counter_ns()
        if self.live is not None:
            self.live.on_send()
        measurement = await request(t_send_ns)
        if self.live is not None:
            self.live.on_done(measurement)
        t_send_ms = self.clock.ms(t_send_ns)
        return Sample(seq=seq, stage=self.stage, t_sched_ms=t_sched_ms, t_send_ms=t_send_ms,
                      sent_at=self.clock.wall(t_send_ms), measurement=measurement,
                      conversation=None if dialogue is None else dialogue.conversation.id,
                      turn=turn)


class Pacer:
    """Holds a closed loop to at most `rate` sends per second, however many users it has:
    users take turns (first come, first served), and each turn starts at least 1/rate
    seconds after the previous one, so a stage that lasts T seconds sends at most
    1 + rate x T requests. Only the user whose turn is next sleeps (at most 1/rate), so a
    stage that ends releases every waiting user at once."""

    def __init__(self, rate: float) -> None:
        if not rate > 0:
            raise ValueError("a pace needs a positive rate")
        self._interval_ns = max(1, round(1e9 / rate))
        self._next_ns = 0
        self._turns = asyncio.Lock()

    async def turn(self, wanted: Callable[[], bool]) -> bool:
        """Wait for the next send slot; False (at once, or after the wait) when `wanted()`
        no longer holds: the stage ended meanwhile, and the caller must not send."""
        async with self._turns:
            if not wanted():
                return False
            slot = max(self._next_ns, time.perf_counter_ns())
            await spin_until_ns(slot)  # a cap, not a schedule: no descriptor held for it
            self._next_ns = slot + self._interval_ns
            return wanted()


def measured_seconds(samples: list[Sample], start_ms: float) -> float:
    """From `start_ms` (end of warmup) to the end of the last response."""
    if not samples:
        return 0.0
    end_ms = max(s.t_send_ms + s.e2e_ms for s in samples)
    return max(0.0, end_ms - start_ms) / 1000.0


async def run_open_loop(
    offsets_s: Iterable[float], prepare: Prepare, ctx: StageContext, *,
    max_in_flight: int, warmup_s: float = 0.0, origin_ns: int | None = None,
) -> tuple[list[Sample], float]:
    """Issue one request per offset (seconds from `origin_ns`, a perf_counter_ns() time;
    default now) and never wait for responses. Processes that share one stage share its
    origin: perf_counter_ns() is the system-wide monotonic clock.

    Each request is scheduled against origin + offset, so sleep error never accumulates; the
    wait for it ends on a timerfd (deadline_timer.py), not a spin of the loop. A
    request that finds `max_in_flight` requests outstanding waits for a slot, and that wait is
    recorded as lag (t_send - t_sched), never hidden. Cancelling the driver cancels its
    requests in flight.
    """
    if origin_ns is None:
        origin_ns = time.perf_counter_ns()
    stage_origin_ms = ctx.clock.ms(origin_ns)
    slots = asyncio.Semaphore(max_in_flight)
    measured: list[asyncio.Task[Sample]] = []

    async def one(offset_s: float) -> Sample:
        try:
            sample = await ctx.send(prepare, stage_origin_ms + offset_s * 1000.0)
        finally:
            slots.release()
        return ctx.measured(sample) if offset_s >= warmup_s else sample

    with DeadlineTimer() as timer:
        async with asyncio.TaskGroup() as group:
            for offset_s in offsets_s:
                await timer.sleep_until(origin_ns + int(offset_s * 1e9))
                await slots.acquire()
                task = group.create_task(one(offset_s))
                if offset_s >= warmup_s:
                    measured.append(task)
    samples = [task.result() for task in measured]
    return samples, measured_seconds(samples, stage_origin_ms + warmup_s * 1000.0)


async def run_closed_loop(
    users: int, prepare: Prepare, ctx: StageContext, *, duration_s: float | None,
    max_requests: int | None, think_time_s: float = 0.0, warmup_s: float = 0.0,
    min_requests: int | None = None,
) -> tuple[list[Sample], float]:
    """`users` users, each sending its next request when its previous one ended (plus think
    time), until `duration_s` after the warmup (and, with `min_requests`, at least that
    many measured requests) or `max_requests` measured requests. With `ctx.max_rate`, the
    users together send at most that many requests/s (see Pacer): a user whose response
    came back waits its turn, and that wait is not part of any request's latency."""
    if duration_s is None and max_requests is None:
        raise ValueError("a closed loop needs duration_s or max_requests")
    loop = asyncio.get_running_loop()
    start_loop = loop.time()
    warmup_end = start_loop + warmup_s
    stop_at = None if duration_s is None else warmup_end + duration_s
    stage_origin_ms = ctx.clock.ms(time.perf_counter_ns())
    samples: list[Sample] = []
    started = 0
    pacer = ctx.pacer()

    def going() -> bool:
        """Whether the stage still wants another request."""
        now = loop.time()
        if stop_at is not None and now >= stop_at and \
                (min_requests is None or started >= min_requests):
            return False
        return not (now >= warmup_end and max_requests is not None
                    and started >= max_requests)

    async def user() -> None:
        nonlocal started
        while True:
            if not going() or (pacer is not None and not await pacer.turn(going)):
                return
            counted = loop.time() >= warmup_end
            if counted:
                started += 1
            sample = await ctx.send(prepare, None)
            if counted:
                samples.append(ctx.measured(sample))
            if think_time_s:
                await asyncio.sleep(think_time_s)

    async with asyncio.TaskGroup() as group:
        for _ in range(users):
            group.create_task(user())
    samples.sort(key=lambda s: s.seq)
    # Users are still busy with warmup requests after the warmup ends: the window starts at
    # the first counted send.
    start_ms = min((s.t_send_ms for s in samples), default=stage_origin_ms)
    return samples, measured_seconds(samples, start_ms)
