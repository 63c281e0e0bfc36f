"""The drivers: open loop keeps intended times whatever the endpoint does; closed loop keeps N
requests in flight; warmup requests are sent but not counted."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from sustain.probes.load.clock import RunClock
from sustain.probes.load.drivers import (
    Prepare,
    Request,
    StageContext,
    run_closed_loop,
    run_open_loop,
)
from sustain.probes.load.live import LiveStats
from sustain.probes.measure.sample import Measurement
from sustain.probes.workload.sessions import Dialogue


def ctx(live: LiveStats | None = None) -> StageContext:
    return StageContext(clock=RunClock.start(), seqs=itertools.count(), live=live)


def fixed_latency(seconds: float) -> Request:
    async def request(_t_send_ns: int) -> Measurement:
        await asyncio.sleep(seconds)
        return Measurement(ttft_ms=1.0, itl_ms=(), e2e_ms=seconds * 1000, output_tokens=1,
                           tokens_server_counted=True, input_tokens=1, http_status=200,
                           error_class=None)
    return request


def latency(seconds: float) -> Prepare:
    def prepare(_seq: int, _dialogue: Dialogue | None = None) -> Request:
        return fixed_latency(seconds)
    return prepare


class InFlight:
    """A fake endpoint that records how many requests it holds at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.now = 0
        self.peak = 0

    def prepare(self, _seq: int, _dialogue: Dialogue | None = None) -> Request:
        async def request(t_send_ns: int) -> Measurement:
            self.now += 1
            self.peak = max(self.peak, self.now)
            try:
                return await fixed_latency(self.seconds)(t_send_ns)
            finally:
                self.now -= 1
        return request


async def test_open_loop_sends_at_intended_times_without_waiting_for_responses() -> None:
    """How late the sends leave (lag) depends on the machine: benchmarks/capacity.py reports
    it; here what holds on any machine."""
    context = ctx()
    endpoint = InFlight(0.2)
    offsets = [k * 0.02 for k in range(25)]
    samples, measured_s = await run_open_loop(offsets, endpoint.prepare, context,
                                              max_in_flight=100,
                                              origin_ns=context.clock.origin_ns)
    assert [s.seq for s in samples] == list(range(25))
    assert [s.t_sched_ms for s in samples] == pytest.approx([k * 20.0 for k in range(25)])
    assert all((s.lag_ms or 0.0) >= 0.0 for s in samples), "never before its intended time"
    # Each request takes 0.2 s, ten times the gap between intended sends: requests overlap
    # unless the loop waits for responses.
    assert endpoint.peak > 1
    # From the stage's origin to the end of the last response (the origin is the clock's).
    assert measured_s == pytest.approx(max(s.t_send_ms + s.e2e_ms for s in samples) / 1000)
    assert measured_s >= 0.48 + 0.2  # the last is intended at 0.48 s and takes 0.2 s
    # Only guards against a hang: waiting for each response would take 25 x 0.2 s.
    assert measured_s < 3.5


async def test_in_flight_cap_shows_up_as_lag_and_corrected_latency() -> None:
    offsets = [k * 0.01 for k in range(10)]
    samples, _ = await run_open_loop(offsets, latency(0.1), ctx(), max_in_flight=1)
    last = samples[-1]
    assert last.lag_ms is not None
    assert last.lag_ms > 500.0
    assert last.corrected_e2e_ms is not None
    assert last.corrected_e2e_ms > last.e2e_ms + 500.0


async def test_open_loop_warmup_requests_are_sent_but_not_counted() -> None:
    live = LiveStats()
    context = ctx(live)
    offsets = [k * 0.05 for k in range(10)]
    samples, measured_s = await run_open_loop(offsets, latency(0.01), context,
                                              max_in_flight=10, warmup_s=0.2,
                                              origin_ns=context.clock.origin_ns)
    assert live.sent == 10
    assert [s.seq for s in samples] == [4, 5, 6, 7, 8, 9]
    # The measured time starts at the end of the warmup (0.2 s from the origin), not at 0.
    end_ms = max(s.t_send_ms + s.e2e_ms for s in samples)
    assert measured_s == pytest.approx((end_ms - 200.0) / 1000)
    assert measured_s >= 0.45 + 0.01 - 0.2  # the last is intended at 0.45 s


async def test_closed_loop_keeps_n_requests_in_flight() -> None:
    endpoint = InFlight(0.05)
    samples, measured_s = await run_closed_loop(4, endpoint.prepare, ctx(), duration_s=0.5,
                                                max_requests=None)
    assert endpoint.peak == 4
    # Each user starts one at once and then one per response (>= 50 ms, a timer waking up
    # to a millisecond early) until 0.5 s: at most 11 each, however slow the machine.
    assert 4 <= len(samples) <= 44
    assert all(s.t_sched_ms is None and s.lag_ms is None for s in samples)
    start_ms = min(s.t_send_ms for s in samples)
    end_ms = max(s.t_send_ms + s.e2e_ms for s in samples)
    assert measured_s == pytest.approx((end_ms - start_ms) / 1000)


async def test_closed_loop_stops_at_max_requests_with_think_time() -> None:
    endpoint = InFlight(0.01)
    samples, _ = await run_closed_loop(2, endpoint.prepare, ctx(), duration_s=None,
                                       max_requests=6, think_time_s=0.02)
    assert len(samples) == 6
    assert endpoint.peak <= 2


async def test_cancelling_a_run_cancels_its_requests_in_flight() -> None:
    started: list[int] = []
    three = asyncio.Event()
    finished: list[int] = []

    def prepare(seq: int, _dialogue: Dialogue | None = None) -> Request:
        async def request(t_send_ns: int) -> Measurement:
            started.append(seq)
            if len(started) == 3:
                three.set()
            await asyncio.sleep(0.2)
            finished.append(seq)
            return await fixed_latency(0)(t_send_ns)
        return request

    run = asyncio.create_task(run_open_loop([0.0, 0.01, 0.02, 5.0], prepare, ctx(),
                                            max_in_flight=10))
    await asyncio.wait_for(three.wait(), 30)  # three requests in flight, the fourth not due
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    # The behaviour is that nothing happens: give the requests five times their 0.2 s to
    # finish, had they not been cancelled.
    await asyncio.sleep(1.0)
    assert finished == []


async def test_closed_loop_throughput_window_starts_at_the_first_counted_send() -> None:
    endpoint = InFlight(0.2)
    samples, measured_s = await run_closed_loop(4, endpoint.prepare, ctx(), duration_s=0.6,
                                                max_requests=None, warmup_s=0.1)
    start_ms = min(s.t_send_ms for s in samples)
    end_ms = max(s.t_send_ms + s.e2e_ms for s in samples)
    assert measured_s == pytest.approx((end_ms - start_ms) / 1000)
    # 4 users, 0.2 s a request, from the first counted send: never more than 4 / 0.2 s.
    assert len(samples) / measured_s <= 4 / 0.2 * 1.01
