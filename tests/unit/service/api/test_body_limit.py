"""The body cap refuses a declared length before reading anything, and a chunked body as soon
as it crosses the cap, with a 413 problem; bodies within the cap pass untouched."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import pytest

from sustain.service.api.body_limit import BodyLimit

Message = MutableMapping[str, Any]
CAP = 1024


async def reads_everything(_scope: Message, receive: Any, send: Any) -> None:
    """An app that reads the whole body and answers with its length."""
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(size).encode()})


class Exchange:
    """One request through the middleware: `chunks` bodies of `chunk` bytes arrive on demand."""

    def __init__(self, chunks: int, chunk: int, content_length: int | None) -> None:
        self.chunks, self.chunk = chunks, chunk
        self.pulled = 0
        self.sent: list[Message] = []
        headers = [] if content_length is None else [
            (b"content-length", str(content_length).encode())]
        self.scope: Message = {"type": "http", "method": "POST", "path": "/api/v1/probes",
                               "headers": headers, "query_string": b"", "root_path": "",
                               "scheme": "http", "server": ("test", 80)}

    async def receive(self) -> Message:
        self.pulled += 1
        return {"type": "http.request", "body": b"x" * self.chunk,
                "more_body": self.pulled < self.chunks}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    async def run(self) -> tuple[int, dict[str, str], bytes]:
        await BodyLimit(reads_everything, CAP)(self.scope, self.receive, self.send)
        start = self.sent[0]
        headers = {k.decode(): v.decode() for k, v in start["headers"]}
        return start["status"], headers, b"".join(m.get("body", b"") for m in self.sent[1:])


async def test_a_declared_length_over_the_cap_is_refused_before_any_byte_is_read() -> None:
    exchange = Exchange(chunks=1000, chunk=100_000, content_length=100_000_000)
    status, headers, body = await exchange.run()
    assert (status, exchange.pulled) == (413, 0)
    assert headers["content-type"] == "application/problem+json"
    problem = json.loads(body)
    assert problem["status"] == 413
    assert f"limited to {CAP} bytes" in problem["detail"]
    assert problem["instance"] == "/api/v1/probes"


async def test_a_chunked_body_is_refused_at_the_chunk_that_crosses_the_cap() -> None:
    exchange = Exchange(chunks=10_000, chunk=100, content_length=None)
    status, _, body = await exchange.run()
    assert status == 413
    assert exchange.pulled == CAP // 100 + 1, "stops at the first chunk past the cap"
    assert json.loads(body)["title"] == "Content too large"


@pytest.mark.parametrize("content_length", [CAP, None])
async def test_a_body_at_the_cap_passes_untouched(content_length: int | None) -> None:
    exchange = Exchange(chunks=4, chunk=CAP // 4, content_length=content_length)
    assert await exchange.run() == (200, {}, str(CAP).encode())


async def test_other_scopes_pass_through() -> None:
    seen: list[str] = []

    async def app(scope: Message, receive: Any, send: Any) -> None:  # noqa: ARG001
        seen.append(scope["type"])

    await BodyLimit(app, CAP)({"type": "lifespan"}, Exchange(1, 1, None).receive,
                              Exchange(1, 1, None).send)
    assert seen == ["lifespan"]
