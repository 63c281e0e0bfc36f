"""The OpenAI video generation protocol, an asynchronous job: `POST /v1/videos` (`model`,
`prompt`, and `seconds` or `size` where the workload's extra_body gives them) answers a job
(`{"id", "status": "queued", "progress"}`); `GET /v1/videos/{id}` is polled every
`poll_interval_s` (on a schedule fixed from the create's answer, so late polls do not drift;
the slots a slow poll missed are skipped, not caught up in a burst) until its status is
`completed` or `failed` (`queued`, then `in_progress`, with `progress`); then
`GET /v1/videos/{id}/content` fetches the video, its bytes counted and dropped, at most
MAX_VIDEO_BYTES. The prompt is the request's prompt (synthetic words, the fixed prompt or a
dataset's line).

One job is one sample (its polls are never samples): E2E runs from t_send (the create sent)
to the content's last byte, and Measurement.phases_ms holds `queue` (from the create's answer
to the first poll that saw the job `in_progress` or `completed`), `generation` (from then to
the poll that saw it `completed`) and `content` (the download); the first two are therefore
exact to within one poll interval. A job has no first token (ttft_ms is None).

A job reported `failed` is `job_failed`; one that has not completed within the endpoint's
total timeout is `timeout_total`, and is cancelled (`DELETE /v1/videos/{id}`, best effort,
within DELETE_TIMEOUT_S, its outcome not measured), as is a job given up for any other
reason than its own failure. A status or a job id that is not the protocol's is `protocol`,
as is an answer that is neither a 2xx nor an error status (a redirect, never followed).

The endpoint's answers are read as hostile: a job's answers are read up to JOB_BODY_LIMIT,
its content counted up to MAX_VIDEO_BYTES; polls go out at most once an interval and end at
the total timeout; the job id the endpoint chose goes into the polls' paths only when it is
one plain path segment (JOB_ID: no `/`, `?`, `#`, `%`, control character, no `.` or `..`,
which a client would resolve to another path), else the job is `protocol` before any poll.

This kind's sample is its `exchange`, over the sender's plain call (the lean pool or httpx):
the one flow of several requests in the registry.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from sustain.probes.client.expected import ExpectedItems
from sustain.probes.client.status import error_class_for_status
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.measure.sample import NS_PER_MS, ErrorClass, Measurement
from sustain.probes.protocols.base import (
    Answer,
    ApiProtocol,
    CallFailed,
    HttpCall,
    KindSettings,
)
from sustain.probes.protocols.streaming import (
    DEADLINE_EXCEEDED,
    Deadlines,
    EncodedRequest,
    StreamState,
    failure,
    from_state,
    json_object,
)

JOB_BODY_LIMIT = 1024 * 1024
"""Bytes of a job's JSON answer read (a few hundred, as OpenAI writes them)."""
MAX_VIDEO_BYTES = 512 * 1024 * 1024
"""Most bytes of one video's content read, counted and dropped (a generated clip of seconds
is tens of MiB); past them the job is `protocol`, the rest unread."""
DELETE_TIMEOUT_S = 5.0
"""How long a job given up is given to be cancelled (its DELETE is not measured)."""
JOB_ID = re.compile(r"^(?!\.{1,2}\Z)[A-Za-z0-9._~-]{1,256}\Z")
"""A job id that can go in a URL's path as it is: unreserved characters only, to the very end
(`$` would let a trailing newline through), and not a dot segment (`.`, `..`), which URL
clients resolve away (`/v1/videos/../content` is `/v1/content`)."""
RUNNING = frozenset({"in_progress", "completed"})
STATUSES = frozenset({"queued", "in_progress", "completed", "failed"})
MAX_DETAIL_CHARS = 120


@dataclass(slots=True)
class Job:
    """How far one job got, timed on the client's clock (perf_counter_ns)."""

    t_send_ns: int
    id: str | None = None
    created_ns: int | None = None
    """When the create's answer arrived."""
    running_ns: int | None = None
    """When a poll first saw the job running (or done)."""
    completed_ns: int | None = None
    """When a poll saw it completed."""
    status: int | None = None
    """The HTTP status of the last answer."""
    failed: bool = False


