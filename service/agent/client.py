"""The agent's side of /api/v1/agent: HTTPS to the service, outbound only, authenticated by
its key. A call the service cannot answer (connection refused, timeout, a 5xx) is an
Unreachable: the agent carries on offline; one it refuses (4xx) is a Refused with the
problem's detail (never the key)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import httpx
import msgpack

from sustain.service.agent.spool import SpooledRun
from sustain.service.runs.upload import MAX_PART_SAMPLES
from sustain.service.schemas.agent import (
    AgentBeat,
    AgentClaim,
    AgentClaimed,
    AgentHeartbeat,
    Assignments,
    UploadStored,
)

PREFIX = "/api/v1/agent"
UPLOAD_MEDIA = "application/msgpack"
READ_TRIES = 3
"""Walks of the assignments' pages before giving up until the next heartbeat."""


class Unreachable(Exception):
    """The service did not answer (or answered 5xx): retry later."""


class Refused(Exception):
    """The service refused the call (4xx): retrying the same call will not help."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status


class ServiceClient:
    def __init__(self, server: str, key: str, name: str, *, timeout_s: float = 10.0,
                 verify: bool = True) -> None:
        self.name = name
        """This agent process (its claims and uploads say so)."""
        self._http = httpx.AsyncClient(
            base_url=server.rstrip("/"), headers={"Authorization": f"Bearer {key}"},
            timeout=timeout_s, verify=verify, trust_env=False)

    async def _call(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        try:
            response = await self._http.request(method, PREFIX + path, **kwargs)  # type: ignore[arg-type]
        except httpx.HTTPError as exc:
            raise Unreachable(type(exc).__name__) from None
        if response.status_code >= 500:
            raise Unreachable(f"HTTP {response.status_code}")
        if response.status_code >= 400:
            try:
                detail = str(response.json().get("detail", ""))[:500]
            except ValueError:
                detail = ""
            raise Refused(response.status_code, detail)
        return response

    async def heartbeat(self, in_flight: int, running: Sequence[int], spooled: int,
                        clock_offset_ms: float | None, stopping: bool = False
                        ) -> tuple[AgentBeat, datetime, datetime]:
        """The answer, with when it was sent and received (this host's wall clock)."""
        body = AgentHeartbeat(agent=self.name, in_flight=in_flight, running=list(running),
                              spooled_runs=spooled, clock_offset_ms=clock_offset_ms,
                              stopping=stopping)
        sent = datetime.now().astimezone()
        response = await self._call("POST", "/heartbeat", content=body.model_dump_json(),
                                    headers={"content-type": "application/json"})
        received = datetime.now().astimezone()
        return AgentBeat.model_validate_json(response.content), sent, received

    async def assignments(self) -> Assignments:
        """Every assignment of the location, read a page at a time; the pages are read again
        (up to READ_TRIES times) when they disagree on the version (the assignments changed
        while they were read). The answer's version is its first page's: if the assignments
        changed meanwhile, the next heartbeat's version differs and they are read again."""
        for _ in range(READ_TRIES):
            first = await self._page(None)
            probes, following = list(first.probes), first.next_cursor
            while following is not None:
                page = await self._page(following)
                if page.version != first.version:
                    break
                probes += page.probes
                following = page.next_cursor
            else:
                return first.model_copy(update={"probes": probes, "next_cursor": None})
        raise Unreachable(f"the assignments changed while read, {READ_TRIES} times")

    async def _page(self, cursor: str | None) -> Assignments:
        params = {} if cursor is None else {"cursor": cursor}
        response = await self._call("GET", "/assignments", params=params)
        return Assignments.model_validate_json(response.content)

    async def claim(self, probe_id: int, tick: datetime, ended: Sequence[int]) -> AgentClaimed:
        body = AgentClaim(agent=self.name, probe_id=probe_id, tick=tick, ended=list(ended))
        response = await self._call("POST", "/claims", content=body.model_dump_json(),
                                    headers={"content-type": "application/json"})
        return AgentClaimed.model_validate_json(response.content)

    async def upload(self, run: SpooledRun) -> UploadStored:
        """Send a spooled run in parts (each within the service's body limit: see `chunks`);
        the answer to the last part. Safe to repeat: the service stores an upload once."""
        chunks = split_samples(run.samples, len(msgpack.packb(run.final, use_bin_type=True)))
        answer = UploadStored(outcome="part")
        for number, chunk in enumerate(chunks):
            last = number == len(chunks) - 1
            body = msgpack.packb({
                "upload_id": str(run.upload_id), "part": number, "parts": len(chunks),
                "probe_id": run.probe_id, "tick": run.tick, "run_id": run.run_id,
                "started_at": run.started_at, "dropped": run.dropped, "samples": chunk,
                "final": run.final if last else None}, use_bin_type=True)
            response = await self._call("POST", "/uploads", content=body,
                                        params={"agent": self.name},
                                        headers={"content-type": UPLOAD_MEDIA})
            answer = UploadStored.model_validate_json(response.content)
            if answer.outcome == "duplicate":
                return answer
        return answer

    async def aclose(self) -> None:
        await self._http.aclose()


PART_BYTES = 512 * 1024
"""What the samples of one part come to at most, in msgpack bytes (one sample larger than
this goes alone): half the service's default body limit (SUSTAIN_MAX_BODY_BYTES, 1 MiB), so
a part is never refused for its size. A sample's row is at most about 0.6 MB (65,536 ITL
gaps, SUSTAIN_AGENT_UPLOAD_MAX_ITL_VALUES, at 9 bytes each)."""


def split_samples(rows: Sequence[list[Any]], final_bytes: int) -> list[list[list[Any]]]:
    """The sample rows in parts of at most MAX_PART_SAMPLES rows and PART_BYTES bytes; the
    last part (which carries the final record, `final_bytes` of it) holds only what fits
    beside it, and is empty when nothing does. Always at least one part."""
    chunks: list[list[list[Any]]] = []
    current: list[list[Any]] = []
    size = 0
    for row in rows:
        n = len(msgpack.packb(row, use_bin_type=True))
        if current and (size + n > PART_BYTES or len(current) >= MAX_PART_SAMPLES):
            chunks.append(current)
            current, size = [], 0
        current.append(row)
        size += n
    if current and size + final_bytes > PART_BYTES:
        chunks.append(current)
        current = []
    chunks.append(current)
    return chunks


def new_upload_id() -> uuid.UUID:
    return uuid.uuid4()
