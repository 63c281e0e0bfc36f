"""What a server says when it refuses a request reaches the sample's error detail, over real
loopback HTTP and both transports: vLLM's 404 for a model it does not serve (the simulator,
strict about its model), an OpenAI-style error object, an HTML login page answered 200 where
an API answer was due, a stream of the wrong type; and from a hostile server, no echoed key,
no control character and no more than the kept KiB's words, however much it sends."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.error_body import REDACTED, WORDS_CHARS
from sustain.probes.client.http1 import send_over_http1
from sustain.probes.client.httpx_transport import send_over_httpx
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.protocols.streaming import ERROR_BODY_LIMIT, encode_request
from sustain.simulator.config import FAULT_HEADER, SimulatorConfig
from sustain.simulator.server import BackgroundSimulator
from tests.integration.probes.client.raw_http import Serve, chunk

KEY = "sk-test-echoed-0123456789abcdef"
SIM_MODEL = "sim-model"


@pytest.fixture(scope="module")
def strict_sim() -> Iterator[BackgroundSimulator]:
    """A simulator that refuses any model but its own, as vLLM does."""
    with BackgroundSimulator(SimulatorConfig(ttft_ms=1.0, itl_ms=0.0, output_tokens=3,
                                             strict_model=True)) as sim:
        yield sim


async def send(clients: HttpClients, via_httpx: bool, base_url: str, *, model: str = "m",
               stream: bool = True, headers: dict[str, str] | None = None) -> Measurement:
    target = Target(base_url=base_url, api_kind=ApiKind.OPENAI_CHAT, model=model,
                    http2=via_httpx, timeout_total_s=30.0)
    encoded = encode_request({"model": model, "stream": stream, "max_tokens": 3,
                              "messages": [{"role": "user", "content": "hi"}]},
                             {"authorization": f"Bearer {KEY}", **(headers or {})})
    if via_httpx:
        return await send_over_httpx(clients.httpx(), target, encoded, stream,
                                     time.perf_counter_ns())
    return await send_over_http1(clients.pool(), target, encoded, stream,
                                 time.perf_counter_ns())


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_model_the_server_does_not_serve_is_named_in_the_servers_words(
        client: HttpClients, strict_sim: BackgroundSimulator, via_httpx: bool,
        stream: bool) -> None:
    wrong = await send(client, via_httpx, strict_sim.base_url, model="gpt-4o", stream=stream)
    assert wrong.error_class is ErrorClass.HTTP_4XX
    assert wrong.http_status == 404
    assert wrong.error_detail == "HTTP 404: The model `gpt-4o` does not exist."
    served = await send(client, via_httpx, strict_sim.base_url, model=SIM_MODEL, stream=stream)
    assert served.error_class is None, served.error_detail


async def test_the_message_of_an_openai_style_error_object_is_the_detail(
        client: HttpClients, strict_sim: BackgroundSimulator, via_httpx: bool) -> None:
    for fault, status, error in (("http_400", 400, ErrorClass.HTTP_4XX),
                                 ("http_429", 429, ErrorClass.HTTP_429),
                                 ("http_500", 500, ErrorClass.HTTP_5XX)):
        m = await send(client, via_httpx, strict_sim.base_url, model=SIM_MODEL,
                       headers={FAULT_HEADER: fault})
        assert (m.error_class, m.http_status) == (error, status)
        assert m.error_detail == f"HTTP {status}: injected {fault}"


async def test_a_stream_of_another_type_names_the_type(
        client: HttpClients, strict_sim: BackgroundSimulator, via_httpx: bool) -> None:
    m = await send(client, via_httpx, strict_sim.base_url, model=SIM_MODEL,
                   headers={FAULT_HEADER: "wrong_content_type"})
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.error_detail == "stream is not text/event-stream: text/plain"


LOGIN_PAGE = (b"<!DOCTYPE html>\n<html><head><meta charset='utf-8'>\n"
              b"<title>Sign in - Corp SSO</title></head>\n<body><form action='/login'>"
              b"<input name='user'></form></body></html>\n")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_an_html_page_answered_200_is_a_refusal_named_by_its_type_and_title(
        client: HttpClients, serve: Serve, via_httpx: bool, stream: bool) -> None:
    """A login page or a proxy's page where the API should be: `protocol`, status 200, and
    the content type and the page's title in the detail."""
    async def login(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n"
                     b"transfer-encoding: chunked\r\n\r\n" + chunk(LOGIN_PAGE) + b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    m = await send(client, via_httpx, await serve(login), stream=stream)
    assert m.error_class is ErrorClass.PROTOCOL
    assert m.http_status == 200
    assert m.error_detail == "HTTP 200 text/html, not an API answer: Sign in - Corp SSO"


async def test_a_hostile_error_body_gives_bounded_printable_words_without_the_key(
        client: HttpClients, serve: Serve, via_httpx: bool) -> None:
    """A proxy that answers 401 echoing the request head (the bearer token in it) inside
    escape sequences and line breaks, then keeps sending far past ERROR_BODY_LIMIT: the
    detail is the message, the key redacted, on one printable line, within WORDS_CHARS."""
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await _read_request(reader)
        message = ("\x1b[31mdenied\x1b[0m\r\nX-Forged: yes\n\u202eyour request was: "
                   + head.decode("latin-1"))
        body = json.dumps({"error": {"message": message + "A" * 5000}}).encode()
        writer.write(b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n"
                     b"transfer-encoding: chunked\r\n\r\n" + chunk(body))
        try:
            for _ in range(2 * ERROR_BODY_LIMIT // 1024):  # bounded: twice the limit
                writer.write(chunk(b"B" * 1024))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except ConnectionError:
            pass  # the client gave up past the limit, as it should
        writer.close()

    m = await send(client, via_httpx, await serve(echo))
    assert m.error_class is ErrorClass.HTTP_4XX
    assert m.http_status == 401
    detail = m.error_detail or ""
    assert detail.startswith("HTTP 401: denied X-Forged: yes your request was: POST /v1/chat")
    assert KEY not in detail
    assert KEY[:12] not in detail
    assert REDACTED in detail
    assert detail.isprintable()
    assert len(detail) <= len("HTTP 401: ") + WORDS_CHARS


async def test_https_to_a_plain_http_port_fails_its_handshake_saying_why(
        client: HttpClients, strict_sim: BackgroundSimulator, via_httpx: bool) -> None:
    m = await send(client, via_httpx, strict_sim.base_url.replace("http://", "https://"))
    assert m.error_class is ErrorClass.TLS
    assert m.http_status is None
    assert m.error_detail, "the TLS library's reason"
    assert m.error_detail != "ConnectError", "the TLS library's reason, not the exception's"


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    """One request with a Content-Length body; its head."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    await reader.readexactly(length)
    return head
