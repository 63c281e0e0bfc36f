"""How exactly does sustain measure the media kinds? Their figures against the server's clock.

The simulator runs in its own process on the other core (speech: 30 ms to the first audio,
2 ms of audio per character of the input cut into 40 ms chunks 5 ms apart; images: 20 ms and
8 KiB each; videos: 120 ms queued, 300 ms generating, 64 KiB of content) and logs, for every
request it answered, when it handed each part of its answer to the kernel (perf_counter: the
same monotonic clock as the client on this machine). Each request carries its t_send (ns) in
its `x-request-id` (a video job: every request of its flow), so for each request

    error = client figure - (server time of the same event - client t_send)

is what sustain adds on top of the real latency: loopback, the event loop, HTTP, SSE and the
kind's own reading. The figures, at `--users` users in a closed loop:

- speech (`openai-speech`, raw audio and SSE): the first audio byte (client TTFT against the
  server's first audio write) and the end (E2E against its last byte);
- images (`openai-images`), streamed with 2 partial images: the first partial image (TTFT
  against the server's first partial write) and the end; whole, 2 images an answer: the
  latency (E2E against the answer's one write);
- videos (`openai-videos`), a job polled every 50 ms: its `queue` and `generation` phases
  against the server's own transitions (started - created, completed - started), its
  `content` phase against the server's download (arrival of the content request to its last
  write), and the end (E2E against the content's last write). The client sees a transition
  only at its next poll, so these phases are exact to within one poll interval; the queue
  phase also starts at the client's receipt of the create's answer, the server's at its
  creation.

Every request is accounted for: as many samples as requests sent, each one successful, and
each logged exactly once by the server. Targets: median <= 1 ms and p99 <= 3 ms for the speech
and image figures (as benchmarks/accuracy.py's for the generation kinds); each video phase and
its end within one poll interval of the server's. Side by side in the same run: sustain's lean
transport and the same measurement over httpx. The tests (tests/integration/probes/
test_media_accuracy.py) check only that every request is accounted for and that no figure is
below the simulator's schedule; these are the figures.

    python benchmarks/media_accuracy.py [--kinds openai-speech,openai-images,openai-videos]
        [--users 8] [--requests 160] [--loop uvloop] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import itertools
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Simulator, pin_to, record
from sustain.probes.client.clients import HttpClients
from sustain.probes.client.http1 import call_over_http1, send_over_http1
from sustain.probes.client.httpx_transport import call_over_httpx, send_over_httpx
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.clock import RunClock
from sustain.probes.load.drivers import Request, StageContext, run_closed_loop
from sustain.probes.load.quiet_gc import quiet_gc
from sustain.probes.load.senders import api_prepare
from sustain.probes.measure.percentiles import quantile
from sustain.probes.measure.sample import Measurement, Sample
from sustain.probes.protocols.base import Answer, HttpCall
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.sessions import Dialogue
from sustain.probes.workload.spec import Workload

CLIENTS = {"lean": "sustain (lean HTTP/1.1 transport)", "httpx": "baseline: httpx"}
TTFT_MS = 30.0
ITL_MS = 5.0
SPEECH_MS_PER_CHAR = 2.0
SPEECH_CHUNK_MS = 40.0
IMAGE_MS = 20.0
IMAGE_BYTES = 8_192
VIDEO_QUEUE_MS = 120.0
VIDEO_GENERATION_MS = 300.0
VIDEO_BYTES = 65_536
POLL_S = 0.05
"""A video job's poll interval, s."""
P50_MS, P99_MS = 1.0, 3.0
"""The target for the speech and image figures: median and 99th percentile of the error, ms."""

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id")
"""The x-request-id of the request (or video job) the running task measures: its tag and its
t_send (ns)."""

Record = Mapping[str, Any]
"""One line of the simulator's truth log (its times in perf_counter seconds)."""
ErrorOf = Callable[[Measurement, Record, float], "float | None"]
"""error(measurement, truth, t_send_s) -> the figure's error in ms, or None where the
measurement lacks the figure."""


def since_send(figure: Callable[[Measurement], float | None], mark: str) -> ErrorOf:
    """A client figure timed from t_send (ms) minus the time from t_send to the server's
    `mark`."""
    def error(m: Measurement, truth: Record, t_send_s: float) -> float | None:
        value, at = figure(m), truth.get(mark)
        if value is None or at is None:
            return None
        return value - (float(at) - t_send_s) * 1000.0
    return error


