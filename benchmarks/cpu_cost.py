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
  every request cost. The engine and the bare engine run in turns, --repeats times each; the
  table keeps each one's median, and the cost of the phases is the median of the turns'
  ratios (each ratio of two runs seconds apart), so the machine's drift weighs on both alike;
- baseline: the naive client (one httpx.AsyncClient, a task per request, reading SSE lines);
- with `--against REV`: the engine of this checkout and the engine of commit REV, each in a
  child process of its own (benchmarks/revision.py lays REV out as an import root), in turns
  with the two above: what a change to the client saves or costs, on the same machine in the
  same minutes (again the median of the turns' ratios).

Each client sends `rate x (1 s warmup + --seconds)` requests; the CPU time of the whole run is
divided by what was sent (requests, and requests x tokens). Target for the phases and
traceparent: <= 5 % more CPU per request than the bare engine.

    python benchmarks/cpu_cost.py [--seconds 5] [--repeats 3] [--against REV]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import psutil
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.capacity import WARMUP_S, naive_client, sustain_client, workload
from benchmarks.common import Simulator, pin_to, record
from benchmarks.revision import commit_of, import_root, imported_from
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.client.trace_context import untraced
from sustain.probes.load.profiles import parse_profile
from sustain.probes.workers.pool import WorkerPool

RATES = {32: 200.0, 512: 40.0}
"""Requests/s per token count: well within every client's capacity, so CPU is not
saturated and each request costs what it costs."""
PHASES_TARGET = 0.05
"""The most the HTTP phases and the traceparent may add to the engine's CPU per request."""
EVENT_TARGET_US = 3.0
REQUEST_TARGET_MS = 0.3
"""The lean client's targets: CPU per streamed event, and per request besides its events."""


def split_cost(per_request_us: dict[int, float]) -> tuple[float, float]:
    """CPU per token (event) and per request besides, in µs, from the CPU per request at two
    token counts: the line through the two points (its slope and its intercept)."""
    (low, low_us), (high, high_us) = sorted(per_request_us.items())
    per_token = (high_us - low_us) / (high - low)
    return per_token, low_us - low * per_token


def split_text(per_request_us: dict[int, float]) -> str:
    """The split of `split_cost` as the benchmark reports it: µs per event, ms per request."""
    per_token_us, per_request_besides_us = split_cost(per_request_us)
    return (f"{per_token_us:.2f} µs per event (token), {per_request_besides_us / 1000:.3f} ms "
            "per request besides")


CLIENTS = ("worker", "engine", "bare", "baseline")
CHILD_TIMEOUT_S = 120.0
"""Hang guard of one child's run (a run is a few seconds)."""

Measured = tuple[float, int, int]
"""CPU seconds of one run, requests sent, failures."""


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


def child_cpu(base_url: str, rate: float, seconds: float, tokens: int,
              import_path: Path | None) -> Measured:
    """The engine's run in a child process, importing `sustain` from `import_path` (a commit's
    import root) or, without one, from this checkout; the child's own CPU time of the run."""
    env = dict(os.environ)
    if import_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(import_path), *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run(
        [sys.executable, __file__, "--child", base_url, str(rate), str(seconds), str(tokens)],
        env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=True)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    here = Path(figures["from"])
    if import_path is not None and not here.is_relative_to(import_path.parent):
        raise RuntimeError(f"the child imported sustain from {here}, not from {import_path}")
    return figures["cpu_s"], figures["sent"], figures["failed"]


def paired_cpu(runs: dict[str, Callable[[], Measured]], repeats: int
               ) -> dict[str, list[Measured]]:
    """Each client's run in turns, `repeats` times each: every client's runs, in turn order."""
    measured: dict[str, list[Measured]] = {client: [] for client in runs}
    for _ in range(repeats):
        for client, run in runs.items():
            measured[client].append(run())
    return measured


def median_run(runs: list[Measured]) -> Measured:
    """The run of median CPU time."""
    return sorted(runs)[len(runs) // 2]


def paired_ratio(first: list[Measured], second: list[Measured]) -> float:
    """The median over turns of `first`'s CPU per request over `second`'s in the same turn.
    Runs of one turn are seconds apart, so a machine whose speed drifts over minutes (these
    VMs drift by half) moves both sides of each ratio alike; a ratio of the two medians can
    pair a fast minute with a slow one."""
    return statistics.median((a[0] / a[1]) / (b[0] / b[1])
                             for a, b in zip(first, second, strict=True))


def child_main(argv: list[str]) -> None:
    """`--child URL RATE SECONDS TOKENS`: one engine run, its figures as a JSON line."""
    base_url, rate, seconds, tokens = argv[0], float(argv[1]), float(argv[2]), int(argv[3])
    cpu_s, sent, failed = in_process_cpu("engine", base_url, rate, seconds, tokens)
    print(json.dumps({"cpu_s": cpu_s, "sent": sent, "failed": failed,
                      "from": imported_from()}))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each client measured in turns")
    parser.add_argument("--against", metavar="REV",
                        help="also measure the engine of this commit (e.g. HEAD~1) beside "
                        "this checkout's, each in a child process, in turns")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    pin_to(0)
    clients = CLIENTS + (("this", "previous") if args.against else ())
    figures: dict[tuple[str, int], Measured] = {}
    turn_runs: dict[tuple[str, int], list[Measured]] = {}
    with contextlib.ExitStack() as stack:
        previous = stack.enter_context(import_root(args.against)) if args.against else None
        sim = stack.enter_context(Simulator(
            ["--ttft-ms", "1", "--itl-ms", "0", "--output-tokens", "512"], cpu=1))
        for tokens, rate in RATES.items():
            url, s = sim.base_url, args.seconds
            figures[("worker", tokens)] = uvloop.run(worker_cpu(url, rate, s, tokens))
            turns: dict[str, Callable[[], Measured]] = {
                "engine": partial(in_process_cpu, "engine", url, rate, s, tokens),
                "bare": partial(in_process_cpu, "bare", url, rate, s, tokens)}
            if previous is not None:
                turns["this"] = partial(child_cpu, url, rate, s, tokens, None)
                turns["previous"] = partial(child_cpu, url, rate, s, tokens, previous)
            for client, measured in paired_cpu(turns, args.repeats).items():
                figures[(client, tokens)] = median_run(measured)
                turn_runs[(client, tokens)] = measured
            figures[("baseline", tokens)] = in_process_cpu("baseline", url, rate, s, tokens)
            for client in clients:
                cpu, sent, failed = figures[(client, tokens)]
                print(f"{client:8} {tokens:4} tokens: {cpu * 1e6 / sent:8.1f} CPU-ms per 1,000 "
                      f"requests ({sent} sent, {failed} failed)", flush=True)
    commit = commit_of(args.against) if args.against else ""
    short = commit[:7]
    names = {"worker": "sustain worker process", "engine": "sustain engine, in-process",
             "bare": "sustain engine, without HTTP phases and traceparent",
             "baseline": "baseline: naive httpx",
             "this": "sustain engine of this checkout, child process",
             "previous": f"sustain engine of commit {short}, child process"}
    rows = []
    headline: list[str] = []
    ratio: list[str] = []
    phases: list[str] = []
    against: list[str] = []

    def per_request(client: str, tokens: int) -> float:
        cpu, sent, _ = figures[(client, tokens)]
        return cpu * 1e6 / sent

    for tokens, rate in RATES.items():
        added = paired_ratio(turn_runs[("engine", tokens)], turn_runs[("bare", tokens)]) - 1
        phases.append(f"{added:+.1%} at {tokens} tokens")
        worker_per_request = per_request("worker", tokens)
        headline.append(f"{worker_per_request:.0f} at {tokens} tokens")
        ratio.append(f"{worker_per_request / per_request('baseline', tokens):.2f} at {tokens} "
                     "tokens")
        if args.against:
            paired = paired_ratio(turn_runs[("this", tokens)], turn_runs[("previous", tokens)])
            against.append(f"{paired:.3f} at {tokens} tokens")
        for client in clients:
            _, sent, failed = figures[(client, tokens)]
            cost = per_request(client, tokens)
            rows.append(f"| {names[client]} | {tokens} | {rate:g} | {sent} | {failed} | "
                        f"{cost:.0f} | {cost / tokens:.1f} | "
                        f"{cost / per_request('baseline', tokens):.2f} |")
    turned = "the engine and the bare engine" + (
        f", and the engines of this checkout and of {short}" if args.against else "")
    body = (f"CPU time of the client process (user + system), over the whole run ({turned}: "
            f"the median of {args.repeats} runs each, in turns):\n\n"
            "| client | tokens per request | rate/s | requests | failed | CPU-ms per 1,000 "
            "requests | CPU-ms per 1,000 tokens | ratio to baseline |\n"
            "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
            + "\n\nThe HTTP phases and the W3C traceparent of every request, against the bare "
            f"engine (the median of the turns' ratios): {', '.join(phases)} CPU per request "
            "(target <= "
            f"{PHASES_TARGET:.0%}).")
    split_from = "this" if args.against else "engine"
    split = split_text({tokens: per_request(split_from, tokens) for tokens in RATES})
    body += (f"\n\nSplit by the line through the two token counts ({names[split_from]}): "
             f"{split} (targets: <= {EVENT_TARGET_US:g} µs per event, <= "
             f"{REQUEST_TARGET_MS:g} ms per request).")
    print(f"split: {split}", flush=True)
    if args.against:
        body += (f"\n\nThis checkout's engine against commit {commit}'s, CPU "
                 f"per request (the median of the turns' ratios): {', '.join(against)}.")
        print(f"this checkout / {short}, CPU per request: {', '.join(against)}", flush=True)
    print(f"phases + traceparent: {', '.join(phases)} CPU per request", flush=True)
    command = (f"python benchmarks/cpu_cost.py --seconds {args.seconds:g} "
               f"--repeats {args.repeats}" + (f" --against {args.against}"
                                               if args.against else ""))
    if args.no_record:
        print(body)
    else:
        record("cpu cost: client CPU per 1,000 streamed requests and tokens", command, body,
               headline="worker process, CPU-ms per 1,000 requests: " + ", ".join(headline)
               + f"; engine {split}; HTTP phases and traceparent " + ", ".join(phases),
               ratio="CPU / httpx's: " + ", ".join(ratio) + (
                   f"; this checkout / {short}: " + ", ".join(against) if against else ""))


if __name__ == "__main__":
    main()
