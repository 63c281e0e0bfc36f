"""What does measuring cost? CPU time of the client per 1,000 streamed requests and per 1,000
streamed tokens, at 32 and 512 output tokens per request (the simulator at 1 ms TTFT, no gap
between tokens, on core 1; each client on core 0). Side by side in the same run:

- sustain worker: a constant profile measured in one worker process, as the service and
  `sustain probe --workers` run it; its CPU time is the worker's (pipe and sample batches
  included), read from /proc through psutil;
- sustain engine: the same driver and lean HTTP/1.1 transport on this process's own loop
  (`sustain probe`, one worker);
- baseline: the naive client (one httpx.AsyncClient, a task per request, reading SSE lines).

Each client sends `rate x (1 s warmup + --seconds)` requests; the CPU time of the whole run is
divided by what was sent (requests, and requests x tokens).

    python benchmarks/cpu_cost.py [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
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
from sustain.probes.load.profiles import parse_profile
from sustain.probes.workers.pool import WorkerPool

RATES = {32: 200.0, 512: 40.0}
"""Requests/s per token count: well within every client's capacity, so CPU is not
saturated and each request costs what it costs."""


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
    run = sustain_client if client == "engine" else naive_client
    before = time.process_time()
    _, _, errors, _ = uvloop.run(run(base_url, rate, seconds, tokens))
    return time.process_time() - before, int(rate * (seconds + WARMUP_S)), errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    pin_to(0)
    figures: dict[tuple[str, int], tuple[float, int, int]] = {}
    with Simulator(["--ttft-ms", "1", "--itl-ms", "0", "--output-tokens", "512"],
                   cpu=1) as sim:
        for tokens, rate in RATES.items():
            figures[("worker", tokens)] = uvloop.run(
                worker_cpu(sim.base_url, rate, args.seconds, tokens))
            for client in ("engine", "baseline"):
                figures[(client, tokens)] = in_process_cpu(client, sim.base_url, rate,
                                                           args.seconds, tokens)
            for client in ("worker", "engine", "baseline"):
                cpu, sent, failed = figures[(client, tokens)]
                print(f"{client:8} {tokens:4} tokens: {cpu * 1e6 / sent:8.1f} CPU-ms per 1,000 "
                      f"requests ({sent} sent, {failed} failed)", flush=True)
    names = {"worker": "sustain worker process", "engine": "sustain engine, in-process",
             "baseline": "baseline: naive httpx"}
    rows = []
    headline: list[str] = []
    ratio: list[str] = []
    for tokens, rate in RATES.items():
        base_cpu, base_sent, _ = figures[("baseline", tokens)]
        worker_cpu_s, worker_sent, _ = figures[("worker", tokens)]
        worker_per_request = worker_cpu_s * 1e6 / worker_sent
        headline.append(f"{worker_per_request:.0f} at {tokens} tokens")
        ratio.append(f"{worker_per_request / (base_cpu * 1e6 / base_sent):.2f} at {tokens} "
                     "tokens")
        base_per_request = base_cpu * 1e6 / base_sent
        for client in ("worker", "engine", "baseline"):
            cpu, sent, failed = figures[(client, tokens)]
            per_request = cpu * 1e6 / sent
            rows.append(f"| {names[client]} | {tokens} | {rate:g} | {sent} | {failed} | "
                        f"{per_request:.0f} | {per_request / tokens:.1f} | "
                        f"{per_request / base_per_request:.2f} |")
    body = ("CPU time of the client process (user + system), over the whole run:\n\n"
            "| client | tokens per request | rate/s | requests | failed | CPU-ms per 1,000 "
            "requests | CPU-ms per 1,000 tokens | ratio to baseline |\n"
            "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows))
    command = f"python benchmarks/cpu_cost.py --seconds {args.seconds:g}"
    if args.no_record:
        print(body)
    else:
        record("cpu cost: client CPU per 1,000 streamed requests and tokens", command, body,
               headline="worker process, CPU-ms per 1,000 requests: " + ", ".join(headline),
               ratio="CPU / httpx's: " + ", ".join(ratio))


if __name__ == "__main__":
    main()