def phase(name: str, begins: str, ends: str) -> ErrorOf:
    """A video job's phase `name` (ms) minus the server's time from `begins` to `ends`."""
    def error(m: Measurement, truth: Record, _t_send_s: float) -> float | None:
        value = dict(m.phases_ms or ()).get(name)
        start, end = truth.get(begins), truth.get(ends)
        if value is None or start is None or end is None:
            return None
        return value - (float(end) - float(start)) * 1000.0
    return error


@dataclass(frozen=True, slots=True)
class Figure:
    label: str
    error: ErrorOf
    per_poll: bool = False
    """Its target is one poll interval (a video job's), not the median and p99 bar."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One way of calling a kind, and the figures measured from it."""

    label: str
    kind: ApiKind
    workload: Workload
    figures: tuple[Figure, ...]


FIRST_AUDIO = Figure("first audio byte", since_send(lambda m: m.ttft_ms, "first_audio"))
END = Figure("end", since_send(lambda m: m.e2e_ms, "last_byte"))
VARIANTS: dict[ApiKind, tuple[Variant, ...]] = {
    ApiKind.OPENAI_SPEECH: (
        Variant("speech, raw audio", ApiKind.OPENAI_SPEECH,
                Workload(input_tokens=16, stream_format="audio"), (FIRST_AUDIO, END)),
        Variant("speech, SSE", ApiKind.OPENAI_SPEECH,
                Workload(input_tokens=16, stream_format="sse"), (FIRST_AUDIO, END))),
    ApiKind.OPENAI_IMAGES: (
        Variant("images, streamed (2 partial images)", ApiKind.OPENAI_IMAGES,
                Workload(input_tokens=16, partial_images=2),
                (Figure("first partial image",
                        since_send(lambda m: m.ttft_ms, "first_partial")), END)),
        Variant("images, whole (2 an answer)", ApiKind.OPENAI_IMAGES,
                Workload(input_tokens=16, stream=False, output_images=2),
                (Figure("latency", since_send(lambda m: m.e2e_ms, "last_byte")),))),
    ApiKind.OPENAI_VIDEOS: (
        Variant(f"videos, polled every {POLL_S * 1000:g} ms", ApiKind.OPENAI_VIDEOS,
                Workload(input_tokens=16, poll_interval_s=POLL_S),
                (Figure("queue phase", phase("queue", "created", "started"), per_poll=True),
                 Figure("generation phase", phase("generation", "started", "completed"),
                        per_poll=True),
                 Figure("content phase", phase("content", "content_start", "content_served"),
                        per_poll=True),
                 Figure("end", since_send(lambda m: m.e2e_ms, "content_served"),
                        per_poll=True))),),
}


@dataclass(frozen=True, slots=True)
class Measured:
    request_id: str
    t_send_ns: int
    measurement: Measurement


def tagged_transport(transport: Callable[..., Awaitable[Measurement]]
                     ) -> Callable[..., Awaitable[Measurement]]:
    """`transport`, each request's headers carrying the running task's x-request-id."""
    async def send(encoded: tuple[bytes, dict[str, str]], stream: bool, t_send_ns: int,
                   **options: Any) -> Measurement:
        payload, headers = encoded
        return await transport((payload, {**headers, "x-request-id": REQUEST_ID.get()}),
                               stream, t_send_ns, **options)
    return send


def tagged_call(call: HttpCall) -> HttpCall:
    """`call`, each request of a job's flow carrying the job's x-request-id."""
    async def request(method: str, path: str, payload: bytes, headers: Mapping[str, str], *,
                      keep: int, limit: int) -> Answer:
        return await call(method, path, payload,
                          {**headers, "x-request-id": REQUEST_ID.get()}, keep=keep,
                          limit=limit)
    return request


