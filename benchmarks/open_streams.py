"""Can one client hold thousands of slow streams at once? --streams concurrent requests
(default 2,000) to a simulator that trickles 20 tokens 500 ms apart (about 10 s per stream),
while the client's resident memory is sampled. Target: >= 2,000 streams held with client RSS
< 1 GiB and no client-side errors.

    python benchmarks/open_streams.py [--streams 2000] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import resource
import sys
from functools import partial
from pathlib import Path

import psutil
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Simulator, pin_to, record
from sustain.probes.client.clients import HttpClients
from sustain.probes.client.http1 import send_over_http1
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.clock import RunClock
from sustain.probes.load.drivers import Request, StageContext, run_closed_loop
from sustain.probes.load.live import LiveStats
from sustain.probes.protocols.streaming import encode_request
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.sessions import Dialogue
from sustain.probes.workload.spec import Workload

TOKENS, ITL_MS, TTFT_MS = 20, 500, 200


async def hold(base_url: str, streams: int) -> tuple[int, int, int, float, int]:
    """(successes, errors, peak RSS bytes, seconds, peak streams in flight)."""
    target = Target(base_url=base_url, api_kind=ApiKind.OPENAI_CHAT, model="sim",
                    timeout_first_token_s=120, timeout_total_s=300, timeout_connect_s=30)
    builder = RequestBuilder(Workload(max_tokens=TOKENS, input_tokens=8), target.api_kind,
                             target.model)
    process = psutil.Process()
    peak_rss, peak_in_flight = process.memory_info().rss, 0
    live = LiveStats()

    async def sample_memory() -> None:
        nonlocal peak_rss, peak_in_flight
        while True:
            peak_rss = max(peak_rss, process.memory_info().rss)
            peak_in_flight = max(peak_in_flight, live.in_flight)
            await asyncio.sleep(0.1)

    async with HttpClients() as clients:
        pool = clients.pool()

        def prepare(seq: int, _dialogue: Dialogue | None = None) -> Request:
            return partial(send_over_http1, pool, target,
                           encode_request(builder.body(seq), {}), True)

        sampler = asyncio.create_task(sample_memory())
        clock = RunClock.start()
        ctx = StageContext(clock=clock, seqs=itertools.count(), live=live)
        loop = asyncio.get_running_loop()
        started = loop.time()
        samples, _ = await run_closed_loop(streams, prepare, ctx, duration_s=None,
                                           max_requests=streams)
        elapsed = loop.time() - started
        sampler.cancel()
    errors = sum(1 for s in samples if s.measurement.error_class is not None)
    return len(samples) - errors, errors, peak_rss, elapsed, peak_in_flight


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < args.streams + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, args.streams * 2 + 100), hard))
    pin_to(0)
    with Simulator(["--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--output-tokens",
                    str(TOKENS)], cpu=1) as sim:
        ok, errors, rss, seconds, peak = uvloop.run(hold(sim.base_url, args.streams))
    body = (f"{args.streams} streams of {TOKENS} tokens, {ITL_MS} ms apart, one client process "
            f"(pid {os.getpid()}) on core 0:\n\n"
            f"| streams | peak in flight | succeeded | errors | peak client RSS | seconds |\n"
            f"|---|---|---|---|---|---|\n"
            f"| {args.streams} | {peak} | {ok} | {errors} | {rss / 2**20:.0f} MiB | "
            f"{seconds:.1f} |\n\nTarget: >= 2,000 concurrent streams, RSS < 1 GiB, no errors.")
    command = f"python benchmarks/open_streams.py --streams {args.streams}"
    if args.no_record:
        print(body)
    else:
        record("open streams: concurrent slow streams held by one client", command, body,
               headline=f"{ok} of {args.streams} streams, peak RSS {rss / 2**20:.0f} MiB, "
                        f"{errors} errors")


if __name__ == "__main__":
    main()
