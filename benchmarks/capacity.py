"""How fast can one client process send? The highest constant rate one core sustains with p99
generator lag <= 5 ms and no client-side errors, against a 1 ms TTFT / 32-token simulator
(itl 0) on the other core. Side by side in the same run:

- sustain: the open-loop driver and the lean HTTP/1.1 transport, with the cyclic garbage
  collector paused during the run (what `sustain probe` and the service use);
- baseline: the naive client (one httpx.AsyncClient, a task per request reading SSE lines).

Each rate runs for --seconds after a one-second warmup; rates climb until a client fails twice
in a row. Target: >= 1,000 streamed requests/s per worker core. `--workers N` runs N client
processes, each at rate/N, and merges their lag and TTFT sketches (only meaningful with more
free cores than this machine's one).

    python benchmarks/capacity.py [--rates 100,200,...] [--seconds 5] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Simulator, pin_to, record
from sustain.probes.client.clients import HttpClients
from sustain.probes.client.http1 import send_over_http1
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.clock import RunClock
from sustain.probes.load.drivers import Request, StageContext, run_open_loop
from sustain.probes.load.profiles import parse_profile
from sustain.probes.load.quiet_gc import quiet_gc
from sustain.probes.load.schedule import constant_offsets
from sustain.probes.measure.percentiles import quantile
from sustain.probes.measure.sketch import MetricSketch
from sustain.probes.protocols.streaming import encode_request
from sustain.probes.workers.pool import WorkerPool
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.sessions import Dialogue
from sustain.probes.workload.spec import Workload

LAG_LIMIT_MS = 5.0
WARMUP_S = 1.0
"""Both clients send for a second before measuring (connections, first-use imports)."""


def workload(tokens: int) -> Workload:
    """Streamed requests of `tokens` output tokens (the simulator sends what it is told)."""
    return Workload(max_tokens=tokens, input_tokens=16)


@dataclass(frozen=True)
class Trial:
    client: str
    rate: float
    sent: int
    errors: int
    lag_p99_ms: float
    ttft_p50_ms: float | None
    achieved: float

    @property
    def passed(self) -> bool:
        return self.errors == 0 and self.lag_p99_ms <= LAG_LIMIT_MS and \
            self.achieved >= 0.95 * self.rate


async def sustain_client(base_url: str, rate: float, seconds: float, tokens: int = 32
                         ) -> tuple[list[float], list[float], int, float]:
    """Lags (ms), TTFTs (ms), errors and achieved rate with sustain's engine."""
    target = Target(base_url=base_url, api_kind=ApiKind.OPENAI_CHAT, model="sim")
    builder = RequestBuilder(workload(tokens), target.api_kind, target.model)
    async with HttpClients() as clients:
        pool = clients.pool()

        def prepare(seq: int, _dialogue: Dialogue | None = None) -> Request:
            return partial(send_over_http1, pool, target,
                           encode_request(builder.body(seq), {}), True)

        ctx = StageContext(clock=RunClock.start(), seqs=itertools.count())
        with quiet_gc():  # as probes.runner.execute does
            samples, _ = await run_open_loop(constant_offsets(rate, seconds + WARMUP_S),
                                             prepare, ctx, max_in_flight=10_000,
                                             warmup_s=WARMUP_S)
    lags = [s.lag_ms or 0.0 for s in samples]
    ttfts = [s.ttft_ms for s in samples if s.ttft_ms is not None]
    errors = sum(1 for s in samples if s.measurement.error_class is not None)
    span = (samples[-1].t_send_ms - samples[0].t_send_ms) / 1000 if len(samples) > 1 else 0
    return lags, ttfts, errors, (len(samples) - 1) / span if span else 0.0


async def naive_client(base_url: str, rate: float, seconds: float, tokens: int = 32
                       ) -> tuple[list[float], list[float], int, float]:
    """The baseline: one httpx.AsyncClient, a task per request, reading SSE lines."""
    limits = httpx.Limits(max_connections=10_000, max_keepalive_connections=10_000)
    lags: list[float] = []
    ttfts: list[float] = []
    errors = 0
    sends: list[float] = []
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        async def one(intended: float, counted: bool) -> None:
            nonlocal errors
            t_send = time.perf_counter()
            if counted:
                sends.append(t_send)
                lags.append((t_send - intended) * 1000)
            body = {"model": "sim", "messages": [{"role": "user", "content": "hello"}],
                    "max_tokens": tokens, "stream": True}
            try:
                async with client.stream("POST", f"{base_url}/chat/completions",
                                         json=body) as response:
                    first = None
                    async for line in response.aiter_lines():
                        if first is None and '"content":"tok' in line:
                            first = time.perf_counter()
                    if first is not None and counted:
                        ttfts.append((first - t_send) * 1000)
            except httpx.HTTPError:
                errors += int(counted)

        loop = asyncio.get_running_loop()
        origin, tasks = time.perf_counter(), []
        origin_loop = loop.time()
        for offset in constant_offsets(rate, seconds + WARMUP_S):
            delay = origin_loop + offset - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(origin + offset, offset >= WARMUP_S)))
        await asyncio.gather(*tasks)
    span = sends[-1] - sends[0] if len(sends) > 1 else 0
    return lags, ttfts, errors, (len(sends) - 1) / span if span else 0.0


