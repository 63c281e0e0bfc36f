"""Open-loop driver: sends at absolute intended times and never waits for responses."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta

from probes.measure.sample import Measurement, Sample

Request = Callable[[int], Awaitable[Measurement]]
"""request(t_send_ns) -> Measurement. Must not raise for endpoint misbehaviour."""
Prepare = Callable[[int], Request]
"""prepare(seq) builds request `seq` (body, headers) before its send time is taken."""


async def run_open_loop(
    offsets_s: Iterable[float], prepare: Prepare, *, max_in_flight: int, stage: int = 0
) -> tuple[list[Sample], float]:
    """Issue one request per offset and return (samples in send order, measured seconds).

    Each request is scheduled against origin + offset, so sleep error never accumulates. A
    request that finds `max_in_flight` requests outstanding waits for a slot, and that wait is
    recorded as lag (t_send - t_sched), never hidden.
    """
    loop = asyncio.get_running_loop()
    origin_ns = time.perf_counter_ns()
    origin_loop = loop.time()
    origin_wall = datetime.now(UTC)
    slots = asyncio.Semaphore(max_in_flight)
    tasks: list[asyncio.Task[Sample]] = []

    async def one(seq: int, offset_s: float) -> Sample:
        try:
            request = prepare(seq)
            t_send_ns = time.perf_counter_ns()
            measurement = await request(t_send_ns)
        finally:
            slots.release()
        t_send_ms = (t_send_ns - origin_ns) / 1e6
        return Sample(
            seq=seq,
            stage=stage,
            t_sched_ms=offset_s * 1000.0,
            t_send_ms=t_send_ms,
            sent_at=origin_wall + timedelta(milliseconds=t_send_ms),
            measurement=measurement,
        )

    async with asyncio.TaskGroup() as group:  # cancelling the run cancels its requests too
        for seq, offset_s in enumerate(offsets_s):
            delay = origin_loop + offset_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await slots.acquire()
            tasks.append(group.create_task(one(seq, offset_s)))
    return [task.result() for task in tasks], (time.perf_counter_ns() - origin_ns) / 1e9
