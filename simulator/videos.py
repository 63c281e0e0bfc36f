"""The simulator's OpenAI video jobs (`/v1/videos`), as data: a job is created `queued`, runs
(`in_progress`) video_queue_ms after its creation and is `completed` video_generation_ms later;
its status and progress are read from the clock whenever it is asked, so the times of its
transitions are exact (they are the truth log's `started` and `completed`). Under the
`error_event` fault the job ends `failed` instead of completed; under `hang` it stays
`in_progress` for hang_s. Its content is video_bytes of an MP4-typed payload. The jobs kept
are bounded (MAX_JOBS, the oldest forgotten first)."""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

MAX_JOBS = 10_000
"""Jobs kept at once; a client that creates more finds the oldest gone (404)."""
CONTENT_CHUNK_BYTES = 1024 * 1024
"""A video's content is written in pieces of this size."""
MAX_PROMPT_CHARS = 100_000


@dataclass(slots=True)
class VideoJob:
    """One job and its times (perf_counter s)."""

    id: str
    model: str
    seconds: str
    size: str
    created: float
    started: float
    """When it runs (`in_progress`)."""
    completed: float
    """When it is completed (or failed)."""
    fails: bool
    request_id: str | None
    created_at: int
    """Its creation as a Unix time (s), as OpenAI reports it."""
    logged: bool = False
    """Its truth was logged (content served, failure told, or deletion)."""
    polls: int = 0
    """Times its status was asked."""

    def status(self, now: float) -> str:
        if now < self.started:
            return "queued"
        if now < self.completed:
            return "in_progress"
        return "failed" if self.fails else "completed"

    def view(self, now: float) -> dict[str, Any]:
        """The job as OpenAI writes it."""
        status = self.status(now)
        span = self.completed - self.started
        progress = 0 if status == "queued" else 100 if status == "completed" else \
            min(99, int(100 * (now - self.started) / span)) if span > 0 else 0
        view: dict[str, Any] = {
            "id": self.id, "object": "video", "model": self.model, "status": status,
            "progress": progress, "created_at": self.created_at, "seconds": self.seconds,
            "size": self.size}
        if status == "failed":
            view["error"] = {"code": "video_generation_failed",
                             "message": "injected generation failure"}
        return view


def read_video(body: dict[str, Any]) -> tuple[str, str, str] | str:
    """(model, seconds, size) of a create request, or why it is refused (a 400)."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt or len(prompt) > MAX_PROMPT_CHARS:
        return f"prompt: must be a string of 1 to {MAX_PROMPT_CHARS} characters"
    seconds, size = body.get("seconds", "4"), body.get("size", "720x1280")
    if not isinstance(seconds, str | int) or not isinstance(size, str):
        return "seconds and size: must be strings"
    return str(body.get("model", "sora-2")), str(seconds), size


class VideoJobs:
    """The jobs by id, at most MAX_JOBS."""

    def __init__(self) -> None:
        self._jobs: OrderedDict[str, VideoJob] = OrderedDict()

    def create(self, model: str, seconds: str, size: str, *, queue_s: float,
               generation_s: float, fails: bool, request_id: str | None) -> VideoJob:
        now = time.perf_counter()
        job = VideoJob(id=f"video_{secrets.token_hex(12)}", model=model, seconds=seconds,
                       size=size, created=now, started=now + queue_s,
                       completed=now + queue_s + generation_s, fails=fails,
                       request_id=request_id, created_at=int(time.time()))
        self._jobs[job.id] = job
        while len(self._jobs) > MAX_JOBS:
            self._jobs.popitem(last=False)
        return job

    def get(self, job_id: str) -> VideoJob | None:
        return self._jobs.get(job_id)

    def delete(self, job_id: str) -> VideoJob | None:
        return self._jobs.pop(job_id, None)


def video_route(path: str, root: str) -> tuple[str, bool] | None:
    """(job id, whether its content is asked) of a path under `root` (/v1/videos), or None
    for one that names no job."""
    rest = path[len(root) + 1:] if path.startswith(root + "/") else ""
    job_id, _, tail = rest.partition("/")
    if not job_id or tail not in ("", "content"):
        return None
    return job_id, tail == "content"


def chunk(size: int) -> bytes:
    """`size` bytes of content, at most CONTENT_CHUNK_BYTES (a whole chunk is one shared
    buffer, never copied)."""
    return _CONTENT if size == len(_CONTENT) else _CONTENT[:size]


_CONTENT = bytes(CONTENT_CHUNK_BYTES)
