"""Each API kind names its GenAI operation and provider (probes/protocols: one attribute per
kind's module, read through the registry), with the conventions' well-known values where one
applies; a plain HTTP check is no GenAI operation and exports nothing. `server.address` and
`server.port` come from the endpoint's base URL, never with its credentials."""

from __future__ import annotations

import pytest

from sustain.probes.client.target import ApiKind, Target
from sustain.probes.protocols.registry import PROTOCOLS
from sustain.service.otlp.attributes import run_attributes, server_of

WELL_KNOWN_OPERATIONS = {"chat", "text_completion", "embeddings", "generate_content"}
WELL_KNOWN_PROVIDERS = {"openai", "anthropic", "cohere"}


def target(kind: ApiKind, base_url: str = "https://api.example.com/v1") -> Target:
    return Target(base_url=base_url, api_kind=kind, model="m")


@pytest.mark.parametrize("kind", [kind for kind in ApiKind if kind is not ApiKind.HTTP])
def test_every_generating_kind_names_its_operation_and_provider(kind: ApiKind) -> None:
    run = run_attributes(target(kind), "p", "here")
    assert run is not None
    assert run.operation in WELL_KNOWN_OPERATIONS | {"rerank"}
    assert run.provider in WELL_KNOWN_PROVIDERS
    assert (run.operation, run.provider) == (PROTOCOLS[kind].otel_operation,
                                             PROTOCOLS[kind].otel_provider)


def test_the_kinds_map_to_the_conventions_values() -> None:
    named = {kind: (p.otel_operation, p.otel_provider) for kind, p in PROTOCOLS.items()}
    assert named[ApiKind.OPENAI_CHAT] == ("chat", "openai")
    assert named[ApiKind.OPENAI_COMPLETIONS] == ("text_completion", "openai")
    assert named[ApiKind.ANTHROPIC_MESSAGES] == ("chat", "anthropic")
    assert named[ApiKind.OPENAI_EMBEDDINGS] == ("embeddings", "openai")
    assert named[ApiKind.HTTP] == (None, None)


def test_a_plain_http_check_exports_nothing() -> None:
    assert run_attributes(target(ApiKind.HTTP), "p", "here") is None


@pytest.mark.parametrize(("base_url", "server"), [
    ("https://user:secret@API.Example.com:8443/v1?key=secret", ("api.example.com", 8443)),
    ("https://api.example.com/v1", ("api.example.com", 443)),
    ("http://10.0.0.5/v1", ("10.0.0.5", 80)),
    ("http://[::1]:8000/v1", ("::1", 8000)),
    ("http://host:notaport/v1", (None, None)),
])
def test_the_server_is_the_base_urls_host_and_port(base_url: str,
                                                    server: tuple[str | None, int | None]
                                                    ) -> None:
    assert server_of(base_url) == server


def test_the_attributes_carry_the_probe_location_and_server_in_a_fixed_order() -> None:
    run = run_attributes(target(ApiKind.OPENAI_CHAT, "http://127.0.0.1:8000/v1"), "p", "eu")
    assert run is not None
    assert run.pairs() == (
        ("gen_ai.operation.name", "chat"), ("gen_ai.provider.name", "openai"),
        ("gen_ai.request.model", "m"), ("server.address", "127.0.0.1"),
        ("server.port", 8000), ("sustain.probe", "p"), ("sustain.location", "eu"))
