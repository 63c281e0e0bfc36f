"""The sessions driver: a closed loop whose users are conversations in flight. Each user
takes the next conversation and plays its turns in order, one in flight: it waits the turn's
think or tool time, sends the history and the turn's messages, and adds the actual reply to
the history. A failed turn ends its conversation, and so does a history grown past
MAX_HISTORY_CHARS (it is not sent; the conversation counts as not completed). The stage ends
when every conversation has finished, or at its duration or request cap (which count
turns), like any closed loop; users in their think or tool time then stop at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Iterator

from sustain.probes.load.drivers import Prepare, StageContext, measured_seconds
from sustain.probes.measure.sample import Outcome, Sample
from sustain.probes.workload.sessions import Conversation, dialogue


async def run_sessions(
    users: int, conversations: Iterator[Conversation], prepare: Prepare, ctx: StageContext,
    *, duration_s: float | None, max_requests: int | None, warmup_s: float = 0.0,
    allow_cache: bool = False, header: bool = False,
) -> tuple[list[Sample], float]:
    """`users` conversations in flight at a time, taken in order from `conversations`
    (shared by the users), until none is left, `duration_s` after the warmup, or
    `max_requests` measured turns. Turns sent during the warmup are not counted."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    warmup_end = start + warmup_s
    stop_at = None if duration_s is None else warmup_end + duration_s
    samples: list[Sample] = []
    started = 0
    capped = asyncio.Event()
    """Set once the turn cap is reached: users in their think or tool time stop at once."""
    pacer = ctx.pacer()
    """With ctx.max_rate, turns wait for a send slot: at most that many turns/s in all."""

    def full() -> bool:
        return max_requests is not None and started >= max_requests

    def going() -> bool:
        return not full() and (stop_at is None or loop.time() < stop_at)

    async def pause(delay: float) -> None:
        """The think or tool time before a turn, cut short by the end of the stage."""
        left = None if stop_at is None else stop_at - loop.time()
        wait = delay if left is None else max(0.0, min(delay, left))
        if wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(capped.wait(), wait)

    async def user() -> None:
        nonlocal started
        for conversation in conversations:
            talk = dialogue(conversation, allow_cache=allow_cache, header=header)
            while not talk.done:
                if full() or talk.too_long:
                    break
                await pause(talk.delay_s)
                if pacer is not None and not await pacer.turn(going):
                    return
                now = loop.time()
                if stop_at is not None and now >= stop_at:
                    return
                counted = now >= warmup_end
                if counted:
                    if full():
                        return
                    started += 1
                    if full():
                        capped.set()
                sample = await ctx.send(prepare, None, talk)
                reply = sample.measurement.reply
                ok = sample.outcome is Outcome.SUCCESS and reply is not None
                if ok:
                    assert reply is not None
                    talk.answered(reply)
                # The reply now lives in the history only; the sample keeps no text.
                sample = dataclasses.replace(
                    sample, measurement=dataclasses.replace(sample.measurement, reply=None),
                    session_end=talk.done or not ok)
                if counted:
                    samples.append(ctx.measured(sample))
                if not ok:
                    break
            if full():
                return

    async with asyncio.TaskGroup() as group:
        for _ in range(users):
            group.create_task(user())
    samples.sort(key=lambda s: s.seq)
    first = min((s.t_send_ms for s in samples), default=ctx.clock.ms(time.perf_counter_ns()))
    return samples, measured_seconds(samples, first)