async def worker_client(base_url: str, rate: float, seconds: float, tokens: int = 32
                        ) -> tuple[list[float], list[float], int, float]:
    """What the service and `sustain probe --workers` run: a constant profile measured in one
    worker process (pinned to core 0; this process, which only receives the samples, moves
    to core 1 beside the simulator meanwhile)."""
    target = Target(base_url=base_url, api_kind=ApiKind.OPENAI_CHAT, model="sim")
    profile = parse_profile({"kind": "constant", "rate": rate, "duration_s": seconds,
                             "warmup_s": WARMUP_S, "max_in_flight": 10_000})
    pin_to(1)
    try:
        async with WorkerPool(1) as pool:
            (process,) = await pool.lease(1)
            os.sched_setaffinity(process.pid, {0})
            result = await pool.measure(target, workload(tokens), profile)
    finally:
        pin_to(0)
    samples = result.samples
    lags = [s.lag_ms or 0.0 for s in samples]
    ttfts = [s.ttft_ms for s in samples if s.ttft_ms is not None]
    errors = sum(1 for s in samples if s.measurement.error_class is not None)
    span = (samples[-1].t_send_ms - samples[0].t_send_ms) / 1000 if len(samples) > 1 else 0
    return lags, ttfts, errors, (len(samples) - 1) / span if span else 0.0


CLIENTS: dict[str, Callable[..., Coroutine[Any, Any, tuple[list[float], list[float], int,
                                                            float]]]] = {
    "sustain": sustain_client, "worker": worker_client, "baseline": naive_client}


def worker(client: str, base_url: str, rate: float, seconds: float, cpu: int
           ) -> tuple[bytes, bytes, int, float, int]:
    """One client process: sketches of lag and TTFT, errors, achieved rate, requests."""
    pin_to(cpu)
    lags, ttfts, errors, achieved = uvloop.run(CLIENTS[client](base_url, rate, seconds))
    return (MetricSketch.of(lags).to_bytes(), MetricSketch.of(ttfts).to_bytes(), errors,
            achieved, len(lags))


def trial(client: str, base_url: str, rate: float, seconds: float, workers: int) -> Trial:
    if workers == 1:
        lags, ttfts, errors, achieved = uvloop.run(CLIENTS[client](base_url, rate, seconds))
        ordered = sorted(lags)
        ttft = quantile(sorted(ttfts), 0.5) if ttfts else None
        return Trial(client, rate, len(lags), errors, quantile(ordered, 0.99), ttft, achieved)
    lag_sketch, ttft_sketch, errors, achieved, sent = MetricSketch(), MetricSketch(), 0, 0.0, 0
    with ProcessPoolExecutor(workers) as pool:
        parts = pool.map(worker, [client] * workers, [base_url] * workers,
                         [rate / workers] * workers, [seconds] * workers,
                         [0] * workers)
        for lag_bytes, ttft_bytes, err, rate_part, count in parts:
            lag_sketch.merge(MetricSketch.from_bytes(lag_bytes))
            ttft_sketch.merge(MetricSketch.from_bytes(ttft_bytes))
            errors, achieved, sent = errors + err, achieved + rate_part, sent + count
    return Trial(client, rate, sent, errors, lag_sketch.quantile(0.99) or 0.0,
                 ttft_sketch.quantile(0.5), achieved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="100,200,300,400,500,600,700,800,1000,1200")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    pin_to(0)
    trials: list[Trial] = []
    with Simulator(["--ttft-ms", "1", "--itl-ms", "0", "--output-tokens", "32"], cpu=1) as sim:
        for client in CLIENTS:
            failures = 0
            for rate in rates:
                result = trial(client, sim.base_url, rate, args.seconds, args.workers)
                trials.append(result)
                print(f"{client:8} {rate:7.0f}/s  sent {result.sent:6}  errors {result.errors:4}"
                      f"  lag p99 {result.lag_p99_ms:8.2f} ms  achieved {result.achieved:7.1f}/s"
                      f"  {'ok' if result.passed else 'FAIL'}", flush=True)
                failures = 0 if result.passed else failures + 1
                if failures >= 2:
                    break
    best = {c: max((t.rate for t in trials if t.client == c and t.passed), default=0.0)
            for c in CLIENTS}
    rows = "\n".join(
        f"| {t.client} | {t.rate:.0f} | {t.sent} | {t.errors} | {t.lag_p99_ms:.2f} | "
        f"{'-' if t.ttft_p50_ms is None else f'{t.ttft_p50_ms:.2f}'} | {t.achieved:.1f} | "
        f"{'pass' if t.passed else 'fail'} |" for t in trials)
    ratios = {c: best[c] / best["baseline"] if best["baseline"] else float("inf")
              for c in CLIENTS}
    names = {"sustain": "sustain engine", "worker": "sustain worker process",
             "baseline": "naive httpx baseline"}
    summary = "\n".join(f"- {names[c]}: **{best[c]:.0f} req/s** ({ratios[c]:.2f}x the baseline)"
                        for c in CLIENTS)
    body = (f"Highest passing rate (p99 lag <= {LAG_LIMIT_MS} ms, no errors, >= 95 % of the "
            f"rate achieved), {args.workers} client process(es) on core 0, simulator on core 1"
            f":\n\n{summary}\n\n"
            "| client | rate | sent | errors | lag p99 ms | TTFT p50 ms | achieved/s | |\n"
            "|---|---|---|---|---|---|---|---|\n" + rows +
            "\n\nTarget: >= 1,000 streamed req/s per worker core.")
    command = (f"python benchmarks/capacity.py --rates {args.rates} --seconds {args.seconds} "
               f"--workers {args.workers}")
    if args.no_record:
        print(body)
    else:
        top = " (the highest rate tried)" if best["sustain"] == max(rates) else ""
        base = best["baseline"]
        record("capacity: highest sustained constant rate on one client core", command, body,
               headline=f"{best['sustain']:.0f} req/s engine{top}, {best['worker']:.0f} req/s "
                        "worker process",
               ratio=(f"{ratios['sustain']:.1f}x the httpx baseline ({base:.0f} req/s)"
                      if base else "the httpx baseline passed no rate tried"))


if __name__ == "__main__":
    main()
