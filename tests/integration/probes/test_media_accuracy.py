"""The media kinds at 8 users against the simulator's own record of each request, over real
loopback HTTP through the lean transport: every request is accounted for (a sample each, each
successful, each logged once by the server), no figure is below what the simulator's schedule
allows for that request, the counts the client reports are the ones the server sent, and a
video job's phases follow the server's transitions within a wide margin.

The simulator runs as its own process (`sustain simulate`) and logs, for every request it
answered, when it started it and wrote each part of its answer (perf_counter seconds: the same
monotonic clock as the client on this machine). Each request carries its t_send (ns) as its
`x-request-id` (a video job: every request of its flow). A client reads a byte only after the
server wrote it, and the server writes it no earlier than its schedule (its start plus the
configured delays), so each figure timed from t_send is at least the server's start minus
t_send plus the schedule: lower bounds that hold however loaded the machine is. How close the
figures come to the server's clock is measured, not asserted: benchmarks/media_accuracy.py.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.http1 import call_over_http1, send_over_http1
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.clock import RunClock
from sustain.probes.load.drivers import StageContext, run_closed_loop
from sustain.probes.load.senders import api_prepare
from sustain.probes.measure.sample import JOB_PHASES, Measurement, Sample
from sustain.probes.protocols.base import Answer, HttpCall
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload
from tests.processes import SustainProcess, free_port

USERS = 8
REQUESTS = 48
JOBS = 24
TTFT_MS = 30.0
ITL_MS = 5.0
SPEECH_MS_PER_CHAR = 2.0
SPEECH_CHUNK_MS = 40.0
AUDIO_BYTES_PER_MS = 48
"""The simulator's speech: 24 kHz, 16-bit mono."""
IMAGE_MS = 20.0
IMAGE_BYTES = 8_192
VIDEO_QUEUE_MS = 400.0
VIDEO_GENERATION_MS = 850.0
VIDEO_BYTES = 65_536
POLL_S = 0.1
PHASE_MARGIN_MS = 3 * POLL_S * 1000
"""How far a video phase may be from the server's transitions: a poll interval by design
(a transition is seen at the next poll), the rest room for a loaded machine; under the
queue's length, so a phase missed or taken for the other still fails."""

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id")
"""The t_send (ns) of the request (or job) the running task is measuring."""


@dataclass(frozen=True, slots=True)
class Measured:
    t_send_ns: int
    measurement: Measurement

    def since_send_ms(self, server_s: float) -> float:
        """Milliseconds from this request's t_send to the server's time `server_s`."""
        return (server_s - self.t_send_ns / 1e9) * 1000.0


@pytest.fixture(scope="module")
def truth_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("truth") / "truth.jsonl"


