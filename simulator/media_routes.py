"""The simulator's media routes: text to speech (`POST /v1/audio/speech`, speech.py), image
generation (`POST /v1/images/generations`, image_generation.py) and video generation as
asynchronous jobs (`POST /v1/videos`, `GET /v1/videos/{id}[/content]`, `DELETE`: videos.py),
each answering with known latencies and writing its server-side times to the truth log. A base
of the simulator's app (app.py), which gives them its config, faults, jitter and truth log."""

from __future__ import annotations

import asyncio
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import IO, Any, TypeVar

from sustain.simulator.asgi import (
    Receive,
    Scope,
    Send,
    request_id,
    send_error,
    send_json,
    send_raw,
    sleep_until,
)
from sustain.simulator.config import AT_ONCE, Fault, SimulatorConfig
from sustain.simulator.image_generation import (
    ImagesRequest,
    completed_event,
    partial_event,
    read_images,
    whole_answer,
)
from sustain.simulator.image_generation import error_event as image_error_event
from sustain.simulator.metrics import EngineMetrics
from sustain.simulator.speech import (
    FORMATS,
    SpeechRequest,
    chunk_sizes,
    delta_event,
    done_event,
    error_event,
    read_speech,
    silence,
    wav_header,
)
from sustain.simulator.videos import (
    CONTENT_CHUNK_BYTES,
    VideoJob,
    VideoJobs,
    chunk,
    read_video,
)

T = TypeVar("T")


