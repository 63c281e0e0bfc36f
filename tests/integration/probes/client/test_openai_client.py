"""The OpenAI client against the simulator over real loopback HTTP: every error class that the
foundation promises, each proved by a simulator fault or a real transport failure."""

from __future__ import annotations

import socket

import pytest

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, HttpCheck, Target
from sustain.probes.load.profiles import ConstantProfile, SingleProfile
from sustain.probes.measure.sample import ErrorClass, Measurement
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload
from sustain.simulator.config import FAULT_HEADER
from tests.conftest import SimulatorHandle


def target(sim: SimulatorHandle, fault: str | None = None, http2: bool = False,
           **kw: float) -> Target:
    headers = {FAULT_HEADER: fault} if fault else {}
    return Target(base_url=sim.base_url, api_kind=ApiKind.OPENAI_CHAT, model="m",
                  headers=headers, http2=http2, **kw)  # type: ignore[arg-type]


async def one(client: HttpClients, t: Target, workload: Workload | None = None
              ) -> Measurement:
    result = await execute(client, t, workload or Workload(), SingleProfile())
    return result.samples[0].measurement


async def test_streamed_chat_request_is_measured_from_t_send(
        client: HttpClients, simulator: SimulatorHandle, via_httpx: bool) -> None:
    m = await one(client, target(simulator, http2=via_httpx))
    assert m.error_class is None
    assert m.http_status == 200
    assert m.output_tokens == 32
    assert m.tokens_server_counted
    assert m.ttft_ms is not None
    # Floors set by the simulator (50 ms to the first token, then 31 gaps of 10 ms), which
    # noise can only raise; how close to the server's own times sustain measures is
    # benchmarks/accuracy.py's figure (TTFT and E2E error, ITL median).
    assert m.ttft_ms >= 50.0
    assert len(m.itl_ms) == 31
    assert all(gap >= 0.0 for gap in m.itl_ms)
    last_token_ms = m.ttft_ms + sum(m.itl_ms)
    assert 50.0 + 31 * 10.0 <= last_token_ms <= m.e2e_ms + 1e-6


async def test_completions_api_and_non_streaming_responses(
        client: HttpClients, simulator: SimulatorHandle) -> None:
    completions = Target(base_url=simulator.base_url, api_kind=ApiKind.OPENAI_COMPLETIONS,
                         model="m")
    streamed = await one(client, completions, Workload(max_tokens=8))
    assert streamed.error_class is None
    assert streamed.output_tokens == 8
    whole = await one(client, target(simulator), Workload(stream=False))
    assert whole.error_class is None
    assert whole.ttft_ms is None
    assert whole.output_tokens == 32
    assert whole.tokens_server_counted


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("http_400", ErrorClass.HTTP_4XX),
        ("http_429", ErrorClass.HTTP_429),
        ("http_500", ErrorClass.HTTP_5XX),
        ("wrong_content_type", ErrorClass.PROTOCOL),
        ("malformed", ErrorClass.PROTOCOL),
        ("truncate", ErrorClass.TRUNCATED),
        ("empty", ErrorClass.EMPTY),
        ("error_event", ErrorClass.HTTP_5XX),
    ],
)
async def test_simulator_fault_is_classified(
        client: HttpClients, simulator: SimulatorHandle, fault: str,
        expected: ErrorClass, via_httpx: bool) -> None:
    m = await one(client, target(simulator, fault, http2=via_httpx))
    assert m.error_class is expected


@pytest.mark.parametrize("fault", ["huge_chunk", "trickle"])
async def test_awkward_but_valid_streams_succeed(
        client: HttpClients, simulator: SimulatorHandle, fault: str, via_httpx: bool) -> None:
    m = await one(client, target(simulator, fault, http2=via_httpx), Workload(max_tokens=16))
    assert m.error_class is None
    assert m.output_tokens == 16
    assert m.tokens_server_counted


async def test_tls_failure_is_classified_tls(client: HttpClients, simulator: SimulatorHandle,
                                             via_httpx: bool) -> None:
    https = Target(base_url=simulator.base_url.replace("http://", "https://"),
                   api_kind=ApiKind.OPENAI_CHAT, model="m", http2=via_httpx)
    m = await one(client, https)
    assert m.error_class is ErrorClass.TLS


