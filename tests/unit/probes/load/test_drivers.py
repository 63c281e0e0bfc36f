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
    offsets = [k * 0.02 for k in range(25)]
    samples, measured_s = await run_open_loop(offsets, latency(0.2), ctx(), max_in_flight=100)
    assert [s.seq for s in samples] == list(range(25))
    lags = sorted(s.lag_ms for s in samples if s.lag_ms is not None)
    assert lags[len(lags) // 2] < 5.0
    assert samples[-1].t_send_ms - samples[0].t_send_ms == pytest.approx(480.0, abs=15.0)
    assert measured_s == pytest.approx(0.48 + 0.2, abs=0.1)


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
    offsets = [k * 0.05 for k in range(10)]
    samples, measured_s = await run_open_loop(offsets, latency(0.01), ctx(live),
                                              max_in_flight=10, warmup_s=0.2)
    assert live.sent == 10
    assert [s.seq for s in samples] == [4, 5, 6, 7, 8, 9]
    assert measured_s == pytest.approx(0.25 + 0.01, abs=0.05)


async def test_closed_loop_keeps_n_requests_in_flight() -> None:
    endpoint = InFlight(0.05)
    samples, measured_s = await run_closed_loop(4, endpoint.prepare, ctx(), duration_s=0.5,
                                                max_requests=None)
    assert endpoint.peak == 4
    assert 30 <= len(samples) <= 44
    assert all(s.t_sched_ms is None and s.lag_ms is None for s in samples)
    assert measured_s == pytest.approx(0.55, abs=0.1)


async def test_closed_loop_stops_at_max_requests_with_think_time() -> None:
    endpoint = InFlight(0.01)
    samples, _ = await run_closed_loop(2, endpoint.prepare, ctx(), duration_s=None,
                                       max_requests=6, think_time_s=0.02)
    assert len(samples) == 6
    assert endpoint.peak <= 2


async def test_cancelling_a_run_cancels_its_requests_in_flight() -> None:
    finished: list[int] = []

    def prepare(seq: int, _dialogue: Dialogue | None = None) -> Request:
        async def request(t_send_ns: int) -> Measurement:
            await asyncio.sleep(0.5)
            finished.append(seq)
            return await fixed_latency(0)(t_send_ns)
        return request

    run = asyncio.create_task(run_open_loop([0.0, 0.01, 0.02, 5.0], prepare, ctx(),
                                            max_in_flight=10))
    await asyncio.sleep(0.1)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await asyncio.sleep(0.6)
    assert finished == []


async def test_closed_loop_throughput_window_starts_at_the_first_counted_send() -> None:
    endpoint = InFlight(0.2)
    samples, measured_s = await run_closed_loop(4, endpoint.prepare, ctx(), duration_s=0.6,
                                                max_requests=None, warmup_s=0.1)
    assert len(samples) / measured_s == pytest.approx(4 / 0.2, rel=0.15)
