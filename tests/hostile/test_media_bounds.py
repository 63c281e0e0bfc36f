"""Media answers that never end: a speech server streaming audio without end, a video server
whose job's content has no end, a speech server whose WAV never reaches its audio. Each is cut
off at its kind's bound (speech: 64 MiB of body; a video's content: 512 MiB), classified as
`protocol`, and read without being kept: the probe's RSS grows by far less than what it read,
and the server sent at most the bound plus what the sockets buffer. Through both transports
(the lean HTTP/1.1 pool and httpx)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sustain.probes.client.target import ApiKind, Target
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols.openai_speech import (
    MAX_SPEECH_BYTES,
)
from sustain.probes.protocols.openai_videos import MAX_VIDEO_BYTES
from sustain.probes.workload.spec import Workload
from tests.hostile.media_servers import (
    RSS_GROWTH,
    SOCKET_SLACK,
    TRANSPORTS,
    Conn,
    Endless,
    Handler,
    MiB,
    hostile,
    measure,
    one,
)


@pytest.fixture
async def endless() -> AsyncIterator[Endless]:
    server = Endless()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield server
        listener.close()


@pytest.mark.parametrize("http2", [False, True], ids=["lean-http1", "httpx"])
async def test_endless_speech_is_cut_off_at_its_bound_and_never_kept(
        endless: Endless, http2: bool) -> None:
    endless.cap = MAX_SPEECH_BYTES + 4 * SOCKET_SLACK
    target = Target(base_url=endless.base_url, api_kind=ApiKind.OPENAI_SPEECH, model="m",
                    http2=http2, timeout_total_s=120)
    m, grown = await measure(target, Workload(prompt="speak"))
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == "streamed body over 64 MiB"
    assert m.audio_s == pytest.approx(MAX_SPEECH_BYTES / 48_000)  # counted up to the bound
    assert MAX_SPEECH_BYTES < endless.sent <= MAX_SPEECH_BYTES + SOCKET_SLACK
    assert grown < RSS_GROWTH


async def test_a_wav_that_never_reaches_its_audio_is_cut_off_after_its_header_bound(
        endless: Endless) -> None:
    endless.cap = 4 * SOCKET_SLACK
    target = Target(base_url=endless.base_url, api_kind=ApiKind.OPENAI_SPEECH, model="m",
                    timeout_total_s=60)
    m, grown = await measure(target, Workload(prompt="speak", audio_format="wav"))
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == "no WAV data chunk in the first 4 KiB"
    assert endless.sent <= SOCKET_SLACK
    assert grown < RSS_GROWTH


@pytest.mark.parametrize("http2", [False, True], ids=["lean-http1", "httpx"])
async def test_an_endless_video_is_cut_off_at_its_bound_and_never_kept(
        endless: Endless, http2: bool) -> None:
    endless.cap = MAX_VIDEO_BYTES + 4 * SOCKET_SLACK
    target = Target(base_url=endless.base_url, api_kind=ApiKind.OPENAI_VIDEOS, model="m",
                    http2=http2, timeout_total_s=120)
    m, grown = await measure(target, Workload(prompt="film", poll_interval_s=0.05))
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == "response body over 512 MiB"
    assert m.phases_ms is None
    assert MAX_VIDEO_BYTES < endless.sent <= MAX_VIDEO_BYTES + SOCKET_SLACK
    assert grown < RSS_GROWTH




# --- video jobs ------------------------------------------------------------------------------


def job_server(create: Any, poll: Any = None, *, content: Handler | None = None,
               delete: Handler | None = None) -> Handler:
    """A video job server: `create` answers the POST, `poll` (a value, or a list cycled
    through) each GET of the job; the content is three bytes unless `content` says."""
    polls = poll if isinstance(poll, list) else [poll]

    async def answer(conn: Conn) -> None:
        if conn.method == "POST":
            await conn.json(create)
        elif conn.method == "DELETE":
            await (delete(conn) if delete is not None else conn.json({"deleted": True}))
        elif conn.path.endswith("/content"):
            if content is not None:
                await content(conn)
            else:
                conn.head(b"video/mp4", length=3)
                await conn.send(b"mp4", chunked=False)
        else:
            gets = sum(method == "GET" for method, _ in conn.server.requests)
            await conn.json(polls[(gets - 1) % len(polls)])
    return answer


FILM = Workload(prompt="film", poll_interval_s=0.05)


@TRANSPORTS
@pytest.mark.parametrize("job_id", [
    None, 5, "", "..", ".", "a\n", "../content", "a?b=1", "a/b", "x" * 10_000, "a%2F..",
    "a#b"], ids=["missing", "number", "empty", "dot-dot", "dot", "trailing-newline",
                 "traversal", "query", "slash", "10k", "escaped", "fragment"])
async def test_a_job_id_that_is_no_path_segment_is_protocol_and_never_requested(
        job_id: Any, http2: bool) -> None:
    created = {"status": "queued"} if job_id is None else {"id": job_id, "status": "queued"}
    async with hostile(job_server(created, {"status": "completed"})) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL,
                                               "the job has no usable id")
    assert server.requests == [("POST", "/v1/videos")]  # no poll, no DELETE, anywhere


@TRANSPORTS
@pytest.mark.parametrize("status", [[], {"a": 1}, 1.5, None, True, "QUEUED", "x" * 10_000],
                         ids=["list", "object", "number", "null", "bool", "upper", "10k"])
@pytest.mark.parametrize("when", ["creating", "polling"])
async def test_a_job_status_that_is_not_the_protocols_is_protocol(
        status: Any, when: str, http2: bool) -> None:
    created = {"id": "video_1", "status": status if when == "creating" else "queued"}
    async with hostile(job_server(created, {"id": "video_1", "status": status})) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert m.error_class is ErrorClass.PROTOCOL
    assert str(m.error_detail).startswith("job status ")
    assert len(str(m.error_detail)) < 100
    if when == "polling":  # a job given up is cancelled
        assert server.requests == [("POST", "/v1/videos"), ("GET", "/v1/videos/video_1"),
                                   ("DELETE", "/v1/videos/video_1")]
    else:
        assert server.requests == [("POST", "/v1/videos")]


@TRANSPORTS
@pytest.mark.parametrize("progress", [b"NaN", b"1e999", b"-Infinity"])
async def test_a_job_answer_with_a_progress_that_is_no_json_number_is_protocol(
        progress: bytes, http2: bool) -> None:
    created = b'{"id":"video_1","status":"queued","progress":' + progress + b"}"
    async with hostile(job_server(created)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert m.error_class is ErrorClass.PROTOCOL
    assert server.requests == [("POST", "/v1/videos")]


@TRANSPORTS
@pytest.mark.parametrize("statuses", [["queued"], ["queued", "in_progress"],
                                      ["in_progress", "queued", "in_progress"]],
                         ids=["queued-forever", "flapping", "running-backwards"])
async def test_a_job_that_never_completes_is_polled_once_an_interval_until_the_total_timeout(
        statuses: list[str], http2: bool) -> None:
    polls = [{"id": "video_1", "status": status, "progress": k} for k, status in
             enumerate(statuses)]
    async with hostile(job_server({"id": "video_1", "status": "queued"}, polls)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=1.0)
    assert (m.error_class, m.error_detail) == (ErrorClass.TIMEOUT_TOTAL, "deadline exceeded")
    gets = [path for method, path in server.requests if method == "GET"]
    assert set(gets) == {"/v1/videos/video_1"}
    assert 2 <= len(gets) <= 1.0 / 0.05 + 2  # once an interval at most
    assert server.requests[-1] == ("DELETE", "/v1/videos/video_1")
    assert [method for method, _ in server.requests].count("DELETE") == 1


@TRANSPORTS
async def test_a_100_mb_poll_answer_is_cut_off_at_the_job_answer_bound(http2: bool) -> None:
    async def huge(conn: Conn) -> None:
        conn.head(b"application/json", length=100 * MiB)
        await conn.send(b'{"id":"video_1","status":"queued","x":"', chunked=False)
        for _ in range(100):  # the load loop's bound: 100 MiB
            await conn.send(b"A" * MiB, chunked=False)

    async with hostile(route_polls(job_server({"id": "video_1", "status": "queued"}),
                                   huge)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=30)
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL, "response body over 1 MiB")
    assert server.sent <= 2 * MiB + SOCKET_SLACK
    assert server.requests[-1] == ("DELETE", "/v1/videos/video_1")


def route_polls(handler: Handler, poll: Handler) -> Handler:
    """`handler`, but for the job's polls, which `poll` answers."""
    async def answer(conn: Conn) -> None:
        if conn.method == "GET" and not conn.path.endswith("/content"):
            await poll(conn)
        else:
            await handler(conn)
    return answer


