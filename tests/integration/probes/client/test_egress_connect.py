"""The egress policy holds at connect time, on the addresses a name resolved to, in every
transport (the lean HTTP/1.1 pool, httpx for HTTP/2 endpoints, plain `http` checks): a refused
connection is a sample of class egress_denied, nothing reaches the server, and nothing raises.
The names here pass any check on how they are written; only their resolution denies them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.target import ApiKind, HttpCheck, Target
from sustain.probes.load.profiles import SingleProfile
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload

LOOPBACK_DENIED = EgressPolicy.parse(denied="127.0.0.0/8,::1/128")

TRANSPORTS = {
    "lean-http1": {"api_kind": ApiKind.OPENAI_CHAT},
    "httpx": {"api_kind": ApiKind.OPENAI_CHAT, "http2": True},
    "http-check": {"api_kind": ApiKind.HTTP, "http_check": HttpCheck(path="/healthz")},
}


class CountingServer:
    """A loopback TCP server that counts connections and answers each with 503."""

    def __init__(self) -> None:
        self.connections = 0
        self.port = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        await reader.read(65536)
        writer.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n"
                     b"connection: close\r\n\r\n")
        await writer.drain()
        writer.close()


@pytest.fixture
async def server() -> AsyncIterator[CountingServer]:
    counting = CountingServer()
    listening = await asyncio.start_server(counting._handle, "127.0.0.1", 0)
    counting.port = listening.sockets[0].getsockname()[1]
    async with listening:
        yield counting


async def measure(egress: EgressPolicy | None, base_url: str, transport: str) -> Measurement:
    target = Target(base_url=base_url, model="m", timeout_connect_s=2, timeout_total_s=5,
                    **TRANSPORTS[transport])  # type: ignore[arg-type]
    async with HttpClients(egress=egress) as clients:
        result = await execute(clients, target, Workload(), SingleProfile())
    return result.samples[0].measurement


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_name_resolving_to_a_denied_address_is_refused_before_connecting(
        server: CountingServer, transport: str) -> None:
    base_url = f"http://localhost:{server.port}/v1"
    assert LOOPBACK_DENIED.check_url(base_url) is None  # as written, the URL passes

    refused = await measure(LOOPBACK_DENIED, base_url, transport)
    assert refused.error_class is ErrorClass.EGRESS_DENIED
    assert refused.error_detail is not None
    assert refused.error_detail.startswith("egress denied: localhost: 127.0.0.1 is denied")
    assert server.connections == 0

    reached = await measure(None, base_url, transport)  # the default policy allows loopback
    assert reached.error_class is ErrorClass.HTTP_5XX
    # The request, and before it, for the generation kinds' synthetic prompts, the first
    # request that would size them (probes/load/calibrate.py), answered alike.
    assert server.connections == (1 if transport == "http-check" else 2)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("host", ["169.254.169.254", "2852039166", "[::ffff:a9fe:a9fe]",
                                  "[fe80::1]"])
async def test_link_local_spellings_are_refused_at_connect_time_by_default(
        transport: str, host: str) -> None:
    started = asyncio.get_running_loop().time()
    refused = await measure(None, f"http://{host}/v1", transport)
    assert refused.error_class is ErrorClass.EGRESS_DENIED, refused.error_detail
    assert "always denied" in (refused.error_detail or "")
    # EGRESS_DENIED already says refused, not timed out (a connect that timed out would be
    # timeout_connect); this only guards against a hang.
    assert asyncio.get_running_loop().time() - started < 30.0