async def test_unanswered_connect_is_classified_timeout_connect(
        client: HttpClients, via_httpx: bool) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        for _ in range(8):  # fill the accept backlog so further SYNs go unanswered
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        try:
            stalled = Target(base_url=f"http://127.0.0.1:{port}/v1",
                             api_kind=ApiKind.OPENAI_CHAT, model="m", timeout_connect_s=0.5,
                             http2=via_httpx)
            m = await one(client, stalled)
        finally:
            for filler in fillers:
                filler.close()
    assert m.error_class is ErrorClass.TIMEOUT_CONNECT


async def test_hung_request_times_out_on_first_token_then_total(
        client: HttpClients, simulator: SimulatorHandle, via_httpx: bool) -> None:
    first = await one(client, target(simulator, "hang", via_httpx, timeout_first_token_s=0.3))
    assert first.error_class is ErrorClass.TIMEOUT_FIRST_TOKEN
    # Not before the 0.3 s timeout; the upper bound only guards against a hang (the request
    # would otherwise end after the simulator's 3600 s hang or the 120 s total timeout).
    assert 300.0 <= first.e2e_ms < 3000.0
    total = await one(client, target(simulator, "hang", via_httpx, timeout_total_s=0.3))
    assert total.error_class is ErrorClass.TIMEOUT_TOTAL
    slow_stream = await one(client, target(simulator, http2=via_httpx, timeout_total_s=0.2))
    assert slow_stream.error_class is ErrorClass.TIMEOUT_TOTAL
    assert slow_stream.ttft_ms is not None


async def test_refused_connection_is_classified_connect(client: HttpClients,
                                                       via_httpx: bool) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    refused = Target(base_url=f"http://127.0.0.1:{port}/v1", api_kind=ApiKind.OPENAI_CHAT,
                     model="m", http2=via_httpx)
    m = await one(client, refused)
    assert m.error_class is ErrorClass.CONNECT
    assert m.http_status is None


async def test_constant_profile_at_ten_per_second_reports_availability_and_throughput(
        client: HttpClients, simulator: SimulatorHandle) -> None:
    result = await execute(client, target(simulator), Workload(),
                           ConstantProfile(rate=10.0, duration_s=2.0))
    summary = result.summary
    assert summary.attempts == 20
    assert summary.availability == 1.0
    assert summary.requests_per_second is not None
    assert summary.requests_per_second == pytest.approx(20 / summary.duration_s)
    # The measured time runs from the first intended send to the end of the last response:
    # the 20th is intended at 1.9 s and takes at least 50 + 31 x 10 ms, so an open loop at
    # 10/s cannot report more than 20 / 2.26 s (how high a rate sustain keeps up is
    # benchmarks/capacity.py's figure).
    assert summary.duration_s >= 1.9 + 0.36
    assert summary.ttft_ms.p50 is not None
    assert summary.ttft_ms.p50 >= 50.0
    generator = summary.generator
    assert generator.lag_p99_ms is not None
    assert generator.threshold_ms is not None
    assert generator.saturated == (generator.lag_p99_ms > generator.threshold_ms)


async def test_sequential_requests_reuse_one_connection(
        client: HttpClients, simulator: SimulatorHandle, via_httpx: bool) -> None:
    for fault in (None, None, "http_500", None, "truncate", None):
        await one(client, target(simulator, fault, http2=via_httpx))
    if via_httpx:
        pool = client.httpx(http2=True)._transport._pool  # type: ignore[attr-defined]
        assert len(pool.connections) == 1
    else:
        assert client.pool().idle_connections == 1


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        (HttpCheck(path="/health", body_contains="ok"), None),
        (HttpCheck(method="HEAD", path="/health"), None),
        (HttpCheck(path="/health", body_contains="ready"), ErrorClass.PROTOCOL),
        (HttpCheck(path="/nowhere"), ErrorClass.HTTP_4XX),
        (HttpCheck(path="/health", expected_status=204), ErrorClass.PROTOCOL),
    ],
)
async def test_http_probe_checks_status_and_body(
        client: HttpClients, simulator: SimulatorHandle, check: HttpCheck,
        expected: ErrorClass | None) -> None:
    root = simulator.base_url.removesuffix("/v1")
    http = Target(base_url=root, api_kind=ApiKind.HTTP, model="n/a", http_check=check)
    m = await one(client, http)
    assert m.error_class is expected
    assert m.e2e_ms > 0
    assert m.ttft_ms is None