class JobEnded(Exception):
    """The job's flow ended before its content: its measurement."""

    def __init__(self, measurement: Measurement) -> None:
        super().__init__(measurement.error_detail)
        self.measurement = measurement


def ended(job: Job, error: ErrorClass, detail: str, end_ns: int | None = None) -> JobEnded:
    return JobEnded(from_state(StreamState(), job.t_send_ns, end_ns or time.perf_counter_ns(),
                               job.status, error, detail))


def answered(answer: Answer, job: Job, what: str) -> None:
    """An answer of the job's flow with a 2xx status; else the job ends, by the status's
    class, or as `protocol` for a status that is neither a success nor an error (a redirect,
    which is not followed: its body is no job and no video)."""
    job.status = answer.status
    failed = error_class_for_status(answer.status)
    if failed is None and not 200 <= answer.status < 300:
        failed = ErrorClass.PROTOCOL
    if failed is not None:
        raise ended(job, failed, f"HTTP {answer.status} {what}", answer.end_ns)


def job_status(answer: Answer, job: Job, what: str) -> dict[str, Any]:
    """A job's JSON answer, checked: a 2xx status, an object with a known `status` (a string:
    one of another type, a list or an object, is no status)."""
    answered(answer, job, what)
    payload = json_object(answer.body)
    if isinstance(payload, str):
        raise ended(job, ErrorClass.PROTOCOL, f"{payload} {what}", answer.end_ns)
    status = payload.get("status")
    if isinstance(status, list | dict):  # named by its type: str() of a list nested 1,000
        raise ended(job, ErrorClass.PROTOCOL,  # deep raises RecursionError
                    f"job status of type {type(status).__name__} {what}", answer.end_ns)
    if not isinstance(status, str) or status not in STATUSES:
        raise ended(job, ErrorClass.PROTOCOL, f"job status {str(status)[:40]!r} {what}",
                    answer.end_ns)
    return payload


def failure_detail(payload: Mapping[str, Any]) -> str:
    """A failed job's reason, short: its error's code (or message), if it gave one as text or
    a number (anything else is not written out: str() of a list nested 1,000 deep raises
    RecursionError)."""
    error = payload.get("error")
    reasons = (error.get("code"), error.get("message")) if isinstance(error, dict) else ()
    reason = next((str(value)[:MAX_DETAIL_CHARS] for value in reasons
                   if value and isinstance(value, str | int) and not isinstance(value, bool)),
                  None)
    return "job failed" + (f": {reason}" if reason else "")


