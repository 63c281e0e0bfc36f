"""What does measuring cost? CPU time of the client per 1,000 streamed requests and per 1,000
streamed tokens, at 32 and 512 output tokens per request (the simulator at 1 ms TTFT, no gap
between tokens, on core 1; each client on core 0). Side by side in the same run:

- sustain worker: a constant profile measured in one worker process, as the service and
  `sustain probe --workers` run it; its CPU time is the worker's (pipe and sample batches
  included), read from /proc through psutil;
- sustain engine: the same driver and lean HTTP/1.1 transport on this process's own loop
  (`sustain probe`, one worker);
- sustain engine, bare: the same, without the HTTP phases and the W3C traceparent of each
  request (probes/client/trace_context.py `untraced`): what timing the phases and tracing
  every request cost. The engine and the bare engine run in turns, --repeats times each, and
  each keeps its median, so the machine's drift during the run weighs on both alike;
- baseline: the naive client (one httpx.AsyncClient, a task per request, reading SSE lines).

Each client sends `rate x (1 s warmup + --seconds)` requests; the CPU time of the whole run is
divided by what was sent (requests, and requests x tokens). Target for the phases and
traceparent: <= 5 % more CPU per request than the bare engine.

    python benchmarks/cpu_cost.py [--seconds 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

import psutil
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.capacity import WARMUP_S, naive_client, sustain_client, workload
from benchmarks.common import Simulator, pin_to, record
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.client.trace_context import untraced
from sustain.probes.load.profiles import parse_profile
from sustain.probes.workers.pool import WorkerPool

RATES = {32: 200.0, 512: 40.0}
"""Requests/s per token count: well within every client's capacity, so CPU is not
saturated and each request costs what it costs."""
PHASES_TARGET = 0.05
"""The most the HTTP phases and the traceparent may add to the engine's CPU per request."""
CLIENTS = ("worker", "engine", "bare", "baseline")


async def worker_cpu(base_url: str, rate: float, seconds: float, tokens: int
                     ) -> tuple[float, int, int]:
    """CPU seconds of the worker process for one run; requests sent; failures."""
    target = Target(base_url=base_url, api_kind=ApiKind.OPENAI_CHAT, model="sim")
    profile = parse_profile({"kind": "constant", "rate": rate, "duration_s": seconds,
                             "warmup_s": WARMUP_S, "max_in_flight": 10_000})
    async with WorkerPool(1) as pool:
        (process,) = await pool.lease(1)
        os.sched_setaffinity(process.pid, {0})
        pin_to(1)
        try:
            await asyncio.sleep(1.0)  # the worker has finished starting up
            before = psutil.Process(process.pid).cpu_times()
            result = await pool.measure(target, workload(tokens), profile)
            after = psutil.Process(process.pid).cpu_times()
        finally:
            pin_to(0)
    cpu = (after.user - before.user) + (after.system - before.system)
    return cpu, int(rate * (seconds + WARMUP_S)), result.summary.failures


def in_process_cpu(client: str, base_url: str, rate: float, seconds: float, tokens: int
                   ) -> tuple[float, int, int]:
    """CPU seconds of this process for one run of `client` (engine, bare: the engine
    untraced, baseline); requests sent; failures."""
    run = naive_client if client == "baseline" else sustain_client
    bare = untraced() if client == "bare" else contextlib.nullcontext()
    before = time.process_time()
    with bare:
        _, _, errors, _ = uvloop.run(run(base_url, rate, seconds, tokens))
    return time.process_time() - before, int(rate * (seconds + WARMUP_S)), errors


