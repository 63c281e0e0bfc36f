"""How exactly does sustain measure? Client TTFT and E2E against the server's own clock.

The simulator runs in its own process on the other core, with a fixed 50 ms TTFT, 10 ms ITL
and 64 tokens, and logs when it handed the first token and the last byte to the kernel
(perf_counter, the same monotonic clock as the client on this machine). For each request:

    TTFT error = client TTFT - (server first-token write - client t_send)
    E2E error  = client E2E  - (server last-byte write   - client t_send)

so the error is what sustain adds on top of the real latency: loopback, the event loop, HTTP
and SSE parsing. Targets: median <= 1 ms and p99 <= 3 ms at every concurrency, and the
median inter-token gap the client measures within 1 ms of the simulator's 10 ms. Side by side
in the same run: sustain's lean transport and the same measurement over httpx. These are the
figures the tests only bound from below (a TTFT is never under the simulator's 50 ms).

Every protocol is measured the same way (`--kinds`): each reads its own events (Responses'
`response.output_text.delta`, Anthropic's `content_block_delta`) from the same simulated
generation (a transcription's tokens are its transcript, after 5 s of audio at 20 ms a
second). The item kinds (`openai-embeddings`, `rerank`: 16 inputs or documents a request,
1 ms each on top of the 50 ms) answer whole: their error is E2E alone, against the server's
last byte.

The same measurement of a thinking model (TTFO beside TTFT) is benchmarks/reasoning_accuracy.py.

    python benchmarks/accuracy.py [--kinds openai-chat,openai-responses,anthropic-messages]
        [--levels 1,16,64] [--requests 100,320,640] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
from functools import partial
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Simulator, pin_to, record
from sustain.probes.client.clients import HttpClients
from sustain.probes.client.http1 import send_over_http1
from sustain.probes.client.httpx_transport import send_over_httpx
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.clock import RunClock
from sustain.probes.load.drivers import Request, StageContext, run_closed_loop
from sustain.probes.load.quiet_gc import quiet_gc
from sustain.probes.measure.percentiles import quantile
from sustain.probes.measure.sample import Sample
from sustain.probes.protocols.openai_transcriptions import encode_transcription
from sustain.probes.protocols.registry import CONVERSATION_KINDS, PROTOCOLS
from sustain.probes.protocols.streaming import encode_request
from sustain.probes.workload.images import ImageSpec
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.sessions import Dialogue
from sustain.probes.workload.spec import Workload

CLIENTS = {"lean": "sustain (lean HTTP/1.1 transport)", "httpx": "baseline: httpx"}
TOKENS = 64
BATCH = 16
"""Inputs per embeddings request, documents per rerank request (1 ms each in the simulator)."""
AUDIO_S = 5.0
"""Seconds of audio per transcription (20 ms each in the simulator, before the first text)."""
ITL_MS = 10.0


def protocol_headers_of(kind: ApiKind) -> tuple[tuple[str, str], ...]:
    """What the kind's protocol sends with every request (Anthropic's version header)."""
    return PROTOCOLS[kind].headers


async def run_level(base_url: str, concurrency: int, requests: int, tag: str, client: str,
                    kind: ApiKind = ApiKind.OPENAI_CHAT, image_side: int | None = None
                    ) -> tuple[list[Sample], RunClock]:
    """`client`: "lean" (sustain's HTTP/1.1 transport) or "httpx" (the baseline)."""
    target = Target(base_url=base_url, api_kind=kind, model="sim",
                    headers=dict(protocol_headers_of(kind)))
    images = None if image_side is None or kind not in CONVERSATION_KINDS else \
        ImageSpec(count=1, width=image_side, height=image_side)
    builder = RequestBuilder(Workload(max_tokens=TOKENS, input_tokens=32, batch_size=BATCH,
                                      documents=BATCH, audio_s=AUDIO_S, images=images),
                             target.api_kind, target.model)
    items = PROTOCOLS[kind].form == "items"
    async with HttpClients(concurrency) as clients:

        def prepare(seq: int, _dialogue: Dialogue | None = None) -> Request:
            headers = {**target.headers, "x-request-id": f"{tag}-{seq}"}
            expect = None
            if PROTOCOLS[kind].form == "audio":
                fields, wav, _seconds = builder.audio(seq)
                encoded = encode_transcription(fields, wav, headers)
            else:
                body = builder.body(seq)
                encoded = encode_request(body, headers)
                expect = builder.expected_items(body) if items else None
            send = send_over_httpx if client == "httpx" else send_over_http1
            connections = clients.httpx() if client == "httpx" else clients.pool()
            return partial(send, connections, target, encoded, not items,  # type: ignore[arg-type]
                           expect=expect)

        warm = StageContext(clock=RunClock.start(), seqs=itertools.count(1_000_000))
        await run_closed_loop(concurrency, prepare, warm, duration_s=None,
                              max_requests=concurrency)
        clock = RunClock.start()
        ctx = StageContext(clock=clock, seqs=itertools.count())
        with quiet_gc():  # as probes.runner.execute does
            samples, _ = await run_closed_loop(concurrency, prepare, ctx, duration_s=None,
                                               max_requests=requests)
    return samples, clock


def errors(samples: list[Sample], clock: RunClock, truth: dict[str, dict[str, float]],
           tag: str) -> tuple[list[float], list[float], list[float]]:
    """TTFT, E2E and TTFO errors (ms) of the successful samples the truth log knows."""
    ttft, e2e, ttfo = [], [], []
    for sample in samples:
        server = truth.get(f"{tag}-{sample.seq}")
        m = sample.measurement
        if server is None or m.error_class is not None:
            continue
        t_send_s = (clock.origin_ns / 1e9) + sample.t_send_ms / 1000.0
        if m.ttft_ms is not None and server["first_token"] is not None:
            ttft.append(m.ttft_ms - (server["first_token"] - t_send_s) * 1000.0)
        e2e.append(m.e2e_ms - (server["last_byte"] - t_send_s) * 1000.0)
        if m.ttfo_ms is not None and server.get("first_answer") is not None:
            ttfo.append(m.ttfo_ms - (server["first_answer"] - t_send_s) * 1000.0)
    return ttft, e2e, ttfo


def stats(values: list[float]) -> str:
    if not values:  # a whole answer has no first token
        return "- | - | - | -"
    ordered = sorted(values)
    return (f"{quantile(ordered, 0.5):.3f} | {quantile(ordered, 0.99):.3f} | "
            f"{ordered[0]:.3f} | {ordered[-1]:.3f}")


def arguments(description: str, *, kinds: str = ApiKind.OPENAI_CHAT.value,
              levels: str = "1,16,64", requests: str = "100,320,640",
              reasoning_tokens: int = 0) -> argparse.ArgumentParser:
    """The flags of this benchmark (and of reasoning_accuracy.py, with its defaults)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--kinds", default=kinds, help="comma-separated api kinds to measure")
    parser.add_argument("--levels", default=levels, help="concurrency levels")
    parser.add_argument("--images", type=int, default=None,
                        help="attach one salted PNG of this side (px) to each chat request")
    parser.add_argument("--requests", default=requests,
                        help="requests per level, one count per level")
    parser.add_argument("--reasoning-tokens", type=int, default=reasoning_tokens,
                        help="the simulated model thinks this many tokens before answering")
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop",
                        help="event loop of the client (sustain serve runs on uvloop)")
    return parser


def measure(args: argparse.Namespace, script: str) -> tuple[str, str, float, float]:
    """Run the levels `args` name; the table, the command (of `script`), and the worst error
    p99 of sustain's transport and of httpx's (ms)."""
    counts = [int(n) for n in args.requests.split(",")]
    levels = [int(n) for n in args.levels.split(",")]
    kinds = [ApiKind(kind) for kind in args.kinds.split(",")]
    pin_to(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "truth.jsonl"
        with Simulator(["--ttft-ms", "50", "--itl-ms", f"{ITL_MS:g}", "--output-tokens",
                        str(TOKENS), "--reasoning-tokens", str(args.reasoning_tokens),
                        "--truth-log", str(log)], cpu=1) as sim:
            results = {}
            for kind in kinds:
                for concurrency, count in zip(levels, counts, strict=True):
                    for client in CLIENTS:
                        tag = f"{kind}-{client}-c{concurrency}"
                        level = run_level(sim.base_url, concurrency, count, tag, client, kind,
                                          args.images)
                        outcome = uvloop.run(level) if args.loop == "uvloop" \
                            else asyncio.run(level)
                        results[(kind, client, concurrency)] = (tag, *outcome)
        truth = {}
        for line in log.read_text().splitlines():
            record_ = json.loads(line)
            if record_.get("request_id"):
                truth[record_["request_id"]] = record_
    worst: dict[str, float] = {}  # per client: the highest TTFT, TTFO or E2E error p99, ms
    thinking = args.reasoning_tokens > 0
    for (kind, client, concurrency), (tag, samples, clock) in results.items():
        ttft, e2e, ttfo = errors(samples, clock, truth, tag)
        worst[client] = max([worst.get(client, 0.0)] + [quantile(sorted(v), 0.99)
                                                        for v in (ttft, e2e, ttfo) if v])
        ok = [s.measurement for s in samples if s.measurement.error_class is None]
        reasoning = f" | {sum(m.reasoning_tokens == args.reasoning_tokens for m in ok)}/" \
            f"{len(samples)} | {stats(ttfo)}" if thinking else ""
        gaps = sorted(gap for s in samples if s.measurement.error_class is None
                      for gap in s.measurement.itl_ms)
        itl = f"{quantile(gaps, 0.5):.3f}" if gaps else "-"
        label = f"{kind} + {args.images}px image" if args.images and kind in CONVERSATION_KINDS \
            else str(kind)
        rows.append(f"| {label} | {CLIENTS[client]} | {concurrency} | {len(e2e)} | "
                    f"{stats(ttft)} | {stats(e2e)} | {itl}{reasoning} |")
    extra_head = (" reasoning tokens right | TTFO median | TTFO p99 | TTFO min | TTFO max |"
                  if thinking else "")
    table = ("TTFT and E2E error in ms (client minus server truth), median | p99 | min | max; "
             f"the median ITL the client measured (the simulator's gap is {ITL_MS:g} ms)"
             + (f"; with {args.reasoning_tokens} reasoning tokens before each answer, the "
                "requests whose reasoning tokens were what the simulator sent, and the TTFO "
                "error" if thinking else "") + ":\n\n"
             "| kind | client | concurrency | requests | TTFT median | TTFT p99 | TTFT min | "
             "TTFT max | E2E median | E2E p99 | E2E min | E2E max | ITL median |" + extra_head
             + "\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
             + ("---|---|---|---|---|" if thinking else "") + "\n" + "\n".join(rows))
    command = (f"python benchmarks/{script} --kinds {args.kinds} --levels {args.levels} "
               f"--requests {args.requests} --loop {args.loop}"
               + (f" --images {args.images}" if args.images else "")
               + (f" --reasoning-tokens {args.reasoning_tokens}" if thinking else ""))
    return table, command, worst.get("lean", 0.0), worst.get("httpx", 0.0)


def against_httpx(ours: float, base: float) -> str:
    """The summary's ratio: httpx's worst error p99 over sustain's."""
    return f"httpx's worst p99 {base:.3f} ms, " + (
        f"{base / ours:.1f}x sustain's" if ours > 0 else "sustain's is 0")


def main() -> None:
    args = arguments(__doc__.split("\n\n")[0]).parse_args()
    table, command, ours, base = measure(args, "accuracy.py")
    if args.no_record:
        print(table)
        return
    record("accuracy: TTFT and E2E error against server-side truth", command,
           table + "\n\nTarget: median <= 1 ms and p99 <= 3 ms at every concurrency; "
           f"ITL median within 1 ms of {ITL_MS:g} ms.",
           headline=f"worst error p99 {ours:.3f} ms (TTFT or E2E, any level)",
           ratio=against_httpx(ours, base))


if __name__ == "__main__":
    main()