class MediaRoutes(ABC):
    """The media kinds' handlers; the app provides what they share with every route."""

    config: SimulatorConfig
    metrics: EngineMetrics
    _slots: asyncio.Semaphore | None
    _videos: VideoJobs
    _truth: IO[str] | None

    @abstractmethod
    def _fault(self, scope: Scope) -> Fault:
        """The fault this request gets (its header's, else drawn at the configured rate)."""

    @abstractmethod
    async def _accepted(self, receive: Receive, send: Send, fault: Fault,
                        form: str | None = None) -> dict[str, Any] | None:
        """The request's body once no fault answered it; None when one did."""

    @abstractmethod
    def _jitter(self, median_ms: float, sigma: float) -> float:
        """Seconds: the median, times a lognormal factor when sigma > 0."""

    @abstractmethod
    def _log_truth(self, scope: Scope, answer_id: str, **marks: float | None) -> None:
        """One line of the truth log, when kept."""

    async def _read(self, receive: Receive, send: Send, fault: Fault,
                    read: Callable[[dict[str, Any]], T | str]) -> T | None:
        """The request `read` makes of the body, once no fault answered first; None when one
        did, or when `read` found the body wrong (a 400 with its words)."""
        body = await self._accepted(receive, send, fault)
        if body is None:
            return None
        request = read(body)
        if isinstance(request, str):
            await send_error(send, 400, request)
            return None
        return request

    async def _speech(self, scope: Scope, receive: Receive, send: Send,
                      arrival: float) -> None:
        """Speech: its audio streamed in chunks (raw bytes or SSE deltas), the first due
        ttft_ms after the start, each next one itl_ms later (FIFO behind max_batch like a
        generation). Faults: the status ones and `hang` before it; `empty` no audio;
        `truncate` the connection closed half way (raw) or no done event (SSE);
        `error_event` and `malformed` half way (SSE); `wrong_content_type` text/plain."""
        config = self.config
        fault = self._fault(scope)
        request = await self._read(receive, send, fault, read_speech)
        if request is None:
            return
        sizes = [] if fault is Fault.EMPTY else chunk_sizes(
            len(request.text), config.speech_audio_ms_per_char, config.speech_chunk_ms)
        self.metrics.admitted(len(request.text.split()), None)
        slots = self._slots
        if slots is not None:
            with self.metrics.waiting():
                await slots.acquire()
        try:
            with self.metrics.running():
                await self._speak(scope, send, request, sizes, arrival, fault)
        finally:
            if slots is not None:
                slots.release()

    async def _speak(self, scope: Scope, send: Send, request: SpeechRequest,
                     sizes: list[int], arrival: float, fault: Fault) -> None:
        """Send the audio's chunks, each when due (its last write ends the body), then log
        when the first audio and the last byte were written."""
        config = self.config
        start = time.perf_counter()
        due = first_due = start + self._jitter(config.ttft_ms, config.ttft_sigma)
        media = b"text/plain" if fault is Fault.WRONG_CONTENT_TYPE else \
            b"text/event-stream" if request.sse else FORMATS[request.audio_format]
        middle = len(sizes) // 2
        parts: list[tuple[float, bytes, int]] = []  # (due, bytes, audio bytes in them)
        ended = True
        for k, size in enumerate(sizes):
            if k:
                due += 0.0 if fault in AT_ONCE else self._jitter(config.itl_ms, config.itl_sigma)
            if fault is Fault.TRUNCATE and k >= max(middle, 1):
                ended = False
                break
            if request.sse and k == middle and fault is Fault.MALFORMED:
                parts.append((due, b'data: {"type": "speech.audio.delta", "audio": \n\n', 0))
            elif request.sse and k == middle and fault is Fault.ERROR_EVENT:
                parts.append((due, error_event(), 0))
                ended = False
                break
            elif request.sse:
                parts.append((due, delta_event(size), size))
            elif k == 0 and request.audio_format == "wav":
                parts.append((due, wav_header(sum(sizes)) + silence(size), size))
            else:
                parts.append((due, silence(size), size))
        if request.sse and ended:
            parts.append((due, done_event(len(request.text), sum(a for *_, a in parts)), 0))
        # whether the body ends: a raw truncated one never does (uvicorn closes the
        # connection mid-body once the app returns)
        close = request.sse or fault is not Fault.TRUNCATE
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", media), (b"cache-control", b"no-cache")]})
        marks: dict[str, float] = {}
        for index, (at, data, audio) in enumerate(parts):
            await sleep_until(at)
            await send({"type": "http.response.body", "body": data,
                        "more_body": not (close and index == len(parts) - 1)})
            now = time.perf_counter()
            if audio:
                marks.setdefault("first_audio", now)
            marks["last_byte"] = now
        if not parts and close:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            marks["last_byte"] = time.perf_counter()
        self._log_truth(scope, f"speech-{id(parts):x}", arrival=arrival, start=start,
                        first_audio_due=first_due, first_audio=marks.get("first_audio"),
                        last_byte=marks.get("last_byte"),
                        audio_bytes=sum(audio for *_, audio in parts), chunks=len(parts))

    async def _images(self, scope: Scope, receive: Receive, send: Send,
                      arrival: float) -> None:
        """Image generation: `n` images one after the other, image_ms each (FIFO behind
        max_batch like a generation), answered whole once all are done, or streamed: each
        image's partial images at even fractions of its time, then the image. Faults: the
        status ones and `hang` before it; `empty` no image; `truncate` the connection closed
        half way (whole) or the stream ended before the first image (streamed);
        `error_event` an error in place of the first image; `malformed` bad JSON;
        `wrong_content_type` a stream as text/plain."""
        fault = self._fault(scope)
        request = await self._read(receive, send, fault, read_images)
        if request is None:
            return
        self.metrics.admitted(len(request.prompt.split()), None)
        slots = self._slots
        if slots is not None:
            with self.metrics.waiting():
                await slots.acquire()
        try:
            with self.metrics.running():
                if request.stream:
                    await self._stream_images(scope, send, request, arrival, fault)
                else:
                    await self._whole_images(scope, send, request, arrival, fault)
        finally:
            if slots is not None:
                slots.release()

    async def _whole_images(self, scope: Scope, send: Send, request: ImagesRequest,
                            arrival: float, fault: Fault) -> None:
        config = self.config
        start = time.perf_counter()
        await sleep_until(start + request.count * config.image_ms / 1000.0)
        images = 0 if fault is Fault.EMPTY else request.count
        if fault is Fault.MALFORMED:
            await send_raw(send, b'{"data": [{"b64_json": "')
        elif fault is Fault.TRUNCATE:
            body = json.dumps(whole_answer(request, config.image_bytes, images)).encode()
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body[:len(body) // 2],
                        "more_body": True})
        else:
            await send_json(send, 200, whole_answer(request, config.image_bytes, images))
        done = time.perf_counter()
        self._log_truth(scope, f"images-{id(request):x}", arrival=arrival, start=start,
                        first_byte=done, first_image=None, first_partial=None,
                        last_byte=done, images=images)
        # a truncated answer never ends: uvicorn closes the connection mid-body

    async def _stream_images(self, scope: Scope, send: Send, request: ImagesRequest,
                             arrival: float, fault: Fault) -> None:
        config = self.config
        start = time.perf_counter()
        image_s = config.image_ms / 1000.0
        parts: list[tuple[float, bytes, str | None]] = []  # (due, bytes, partial/image/None)
        for index in range(0 if fault is Fault.EMPTY else request.count):
            begins = start + index * image_s
            for partial in range(request.partial_images):
                due = begins + image_s * (partial + 1) / (request.partial_images + 1)
                parts.append((due, partial_event(index, partial, config.image_bytes),
                              "partial"))
            if index == 0 and fault is Fault.TRUNCATE:
                break
            if index == 0 and fault is Fault.ERROR_EVENT:
                parts.append((begins + image_s, image_error_event(), None))
                break
            if index == 0 and fault is Fault.MALFORMED:
                parts.append((begins + image_s, b'data: {"type": "image_generation.\n\n', None))
                break
            parts.append((begins + image_s, completed_event(request, index, config.image_bytes),
                          "image"))
        media = b"text/plain" if fault is Fault.WRONG_CONTENT_TYPE else b"text/event-stream"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", media), (b"cache-control", b"no-cache")]})
        marks: dict[str, float] = {}
        for index, (due, data, what) in enumerate(parts):
            await sleep_until(due)
            await send({"type": "http.response.body", "body": data,
                        "more_body": index < len(parts) - 1})
            now = time.perf_counter()
            if what is not None:
                marks.setdefault("first_image", now)
                marks.setdefault(f"first_{what}", now)
            marks["last_byte"] = now
        if not parts:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            marks["last_byte"] = time.perf_counter()
        self._log_truth(scope, f"images-{id(request):x}", arrival=arrival, start=start,
                        first_image=marks.get("first_image"),
                        first_partial=marks.get("first_partial"),
                        last_byte=marks.get("last_byte"),
                        images=sum(1 for *_, what in parts if what == "image"))

    async def _create_video(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A video job, created `queued` and answered at once (its status then follows the
        clock: videos.py). Faults: the status ones before it; `error_event` a job that
        fails; `hang` a job that stays in progress for hang_s."""
        config = self.config
        fault = self._fault(scope)
        asked = await self._read(receive, send, Fault.NONE if fault is Fault.HANG else fault,
                                 read_video)
        if asked is None:
            return
        generation_s = config.hang_s if fault is Fault.HANG else \
            config.video_generation_ms / 1000.0
        job = self._videos.create(*asked, queue_s=config.video_queue_ms / 1000.0,
                                  generation_s=generation_s,
                                  fails=fault is Fault.ERROR_EVENT,
                                  request_id=request_id(scope))
        await send_json(send, 200, job.view(time.perf_counter()))

    async def _video(self, send: Send, arrival: float, job_id: str,
                     content: bool, *, delete: bool) -> None:
        """A job's status, its content (once completed: 409 before) or its deletion; the
        truth log has the job's times once it ended (its content served, its failure told)
        and a line for each deletion."""
        job = self._videos.delete(job_id) if delete and not content else \
            self._videos.get(job_id)
        if job is None or (delete and content):
            await send_error(send, 404 if job is None else 405,
                         "no such video" if job is None else "method not allowed")
            return
        if delete:
            await send_json(send, 200, {"id": job.id, "object": "video.deleted", "deleted": True})
            self._log_job(job, deleted=time.perf_counter())
            return
        status = job.status(arrival)
        if not content:
            job.polls += 1
            await send_json(send, 200, job.view(arrival))
            if status == "failed" and not job.logged:
                self._log_job(job, failed=job.completed)
            return
        if status != "completed":
            await send_error(send, 409, f"video is {status}, not completed")
            return
        size = self.config.video_bytes
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"video/mp4"), (b"content-length", str(size).encode())]})
        left = size
        while left > 0:
            piece = min(left, CONTENT_CHUNK_BYTES)
            left -= piece
            await send({"type": "http.response.body", "body": chunk(piece),
                        "more_body": left > 0})
        if not job.logged:
            self._log_job(job, content_start=arrival, content_served=time.perf_counter())

    def _log_job(self, job: VideoJob, **marks: float) -> None:
        """The job's line of the truth log (when kept): its create's x-request-id, when it
        was created, ran and completed (or failed), how often it was polled, and `marks`."""
        job.logged = True
        if self._truth is not None:
            self._truth.write(json.dumps({
                "id": job.id, "request_id": job.request_id, "created": job.created,
                "started": job.started, "completed": job.completed, "polls": job.polls,
                **marks}) + "\n")
