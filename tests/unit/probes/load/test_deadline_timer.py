"""The deadline timer: sends never before their time, one descriptor per timer for its life,
and a cancelled wait that leaves the next one on time."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
import uvloop

from sustain.probes.load.deadline_timer import DeadlineTimer, spin_until_ns, timerfd_calls

T = TypeVar("T")
linux_only = pytest.mark.skipif(timerfd_calls() is None, reason="timerfd is Linux's")


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def run(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return uvloop.run(coro_fn())


@linux_only
def test_waits_on_a_timerfd_end_at_or_after_their_deadline() -> None:
    async def waits() -> list[int]:
        early: list[int] = []
        with DeadlineTimer() as timer:
            assert timer.precise
            for gap_ns in (0, 1, 50_000, 333_333, 1_000_000, 2_500_000) * 5:
                deadline = time.perf_counter_ns() + gap_ns
                await timer.sleep_until(deadline)
                early.append(deadline - time.perf_counter_ns())
        return early

    assert all(e <= 0 for e in run(waits))


@linux_only
def test_a_deadline_already_passed_returns_without_arming() -> None:
    async def passed() -> None:
        with DeadlineTimer() as timer:
            await timer.sleep_until(time.perf_counter_ns() - 1_000_000)

    run(passed)


@linux_only
def test_a_cancelled_wait_leaves_the_next_one_on_time() -> None:
    """The cancelled wait's timer still fires (at its deadline, 5 ms on); the next wait, for
    50 ms on, must not end then. The first wait is cancelled in the loop turn that armed it, so
    a busy machine cannot let it end before it is cancelled."""

    async def cancelled_then_next() -> int:
        with DeadlineTimer() as timer:
            first = asyncio.ensure_future(timer.sleep_until(time.perf_counter_ns() + 5_000_000))
            await asyncio.sleep(0)  # the first wait's step runs (arms the timer) before this one
            assert not first.done()
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            deadline = time.perf_counter_ns() + 50_000_000
            await timer.sleep_until(deadline)
            return time.perf_counter_ns() - deadline

    assert run(cancelled_then_next) >= 0


@linux_only
def test_one_wait_at_a_time() -> None:
    async def two() -> None:
        with DeadlineTimer() as timer:
            first = asyncio.ensure_future(timer.sleep_until(time.perf_counter_ns() + 10**7))
            await asyncio.sleep(0)
            with pytest.raises(RuntimeError, match="one wait at a time"):
                await timer.sleep_until(time.perf_counter_ns() + 10**7)
            await first

    run(two)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_a_timer_holds_one_descriptor_and_gives_it_back_even_when_cancelled() -> None:
    async def many() -> tuple[int, int]:
        before = open_descriptors()
        timer = DeadlineTimer()
        held = open_descriptors()
        for _ in range(200):
            wait = asyncio.ensure_future(timer.sleep_until(time.perf_counter_ns() + 10**9))
            await asyncio.sleep(0)
            wait.cancel()
            with pytest.raises(asyncio.CancelledError):
                await wait
            await timer.sleep_until(time.perf_counter_ns() + 10_000)
        during = open_descriptors()
        timer.close()
        timer.close()  # closing twice is harmless
        return held - before, during - held + (open_descriptors() - before)

    held, leaked = run(many)
    assert held == (1 if timerfd_calls() is not None else 0)
    assert leaked == 0


def test_without_a_timerfd_the_loop_timers_and_the_spin_keep_the_deadline() -> None:
    async def spun() -> int:
        deadline = time.perf_counter_ns() + 2_000_000
        await spin_until_ns(deadline)
        return time.perf_counter_ns() - deadline

    assert run(spun) >= 0
