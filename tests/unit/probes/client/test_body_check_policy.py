"""An `http` check's `body_contains` tells whoever reads the run whether a target's response
holds a text: the service allows it only on targets the operator listed in
SUSTAIN_ALLOWED_TARGETS, and with no allow-list a check that has one sends nothing."""

from __future__ import annotations

import asyncio
import time

import httpx

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.http_check import send_http
from sustain.probes.client.target import ApiKind, HttpCheck, Target
from sustain.probes.measure.sample import ErrorClass


def test_the_services_policy_refuses_body_checks_without_an_allow_list() -> None:
    refusal = EgressPolicy.parse("", "10.0.0.0/8").body_check_refusal()
    assert refusal is not None
    assert "SUSTAIN_ALLOWED_TARGETS" in refusal


def test_the_services_policy_allows_body_checks_on_listed_targets() -> None:
    assert EgressPolicy.parse("10.0.0.0/8").body_check_refusal() is None
    assert EgressPolicy.parse("*.inference.svc").body_check_refusal() is None


def test_a_library_or_one_shot_run_may_check_bodies_of_what_it_reaches() -> None:
    assert EgressPolicy().body_check_refusal() is None


async def test_a_refused_body_check_sends_nothing_and_says_why() -> None:
    connections = 0

    async def count(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(count, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    target = Target(base_url=f"http://127.0.0.1:{port}", api_kind=ApiKind.HTTP, model="n/a")
    check = HttpCheck(path="/", body_contains="ok")
    async with server, httpx.AsyncClient() as client:
        refused = await send_http(client, target, check, {}, time.perf_counter_ns(),
                                  egress=EgressPolicy.parse())
        assert (refused.error_class, refused.http_status) == (ErrorClass.EGRESS_DENIED, None)
        assert refused.error_detail is not None
        assert "SUSTAIN_ALLOWED_TARGETS" in refused.error_detail
        assert connections == 0
        listed = await send_http(client, target, check, {}, time.perf_counter_ns(),
                                 egress=EgressPolicy.parse("127.0.0.0/8"))
        assert (listed.error_class, listed.http_status) == (None, 200)
        status_only = await send_http(client, target, HttpCheck(path="/"), {},
                                      time.perf_counter_ns(), egress=EgressPolicy.parse())
        assert (status_only.error_class, status_only.http_status) == (None, 200)
        assert connections == 2