async def run_variant(base_url: str, variant: Variant, users: int, requests: int, tag: str,
                      client: str) -> tuple[list[Sample], list[Measured]]:
    """A warm-up round, then `requests` requests by `users` users in a closed loop, through
    `client` ("lean": sustain's HTTP/1.1 transport, "httpx": the baseline): the samples, and
    each measured request's id, t_send and measurement."""
    target = Target(base_url=base_url, api_kind=variant.kind, model="sim")
    measured: list[Measured] = []
    async with HttpClients(users) as clients:
        if client == "httpx":
            connections = clients.httpx()
            transport: Callable[..., Awaitable[Measurement]] = partial(
                send_over_httpx, connections, target)
            call: HttpCall = partial(call_over_httpx, connections, target)
        else:
            pool = clients.pool()
            transport = partial(send_over_http1, pool, target)
            call = partial(call_over_http1, pool, target)
        prepare_one = api_prepare(tagged_transport(transport), target, variant.workload, {},
                                  DatasetPolicy(), None, call=tagged_call(call))
        stage = ["warm"]

        def prepare(seq: int, dialogue: Dialogue | None = None) -> Request:
            send = prepare_one(seq, dialogue)

            async def request(t_send_ns: int) -> Measurement:
                request_id = f"{stage[0]}:{t_send_ns}"
                REQUEST_ID.set(request_id)
                measurement = await send(t_send_ns)
                measured.append(Measured(request_id, t_send_ns, measurement))
                return measurement
            return request

        warm = StageContext(clock=RunClock.start(), seqs=itertools.count(1_000_000))
        await run_closed_loop(users, prepare, warm, duration_s=None, max_requests=users)
        measured.clear()
        stage[0] = tag
        ctx = StageContext(clock=RunClock.start(), seqs=itertools.count())
        with quiet_gc():  # as probes.runner.execute does
            samples, _ = await run_closed_loop(users, prepare, ctx, duration_s=None,
                                               max_requests=requests)
    return samples, measured


def stats(values: list[float]) -> str:
    if not values:
        return "- | - | - | -"
    ordered = sorted(values)
    return (f"{quantile(ordered, 0.5):.3f} | {quantile(ordered, 0.99):.3f} | "
            f"{ordered[0]:.3f} | {ordered[-1]:.3f}")


def within(figure: Figure, values: list[float]) -> bool:
    """Whether `values` (ms) meet the figure's target."""
    if not values:
        return False
    ordered = sorted(values)
    if figure.per_poll:
        return max(abs(ordered[0]), abs(ordered[-1])) <= POLL_S * 1000.0
    p50, p99 = quantile(ordered, 0.5), quantile(ordered, 0.99)
    return p50 is not None and p99 is not None and p50 <= P50_MS and p99 <= P99_MS


def read_truth(log: Path) -> tuple[dict[str, Record], Counter[str]]:
    """Each request's (job's) line of the truth log by request id, and how many lines each id
    has (a job the client gave up adds a line for its deletion)."""
    truth: dict[str, Record] = {}
    lines: Counter[str] = Counter()
    for line in log.read_text().splitlines():
        found = json.loads(line)
        request_id = found.get("request_id")
        if request_id:
            lines[request_id] += 1
            truth.setdefault(request_id, found)
    return truth, lines


