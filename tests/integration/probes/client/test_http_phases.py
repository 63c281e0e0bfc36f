"""Network or server: every request's HTTP phases and W3C traceparent, against the simulator
(and a TLS one) over real loopback connections, through both transports.

Timings are never bounded here (the machine is shared): what is checked is which phases a
request has, that they fall within its TTFT (each is a part of the time before its first
token), and that the trace id a sample keeps is the one its request carried."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, HttpCheck, Target
from sustain.probes.load.profiles import (
    ConcurrencyProfile,
    ConstantProfile,
    LoadProfile,
    SingleProfile,
)
from sustain.probes.measure.sample import ErrorClass, Measurement, Sample
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator
from tests.integration.probes.client.raw_http import Serve

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")
REQUESTS = 6


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundSimulator]:
    with BackgroundSimulator(SimulatorConfig(ttft_ms=20, itl_ms=1, output_tokens=4)) as server:
        yield server


def self_signed(folder: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and localhost, and its key (PEM files), made by the
    openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command makes the TLS simulator's certificate")
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key_file),
                    "-out", str(cert_file), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return str(cert_file), str(key_file)


@pytest.fixture(scope="module")
def tls_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundSimulator]:
    tls = self_signed(tmp_path_factory.mktemp("tls"))
    with BackgroundSimulator(SimulatorConfig(ttft_ms=20, itl_ms=1, output_tokens=4),
                             tls=tls) as server:
        yield server


def chat(base_url: str, *, http2: bool, tls_verify: bool = True) -> Target:
    return Target(base_url=base_url, api_kind=ApiKind.OPENAI_CHAT, model="m", http2=http2,
                  tls_verify=tls_verify)


async def measured(target: Target, connection: Literal["reuse", "new"],
                   profile: LoadProfile | None = None) -> list[Sample]:
    async with HttpClients() as clients:
        result = await execute(clients, target, Workload(max_tokens=4, connection=connection),
                               profile or ConstantProfile(rate=20, duration_s=REQUESTS / 20))
    assert result.samples
    assert all(s.measurement.error_class is None for s in result.samples), result.summary.errors
    return result.samples


def within_ttft(m: Measurement) -> bool:
    """Whether the phases before the first token add up to no more than TTFT."""
    assert m.ttft_ms is not None
    assert m.ttfb_ms is not None
    before = (m.dns_ms or 0.0) + (m.connect_ms or 0.0) + (m.tls_ms or 0.0) + m.ttfb_ms
    return before <= m.ttft_ms


async def test_with_connection_new_every_request_times_its_connect_and_ttfb_within_ttft(
        sim: BackgroundSimulator, via_httpx: bool) -> None:
    samples = await measured(chat(sim.base_url, http2=via_httpx), "new")
    for s in samples:
        m = s.measurement
        assert m.connection_reused is False
        assert m.connect_ms is not None
        assert m.ttfb_ms is not None
        assert m.dns_ms is None  # an address literal: nothing to resolve
        assert m.tls_ms is None  # plain http
        assert within_ttft(m)


async def test_on_a_reused_connection_only_ttfb_is_timed(
        sim: BackgroundSimulator, via_httpx: bool) -> None:
    samples = await measured(chat(sim.base_url, http2=via_httpx), "reuse",
                             ConcurrencyProfile(users=1, max_requests=REQUESTS))
    reused = [s.measurement for s in samples if s.measurement.connection_reused]
    # one user, one connection: at most the first request (or a calibration before it) opens it
    assert len(reused) >= len(samples) - 1
    for m in reused:
        assert (m.dns_ms, m.connect_ms, m.tls_ms) == (None, None, None)
        assert m.ttfb_ms is not None
        assert within_ttft(m)
    for m in (s.measurement for s in samples if not s.measurement.connection_reused):
        assert m.connection_reused is False
        assert m.connect_ms is not None


async def test_a_host_name_is_resolved_and_its_lookup_timed(
        sim: BackgroundSimulator, via_httpx: bool) -> None:
    by_name = sim.base_url.replace("127.0.0.1", "localhost")
    for s in await measured(chat(by_name, http2=via_httpx), "new"):
        m = s.measurement
        assert m.dns_ms is not None
        assert m.connect_ms is not None
        assert within_ttft(m)


async def test_a_tls_handshake_is_timed_apart_from_the_tcp_connect(
        tls_sim: BackgroundSimulator, via_httpx: bool) -> None:
    assert tls_sim.base_url.startswith("https://")
    samples = await measured(chat(tls_sim.base_url, http2=via_httpx, tls_verify=False), "new")
    for s in samples:
        m = s.measurement
        assert m.connection_reused is False
        assert m.connect_ms is not None
        assert m.tls_ms is not None
        assert within_ttft(m)


async def test_every_request_carries_a_traceparent_whose_trace_id_its_sample_keeps(
        tmp_path: Path, via_httpx: bool) -> None:
    truth = tmp_path / "truth.jsonl"
    with BackgroundSimulator(SimulatorConfig(ttft_ms=5, itl_ms=1, output_tokens=4,
                                             truth_log=str(truth))) as server:
        samples = await measured(chat(server.base_url, http2=via_httpx), "reuse")
    received = [json.loads(line)["traceparent"] for line in truth.read_text().splitlines()]
    # every request the endpoint answered (the prompt calibration's too) carried one
    assert received
    assert all(isinstance(h, str) and TRACEPARENT.match(h) for h in received)
    sent = {TRACEPARENT.match(h)[1]: h for h in received}  # type: ignore[index]
    assert len(sent) == len(received)  # a fresh trace per request
    kept = [s.measurement.trace_id for s in samples]
    assert len(set(kept)) == len(samples)
    assert all(trace_id in sent for trace_id in kept)


async def test_an_http_check_carries_a_traceparent_and_is_timed(serve: Serve) -> None:
    received: list[str] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n"):
            lines = head.decode("latin-1").split("\r\n")
            received.extend(line.split(":", 1)[1].strip() for line in lines
                            if line.lower().startswith("traceparent:"))
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()

    root = (await serve(handler)).removesuffix("/v1")
    check = Target(base_url=root, api_kind=ApiKind.HTTP, model="n/a",
                   http_check=HttpCheck(path="/health"))
    samples = await measured(check, "new")
    assert len(received) == len(samples)
    assert sorted(s.measurement.trace_id or "" for s in samples) == sorted(
        h[3:35] for h in received)
    for s in samples:
        m = s.measurement
        assert m.connection_reused is False
        assert m.connect_ms is not None
        assert m.ttfb_ms is not None
        assert (m.connect_ms + m.ttfb_ms) <= m.e2e_ms


async def test_a_request_that_never_had_a_connection_has_no_phases_but_its_trace_id(
        via_httpx: bool) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    async with HttpClients() as clients:
        result = await execute(clients, chat(f"http://127.0.0.1:{port}/v1", http2=via_httpx),
                               Workload(max_tokens=4, connection="new"), SingleProfile())
    (refused,) = [s.measurement for s in result.samples]
    assert refused.error_class is ErrorClass.CONNECT
    assert (refused.dns_ms, refused.connect_ms, refused.tls_ms, refused.ttfb_ms,
            refused.connection_reused) == (None,) * 5
    assert refused.trace_id is not None
    assert TRACEPARENT.match(f"00-{refused.trace_id}-{'1' * 16}-01")
