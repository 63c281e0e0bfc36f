"""Hand-written HTTP/1.1 servers on loopback for client tests that need answers no real server
gives (endless lines, broken framing): the pieces every such handler uses."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
Serve = Callable[[Handler], Awaitable[str]]
"""Start a server running the handler; its OpenAI API root (http://127.0.0.1:PORT/v1)."""

SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n")


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def read_request(reader: asyncio.StreamReader) -> None:
    """Read one request with a Content-Length body, and drop it."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    await reader.readexactly(length)
