from __future__ import annotations

import asyncio

import pytest

from probes.load.open_loop import Request, run_open_loop
from probes.measure.sample import Measurement


def fixed_latency(seconds: float) -> Request:
    async def request(t_send_ns: int) -> Measurement:
        await asyncio.sleep(seconds)
        return Measurement(ttft_ms=1.0, itl_ms=(), e2e_ms=seconds * 1000, output_tokens=1,
                           tokens_server_counted=True, input_tokens=1, http_status=200,
                           error_class=None)
    return request


async def test_open_loop_sends_at_intended_times_without_waiting_for_responses() -> None:
    offsets = [k * 0.02 for k in range(25)]
    samples, measured_s = await run_open_loop(
        offsets, lambda seq: fixed_latency(0.2), max_in_flight=100)
    assert [s.seq for s in samples] == list(range(25))
    lags = sorted(s.lag_ms for s in samples if s.lag_ms is not None)
    assert lags[len(lags) // 2] < 5.0
    assert samples[-1].t_send_ms == pytest.approx(480.0, abs=15.0)
    assert measured_s < 0.48 + 0.2 + 0.15


async def test_in_flight_cap_shows_up_as_lag_and_corrected_latency() -> None:
    offsets = [k * 0.01 for k in range(10)]
    samples, _ = await run_open_loop(offsets, lambda seq: fixed_latency(0.1), max_in_flight=1)
    last = samples[-1]
    assert last.lag_ms is not None
    assert last.lag_ms > 500.0
    assert last.corrected_e2e_ms is not None
    assert last.corrected_e2e_ms > last.e2e_ms + 500.0


async def test_cancelling_a_run_cancels_its_requests_in_flight() -> None:
    finished: list[int] = []

    def prepare(seq: int) -> Request:
        async def request(t_send_ns: int) -> Measurement:
            await asyncio.sleep(0.5)
            finished.append(seq)
            return await fixed_latency(0)(t_send_ns)
        return request

    run = asyncio.create_task(run_open_loop([0.0, 0.01, 0.02, 5.0], prepare, max_in_flight=10))
    await asyncio.sleep(0.1)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await asyncio.sleep(0.6)
    assert finished == []