def accounting(samples: list[Sample], measured: list[Measured], requests: int,
               lines: Counter[str]) -> tuple[str, bool]:
    """`sent/samples/successes/logged` for the table, and whether every request was accounted
    for: a sample each, each one successful, each logged exactly once by the server."""
    ok = sum(1 for s in samples if s.measurement.error_class is None)
    logged = sum(1 for m in measured if lines[m.request_id] == 1)
    whole = len(samples) == len(measured) == ok == logged == requests
    return f"{requests}/{len(samples)}/{ok}/{logged}", whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default=",".join(kind.value for kind in VARIANTS),
                        help="comma-separated media api kinds to measure")
    parser.add_argument("--users", type=int, default=8, help="users of the closed loop")
    parser.add_argument("--requests", type=int, default=160,
                        help="measured requests (video jobs) per kind's variant and client")
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop",
                        help="event loop of the client (sustain serve runs on uvloop)")
    args = parser.parse_args()
    kinds = [ApiKind(kind) for kind in args.kinds.split(",")]
    unknown = [str(kind) for kind in kinds if kind not in VARIANTS]
    if unknown:
        parser.error(f"not a media kind: {', '.join(unknown)}")
    pin_to(0)
    runs: dict[tuple[str, str], tuple[Variant, list[Sample], list[Measured]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "truth.jsonl"
        with Simulator([
                "--ttft-ms", f"{TTFT_MS:g}", "--itl-ms", f"{ITL_MS:g}",
                "--speech-audio-ms-per-char", f"{SPEECH_MS_PER_CHAR:g}",
                "--speech-chunk-ms", f"{SPEECH_CHUNK_MS:g}", "--image-ms", f"{IMAGE_MS:g}",
                "--image-bytes", str(IMAGE_BYTES), "--video-queue-ms", f"{VIDEO_QUEUE_MS:g}",
                "--video-generation-ms", f"{VIDEO_GENERATION_MS:g}", "--video-bytes",
                str(VIDEO_BYTES), "--truth-log", str(log)], cpu=1) as sim:
            for kind in kinds:
                for index, variant in enumerate(VARIANTS[kind]):
                    for client in CLIENTS:
                        tag = f"{kind}-{index}-{client}"
                        level = run_variant(sim.base_url, variant, args.users, args.requests,
                                            tag, client)
                        outcome = uvloop.run(level) if args.loop == "uvloop" \
                            else asyncio.run(level)
                        runs[(variant.label, client)] = (variant, *outcome)
        truth, lines = read_truth(log)  # the simulator has stopped: every line is written
    rows = []
    worst_p99: dict[str, float] = {}  # per client: the highest p99 of a median/p99 figure
    worst_poll: dict[str, float] = {}  # per client: the largest |error| of a video figure
    accounted = dict.fromkeys(CLIENTS, 0)
    sent = dict.fromkeys(CLIENTS, 0)
    missed = []
    for (label, client), (variant, samples, measured) in runs.items():
        counts, whole = accounting(samples, measured, args.requests, lines)
        sent[client] += args.requests
        accounted[client] += args.requests if whole else 0
        if not whole:
            missed.append(f"{label} ({client})")
        for figure in variant.figures:
            values = [error for m in measured
                      if m.measurement.error_class is None and m.request_id in truth
                      and (error := figure.error(m.measurement, truth[m.request_id],
                                                 m.t_send_ns / 1e9)) is not None]
            if values and figure.per_poll:
                worst_poll[client] = max(worst_poll.get(client, 0.0),
                                         max(abs(v) for v in values))
            elif values:
                worst_p99[client] = max(worst_p99.get(client, 0.0),
                                        quantile(sorted(values), 0.99) or 0.0)
            rows.append(f"| {label} | {CLIENTS[client]} | {counts} | "
                        f"{'yes' if whole else 'NO'} | {figure.label} | {len(values)} | "
                        f"{stats(values)} | {'yes' if within(figure, values) else 'no'} |")
    table = (
        f"Error in ms (client figure minus the server's truth) at {args.users} users, median | "
        "p99 | min | max; requests as sent/samples/successful/logged once by the server:\n\n"
        "| kind | client | requests | all accounted for | figure | n | median | p99 | min | "
        "max | within target |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
        + "\n".join(rows))
    command = (f"python benchmarks/media_accuracy.py --kinds {args.kinds} --users {args.users} "
               f"--requests {args.requests} --loop {args.loop}")
    target = (f"Target: median <= {P50_MS:g} ms and p99 <= {P99_MS:g} ms for the speech and "
              "image figures; each video phase and the video's end within one poll interval "
              f"({POLL_S * 1000:g} ms) of the server's. Every request accounted for.")
    if missed:
        target += " Not all accounted for: " + ", ".join(missed) + "."
    if args.no_record:
        print(table + "\n\n" + target)
        return
    ours, base = worst_p99.get("lean", 0.0), worst_p99.get("httpx", 0.0)
    headline = ", ".join(
        ([f"worst error p99 {ours:.3f} ms (speech and image figures)"] if "lean" in worst_p99
         else [])
        + ([f"video phases max |error| {worst_poll['lean']:.1f} ms (poll "
            f"{POLL_S * 1000:g} ms)"] if "lean" in worst_poll else [])
        + [f"{accounted['lean']}/{sent['lean']} requests accounted for"])
    ratio = (f"httpx's worst p99 {base:.3f} ms, "
             + (f"{base / ours:.1f}x sustain's" if ours > 0 else "sustain's is 0")) \
        if "lean" in worst_p99 else \
        f"httpx's video max |error| {worst_poll.get('httpx', 0.0):.1f} ms"
    record("media accuracy: speech, image and video figures against server-side truth",
           command, table + "\n\n" + target, headline=headline, ratio=ratio)


if __name__ == "__main__":
    main()