def paired_cpu(base_url: str, rate: float, seconds: float, tokens: int, repeats: int
               ) -> dict[str, tuple[float, int, int]]:
    """The engine and the bare engine in turns, `repeats` times each: each one's run of
    median CPU time."""
    runs: dict[str, list[tuple[float, int, int]]] = {"engine": [], "bare": []}
    for _ in range(repeats):
        for client in runs:
            runs[client].append(in_process_cpu(client, base_url, rate, seconds, tokens))
    return {client: sorted(measured)[len(measured) // 2] for client, measured in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of the engine and of the bare engine, in turns")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    pin_to(0)
    figures: dict[tuple[str, int], tuple[float, int, int]] = {}
    with Simulator(["--ttft-ms", "1", "--itl-ms", "0", "--output-tokens", "512"],
                   cpu=1) as sim:
        for tokens, rate in RATES.items():
            figures[("worker", tokens)] = uvloop.run(
                worker_cpu(sim.base_url, rate, args.seconds, tokens))
            for client, measured in paired_cpu(sim.base_url, rate, args.seconds, tokens,
                                               args.repeats).items():
                figures[(client, tokens)] = measured
            figures[("baseline", tokens)] = in_process_cpu("baseline", sim.base_url, rate,
                                                           args.seconds, tokens)
            for client in CLIENTS:
                cpu, sent, failed = figures[(client, tokens)]
                print(f"{client:8} {tokens:4} tokens: {cpu * 1e6 / sent:8.1f} CPU-ms per 1,000 "
                      f"requests ({sent} sent, {failed} failed)", flush=True)
    names = {"worker": "sustain worker process", "engine": "sustain engine, in-process",
             "bare": "sustain engine, without HTTP phases and traceparent",
             "baseline": "baseline: naive httpx"}
    rows = []
    headline: list[str] = []
    ratio: list[str] = []
    phases: list[str] = []
    for tokens, rate in RATES.items():
        engine_cpu, engine_sent, _ = figures[("engine", tokens)]
        bare_cpu, bare_sent, _ = figures[("bare", tokens)]
        added = (engine_cpu / engine_sent) / (bare_cpu / bare_sent) - 1
        phases.append(f"{added:+.1%} at {tokens} tokens")
        base_cpu, base_sent, _ = figures[("baseline", tokens)]
        worker_cpu_s, worker_sent, _ = figures[("worker", tokens)]
        worker_per_request = worker_cpu_s * 1e6 / worker_sent
        headline.append(f"{worker_per_request:.0f} at {tokens} tokens")
        ratio.append(f"{worker_per_request / (base_cpu * 1e6 / base_sent):.2f} at {tokens} "
                     "tokens")
        base_per_request = base_cpu * 1e6 / base_sent
        for client in CLIENTS:
            cpu, sent, failed = figures[(client, tokens)]
            per_request = cpu * 1e6 / sent
            rows.append(f"| {names[client]} | {tokens} | {rate:g} | {sent} | {failed} | "
                        f"{per_request:.0f} | {per_request / tokens:.1f} | "
                        f"{per_request / base_per_request:.2f} |")
    body = ("CPU time of the client process (user + system), over the whole run (the engine "
            f"and the bare engine: the median of {args.repeats} runs each, in turns):\n\n"
            "| client | tokens per request | rate/s | requests | failed | CPU-ms per 1,000 "
            "requests | CPU-ms per 1,000 tokens | ratio to baseline |\n"
            "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
            + "\n\nThe HTTP phases and the W3C traceparent of every request, against the bare "
            f"engine: {', '.join(phases)} CPU per request (target <= "
            f"{PHASES_TARGET:.0%}).")
    print(f"phases + traceparent: {', '.join(phases)} CPU per request", flush=True)
    command = (f"python benchmarks/cpu_cost.py --seconds {args.seconds:g} "
               f"--repeats {args.repeats}")
    if args.no_record:
        print(body)
    else:
        record("cpu cost: client CPU per 1,000 streamed requests and tokens", command, body,
               headline="worker process, CPU-ms per 1,000 requests: " + ", ".join(headline)
               + "; HTTP phases and traceparent " + ", ".join(phases),
               ratio="CPU / httpx's: " + ", ".join(ratio))


if __name__ == "__main__":
    main()