@TRANSPORTS
@pytest.mark.parametrize("status", [b"302 Found", b"307 Temporary Redirect",
                                    b"304 Not Modified"])
async def test_a_content_answer_that_redirects_is_not_a_video(status: bytes,
                                                               http2: bool) -> None:
    async def redirect(conn: Conn) -> None:
        body = b"" if status.startswith(b"304") else b"moved elsewhere"
        conn.head(b"text/plain", status=status, length=len(body),
                  extra=b"location: http://127.0.0.1:9/elsewhere.mp4\r\n")
        await conn.send(body, chunked=False)

    async with hostile(job_server({"id": "video_1", "status": "completed"},
                                  content=redirect)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == f"HTTP {status[:3].decode()} fetching the content"
    assert m.phases_ms is None
    assert server.requests[-1] == ("DELETE", "/v1/videos/video_1")


@TRANSPORTS
async def test_a_job_created_by_a_redirect_is_protocol(http2: bool) -> None:
    async def redirect(conn: Conn) -> None:
        await conn.json({"id": "video_1", "status": "queued"}, status=b"303 See Other",
                        extra=b"location: /v1/videos/video_1\r\n")

    async with hostile(redirect) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert (m.error_class, m.error_detail) == (ErrorClass.PROTOCOL,
                                               "HTTP 303 creating the job")
    assert server.requests == [("POST", "/v1/videos")]


@TRANSPORTS
async def test_a_delete_that_hangs_is_given_up_within_its_bound(http2: bool) -> None:
    given_up: list[bool] = []

    async def hang(conn: Conn) -> None:
        # the load loop's bound: 30 s; the probe going away ends it at once
        given_up.append(await asyncio.wait_for(conn.reader.read(1), timeout=30) == b"")

    async with hostile(job_server({"id": "video_1", "status": "queued"},
                                  {"id": "video_1", "status": "queued"},
                                  delete=hang)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=0.5)
    assert (m.error_class, m.error_detail) == (ErrorClass.TIMEOUT_TOTAL, "deadline exceeded")
    assert server.requests[-1] == ("DELETE", "/v1/videos/video_1")
    assert given_up == [True]  # the probe closed the DELETE's connection, not the server




DEEP = b"[" * 1000 + b"]" * 1000
"""A value nested 1,000 deep: within what the JSON parser takes, past what str() can write."""


@TRANSPORTS
@pytest.mark.parametrize("when", ["creating", "polling"])
async def test_a_job_status_nested_a_thousand_deep_is_protocol(when: str, http2: bool) -> None:
    deep = b'{"id":"video_1","status":' + DEEP + b"}"
    created = deep if when == "creating" else {"id": "video_1", "status": "queued"}
    async with hostile(job_server(created, deep)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert (m.error_class, m.error_detail) == (
        ErrorClass.PROTOCOL, f"job status of type list {when} the job")


@TRANSPORTS
@pytest.mark.parametrize(("error", "detail"), [
    (b'{"code":' + DEEP + b"}", "job failed"),
    (b'{"message":{"a":' + DEEP + b"}}", "job failed"),
    (b'{"code":500}', "job failed: 500"), (b'{"code":"' + b"x" * 500 + b'"}',
                                          "job failed: " + "x" * 120)],
    ids=["deep-code", "deep-message", "number", "long"])
async def test_a_failed_jobs_reason_is_read_only_when_it_is_text_or_a_number(
        error: bytes, detail: str, http2: bool) -> None:
    failed = b'{"id":"video_1","status":"failed","error":' + error + b"}"
    async with hostile(job_server({"id": "video_1", "status": "queued"}, failed)) as server:
        m = await one(server, ApiKind.OPENAI_VIDEOS, FILM, http2, timeout_total_s=5)
    assert (m.error_class, m.error_detail) == (ErrorClass.JOB_FAILED, detail)
    assert ("DELETE", "/v1/videos/video_1") not in server.requests  # failed: nothing to cancel