@pytest.fixture(scope="module")
def sim(truth_log: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`sustain simulate` in its own process, logging its truth; its API root."""
    port = free_port()
    log = tmp_path_factory.mktemp("simulator") / "simulator.log"
    args = ["simulate", "--port", str(port), "--ttft-ms", str(TTFT_MS), "--itl-ms",
            str(ITL_MS), "--speech-audio-ms-per-char", str(SPEECH_MS_PER_CHAR),
            "--speech-chunk-ms", str(SPEECH_CHUNK_MS), "--image-ms", str(IMAGE_MS),
            "--image-bytes", str(IMAGE_BYTES), "--video-queue-ms", str(VIDEO_QUEUE_MS),
            "--video-generation-ms", str(VIDEO_GENERATION_MS), "--video-bytes",
            str(VIDEO_BYTES), "--truth-log", str(truth_log)]
    with SustainProcess(args, log) as process:
        process.wait_http(f"http://127.0.0.1:{port}/v1/models")
        yield f"http://127.0.0.1:{port}/v1"


def tagged_transport(transport: Callable[..., Awaitable[Measurement]]
                     ) -> Callable[..., Awaitable[Measurement]]:
    """`transport`, each request's headers carrying its t_send as its x-request-id."""
    async def send(encoded: tuple[bytes, dict[str, str]], stream: bool, t_send_ns: int,
                   **options: Any) -> Measurement:
        payload, headers = encoded
        return await transport((payload, {**headers, "x-request-id": str(t_send_ns)}),
                               stream, t_send_ns, **options)
    return send


def tagged_call(call: HttpCall) -> HttpCall:
    """`call`, each request carrying the t_send of the job it belongs to."""
    async def request(method: str, path: str, payload: bytes, headers: Mapping[str, str], *,
                      keep: int, limit: int) -> Answer:
        return await call(method, path, payload,
                          {**headers, "x-request-id": REQUEST_ID.get()}, keep=keep,
                          limit=limit)
    return request


async def measure(base_url: str, kind: ApiKind, workload: Workload, requests: int = REQUESTS
                  ) -> tuple[list[Sample], list[Measured]]:
    """A warm-up round, then `requests` requests by USERS users in a closed loop: the
    samples, and each request's t_send with its measurement."""
    target = Target(base_url=base_url, api_kind=kind, model="sim")
    measured: list[Measured] = []
    async with HttpClients(USERS) as clients:
        pool = clients.pool()
        prepare_one = api_prepare(
            tagged_transport(partial(send_over_http1, pool, target)), target, workload, {},
            DatasetPolicy(), None, call=tagged_call(partial(call_over_http1, pool, target)))

        def prepare(seq: int, dialogue: Any = None) -> Callable[[int], Awaitable[Measurement]]:
            send = prepare_one(seq, dialogue)

            async def request(t_send_ns: int) -> Measurement:
                REQUEST_ID.set(str(t_send_ns))
                measurement = await send(t_send_ns)
                measured.append(Measured(t_send_ns, measurement))
                return measurement
            return request

        warm = StageContext(clock=RunClock.start(), seqs=itertools.count(1_000_000))
        await run_closed_loop(USERS, prepare, warm, duration_s=None, max_requests=USERS)
        measured.clear()
        ctx = StageContext(clock=RunClock.start(), seqs=itertools.count())
        samples, _ = await run_closed_loop(USERS, prepare, ctx, duration_s=None,
                                           max_requests=requests)
    return samples, measured


async def accounted(log: Path, samples: list[Sample], measured: list[Measured],
                    requests: int = REQUESTS) -> dict[int, dict[str, Any]]:
    """Every request sent is a sample, every one succeeded (the simulator injects no fault
    here), and the server logged each exactly once: its record of each, by t_send (ns). It
    writes a record after its answer's last byte, which the client may have read first."""
    assert len(samples) == len(measured) == requests
    failed = [s.measurement.error_detail for s in samples if s.measurement.error_class]
    assert failed == []
    wanted = {str(m.t_send_ns) for m in measured}
    assert len(wanted) == requests
    lines: Counter[str] = Counter()
    found: dict[int, dict[str, Any]] = {}
    for _ in range(100):
        lines.clear()
        for line in (await asyncio.to_thread(log.read_text)).splitlines():
            record = json.loads(line)
            if record.get("request_id") in wanted:
                lines[record["request_id"]] += 1
                found[int(record["request_id"])] = record
        if len(lines) == len(wanted):
            break
        await asyncio.sleep(0.02)
    assert lines == dict.fromkeys(wanted, 1), "the server logged every request once"
    return found


def audio_chunks(audio_bytes: int) -> int:
    """How many chunks the simulator cut `audio_bytes` of audio into."""
    return math.ceil(audio_bytes / (SPEECH_CHUNK_MS * AUDIO_BYTES_PER_MS))


@pytest.mark.parametrize("stream_format", ["audio", "sse"])
async def test_speech_at_8_users_is_all_accounted_for_and_never_ahead_of_the_server(
        sim: str, truth_log: Path, stream_format: str) -> None:
    workload = Workload(input_tokens=16, stream_format=stream_format)  # type: ignore[arg-type]
    samples, measured = await measure(sim, ApiKind.OPENAI_SPEECH, workload)
    truth = await accounted(truth_log, samples, measured)
    for m in measured:
        server, got = truth[m.t_send_ns], m.measurement
        assert got.input_chars is not None
        assert server["audio_bytes"] == round(got.input_chars * SPEECH_MS_PER_CHAR) * \
            AUDIO_BYTES_PER_MS  # the text the client sent is what the server spoke
        assert got.audio_s == pytest.approx(server["audio_bytes"] / AUDIO_BYTES_PER_MS / 1000)
        first_due_ms = m.since_send_ms(server["first_audio_due"])
        assert first_due_ms >= TTFT_MS
        assert got.ttft_ms is not None
        assert got.ttft_ms >= first_due_ms
        assert got.e2e_ms >= first_due_ms + (audio_chunks(server["audio_bytes"]) - 1) * ITL_MS


async def test_streamed_images_at_8_users_are_all_accounted_for_and_never_ahead_of_the_server(
        sim: str, truth_log: Path) -> None:
    workload = Workload(input_tokens=16, partial_images=2)
    samples, measured = await measure(sim, ApiKind.OPENAI_IMAGES, workload)
    truth = await accounted(truth_log, samples, measured)
    for m in measured:
        server, got = truth[m.t_send_ns], m.measurement
        assert got.items == server["images"] == 1
        start_ms = m.since_send_ms(server["start"])
        assert got.ttft_ms is not None
        assert got.ttft_ms >= start_ms + IMAGE_MS / 3  # the first of two partial images
        assert got.e2e_ms >= start_ms + IMAGE_MS


async def test_whole_images_at_8_users_are_all_accounted_for_and_never_ahead_of_the_server(
        sim: str, truth_log: Path) -> None:
    workload = Workload(input_tokens=16, stream=False, output_images=2)
    samples, measured = await measure(sim, ApiKind.OPENAI_IMAGES, workload)
    truth = await accounted(truth_log, samples, measured)
    for m in measured:
        server, got = truth[m.t_send_ns], m.measurement
        assert got.items == server["images"] == 2
        assert got.ttft_ms is None
        assert got.e2e_ms >= m.since_send_ms(server["start"]) + 2 * IMAGE_MS


async def test_video_jobs_at_8_users_are_all_accounted_for_and_follow_the_servers_phases(
        sim: str, truth_log: Path) -> None:
    workload = Workload(input_tokens=16, poll_interval_s=POLL_S)
    samples, measured = await measure(sim, ApiKind.OPENAI_VIDEOS, workload, JOBS)
    truth = await accounted(truth_log, samples, measured, JOBS)
    for m in measured:
        server, got = truth[m.t_send_ns], m.measurement
        assert "deleted" not in server  # nothing given up, so nothing cancelled
        assert got.phases_ms is not None
        phases = dict(got.phases_ms)
        assert tuple(phases) == JOB_PHASES
        job_s = server["completed"] - server["created"]
        # polled on its schedule from the create's answer: the polls before the last one all
        # came before the job completed, one interval apart at least
        assert 1 <= server["polls"] <= math.floor(job_s / POLL_S) + 1
        # the content was fetched after a poll saw the job completed, so never before it
        assert got.e2e_ms >= m.since_send_ms(server["completed"])
        assert got.e2e_ms >= VIDEO_QUEUE_MS + VIDEO_GENERATION_MS
        assert got.e2e_ms >= sum(phases.values())
        assert phases["content"] >= 0
        assert abs(phases["queue"] - (server["started"] - server["created"]) * 1000) <= \
            PHASE_MARGIN_MS
        assert abs(phases["generation"] - (server["completed"] - server["started"]) * 1000) \
            <= PHASE_MARGIN_MS