class OpenAIVideos(ApiProtocol):
    kind: ClassVar[ApiKind] = ApiKind.OPENAI_VIDEOS
    path: ClassVar[str] = "/videos"
    otel_operation: ClassVar[str | None] = "generate_content"
    otel_provider: ClassVar[str | None] = "openai"
    first_token: ClassVar[bool] = False
    exchanged: ClassVar[bool] = True
    workload_fields: ClassVar[frozenset[str]] = frozenset({"poll_interval_s"})
    figures: ClassVar[tuple[str, ...]] = ("phases_ms",)
    """A job's queue, generation and content times (sample.JOB_PHASES); E2E is the whole."""

    def body_for(self, body: dict[str, Any],
                 settings: KindSettings) -> dict[str, Any]:  # noqa: ARG002 - its poll only
        """`model` and `prompt` (and extra_body's `seconds`, `size`); no output cap, no
        streaming."""
        for key in ("max_tokens", "stream", "stream_options"):
            body.pop(key, None)
        return body

    def whole(self, raw: bytes, t_send_ns: int, end: int, status: int,
              keep_reply: bool = False, expect: ExpectedItems | None = None) -> Measurement:
        """Never called: a job is measured by its exchange."""
        raise NotImplementedError("a video job is measured by its exchange")

    async def exchange(self, call: HttpCall, target: Target, encoded: EncodedRequest,
                       settings: KindSettings, t_send_ns: int) -> Measurement:
        """Create the job, poll it until it ended, fetch its content (see the module)."""
        job = Job(t_send_ns)
        deadlines = Deadlines.from_t_send(target, t_send_ns, asyncio.get_running_loop())
        try:
            async with asyncio.timeout_at(deadlines.total):
                return await self._run(call, encoded, settings.poll_interval_s, job)
        except TimeoutError:
            measured = failure(t_send_ns, job.status, ErrorClass.TIMEOUT_TOTAL,
                               DEADLINE_EXCEEDED)
        except JobEnded as end:
            measured = end.measurement
        except CallFailed as exc:
            measured = failure(t_send_ns, job.status, exc.error, exc.detail)
        if job.id is not None and not job.failed:
            await self._cancel(call, job.id, encoded[1])
        return measured

    async def _run(self, call: HttpCall, encoded: EncodedRequest, interval_s: float,
                   job: Job) -> Measurement:
        payload, headers = encoded
        plain = {name: value for name, value in headers.items()
                 if name.lower() != "content-type"}
        created = await call("POST", self.path, payload, headers, keep=JOB_BODY_LIMIT,
                             limit=JOB_BODY_LIMIT)
        state = job_status(created, job, "creating the job")
        job_id = state.get("id")
        if not isinstance(job_id, str) or not JOB_ID.match(job_id):
            raise ended(job, ErrorClass.PROTOCOL, "the job has no usable id", created.end_ns)
        job.id, job.created_ns = job_id, created.end_ns
        seen_ns, poll, interval_ns = created.end_ns, 0, round(interval_s * 1e9)
        while True:
            self._saw(state, job, seen_ns)
            if job.completed_ns is not None:
                break
            poll += 1
            behind_ns = time.perf_counter_ns() - (job.created_ns + poll * interval_ns)
            if behind_ns >= interval_ns:  # a slow poll: skip the slots it missed, no burst
                poll += behind_ns // interval_ns
            due_ns = job.created_ns + poll * interval_ns
            await asyncio.sleep(max(due_ns - time.perf_counter_ns(), 0) / 1e9)
            answer = await call("GET", f"{self.path}/{job_id}", b"", plain,
                                keep=JOB_BODY_LIMIT, limit=JOB_BODY_LIMIT)
            state, seen_ns = job_status(answer, job, "polling the job"), answer.end_ns
        content_ns = time.perf_counter_ns()
        content = await call("GET", f"{self.path}/{job_id}/content", b"",
                             {**plain, "accept": "*/*"}, keep=0, limit=MAX_VIDEO_BYTES)
        answered(content, job, "fetching the content")
        if content.size == 0:
            raise ended(job, ErrorClass.EMPTY, "no video content", content.end_ns)
        job.id = None  # done: nothing to cancel
        assert job.running_ns is not None
        return Measurement(
            ttft_ms=None, itl_ms=(), e2e_ms=(content.end_ns - job.t_send_ns) / NS_PER_MS,
            output_tokens=0, tokens_server_counted=False, input_tokens=None,
            http_status=content.status, error_class=None,
            phases_ms=(("queue", (job.running_ns - job.created_ns) / NS_PER_MS),
                       ("generation", (job.completed_ns - job.running_ns) / NS_PER_MS),
                       ("content", (content.end_ns - content_ns) / NS_PER_MS)))

    @staticmethod
    def _saw(state: Mapping[str, Any], job: Job, at_ns: int) -> None:
        """A job's status as an answer that arrived at `at_ns` told it."""
        status = state.get("status")
        if status in RUNNING and job.running_ns is None:
            job.running_ns = at_ns
        if status == "completed":
            job.completed_ns = at_ns
        elif status == "failed":
            job.failed = True
            raise ended(job, ErrorClass.JOB_FAILED, failure_detail(state), at_ns)

    async def _cancel(self, call: HttpCall, job_id: str, headers: Mapping[str, str]) -> None:
        """Cancel a job given up (best effort: its failure changes nothing measured)."""
        plain = {name: value for name, value in headers.items()
                 if name.lower() != "content-type"}
        try:
            async with asyncio.timeout(DELETE_TIMEOUT_S):
                await call("DELETE", f"{self.path}/{job_id}", b"", plain,
                           keep=JOB_BODY_LIMIT, limit=JOB_BODY_LIMIT)
        except (TimeoutError, CallFailed):
            pass


OPENAI_VIDEOS = OpenAIVideos()
