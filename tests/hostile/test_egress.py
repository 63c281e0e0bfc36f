"""Egress: Google Cloud's metadata server over IPv6 (fd20:ce::254) and Azure's WireServer
(168.63.129.16) are refused like every other metadata address, in every spelling a resolver
accepts, whatever the operator's lists say: at create (422 naming `base_url`) and again when a
name resolves to them at connect time."""

from __future__ import annotations

import ipaddress

import httpx
import pytest

from sustain.probes.client.egress import EgressPolicy

SPELLINGS = [
    # Google Cloud metadata over IPv6
    "[fd20:ce::254]",
    "[FD20:CE::254]",
    "[fd20:ce:0:0:0:0:0:254]",
    "[fd20:00ce:0000::0254]",
    "[fd20:ce::254%25eth0]",
    # Azure WireServer
    "168.63.129.16",
    "2822734096",  # one 32-bit number
    "0xa83f8110",
    "0250.077.0201.020",  # octal parts
    "168.63.33040",  # a.b.c with a 16-bit tail
    "[::ffff:168.63.129.16]",  # IPv4-mapped
    "[::ffff:a83f:8110]",
    "[64:ff9b::a83f:8110]",  # NAT64
    "[2002:a83f:8110::1]",  # 6to4
]


@pytest.mark.parametrize("host", SPELLINGS)
def test_the_gcp_ipv6_and_azure_wireserver_addresses_are_always_denied(host: str) -> None:
    # an allow-list naming everything does not let them through, and neither does no list
    for policy in (EgressPolicy(), EgressPolicy.parse("0.0.0.0/0,::/0,*")):
        reason = policy.check_url(f"http://{host}/metadata/instance")
        assert reason is not None
        assert "always denied" in reason


@pytest.mark.parametrize("address", ["fd20:ce::254", "168.63.129.16", "::ffff:168.63.129.16"])
def test_a_name_resolving_to_them_is_refused_at_connect_time(address: str) -> None:
    reason = EgressPolicy.parse("*.example.com").check_connection(
        "innocent.example.com", [ipaddress.ip_address("10.0.0.1"),
                                 ipaddress.ip_address(address)])
    assert reason is not None
    assert "cloud metadata (always denied)" in reason


def test_their_neighbours_stay_reachable() -> None:
    policy = EgressPolicy()
    for host in ("[fd20:ce::253]", "[fd20:ce::255]", "168.63.129.15", "168.63.129.17"):
        assert policy.check_url(f"http://{host}/") is None, host


@pytest.mark.parametrize("host", ["[fd20:ce::254]", "168.63.129.16", "0xa83f8110",
                                  "[::ffff:a83f:8110]"])
async def test_an_endpoint_at_them_is_a_422_naming_base_url(api: httpx.AsyncClient,
                                                            host: str) -> None:
    r = await api.post("/api/v1/endpoints", json={
        "name": "meta", "base_url": f"http://{host}/v1", "model": "m"})
    assert r.status_code == 422, r.text
    errors = {e["field"]: e["message"] for e in r.json()["errors"]}
    assert "always denied" in errors["base_url"]
    assert (await api.get("/api/v1/endpoints")).json()["items"] == []
