"""docs/protocols.md's example of each protocol is valid as written: every REST body against the
API's own models, the config file through the same parser `sustain validate` uses, every
command line through `sustain probe`'s own flags and build (nothing is sent)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import typer

from sustain.probes.client.target import ApiKind
from sustain.service.cli import app
from sustain.service.cli.oneshot import build
from sustain.service.cli.probe_flags import ProbeFlags
from sustain.service.config_file.load import parse
from sustain.service.schemas.endpoints import EndpointCreate
from sustain.service.schemas.probes import ProbeCreate
from sustain.service.schemas.rag_endpoints import kind_problems

PAGE = Path(__file__).resolve().parents[3] / "docs" / "protocols.md"
GENERATION_AND_ITEM_KINDS = {kind.value for kind in ApiKind} - {"http", "openai-chat",
                                                                  "openai-completions"}


def section() -> str:
    """The page: the protocols, then RAG pipelines and energy per token."""
    text = PAGE.read_text()
    return text[text.index("# Protocols (`api_kind`)"):]


def blocks(language: str) -> list[str]:
    """The section's fenced blocks of `language` ("" for none), in order."""
    found: list[str] = []
    current: list[str] | None = None
    opened = ""
    for line in section().splitlines():
        if line.startswith("```") and current is None:
            current, opened = [], line[3:].strip()
        elif line.startswith("```") and current is not None:
            if opened == language:
                found.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return found


def test_the_rest_bodies_are_valid_endpoints_and_probes() -> None:
    rest = blocks("")[0]
    bodies = [json.loads(body) for body in re.findall(r"^\{.*?\}$", rest,
                                                      flags=re.DOTALL | re.MULTILINE)]
    endpoints = [EndpointCreate.model_validate(b) for b in bodies if "api_kind" in b]
    probes = [ProbeCreate.model_validate(b) for b in bodies if "endpoint_id" in b]
    assert {e.api_kind for e in endpoints} == GENERATION_AND_ITEM_KINDS
    assert len(probes) == len(endpoints)


def test_the_config_file_is_valid() -> None:
    yaml_text = blocks("yaml")[0]
    config, _ = parse("version: 1\n" + yaml_text, "protocols.md")
    assert {e.api_kind for e in config.endpoints} == GENERATION_AND_ITEM_KINDS
    assert len(config.probes) == len(GENERATION_AND_ITEM_KINDS)


def test_the_command_lines_build_runs_of_every_kind() -> None:
    command = typer.main.get_command(app).commands["probe"]  # type: ignore[attr-defined]
    lines = [line for line in blocks("")[1].splitlines() if line.startswith("sustain probe")]
    kinds = set()
    for line in lines:
        context = command.make_context("probe", shlex.split(line)[2:])
        # as typer hands them to the command: repeatable options as lists
        given = {name: list(value) if isinstance(value, tuple) else value
                 for name, value in context.params.items()}
        shot = build(ProbeFlags.parse(given))
        kinds.add(shot.endpoint.api_kind)
        if "--images" in line:
            assert shot.workload.images is not None
    assert kinds >= GENERATION_AND_ITEM_KINDS


def rag_rest_bodies() -> list[dict[str, object]]:
    """The RAG example's REST bodies, in order: its endpoints, then its probe."""
    (rest,) = [block for block in blocks("") if "rag_endpoints" in block]
    return [json.loads(line.split(" ", 2)[2]) for line in rest.splitlines()
            if line.startswith("POST ")]


def test_the_rag_rest_example_is_a_probe_whose_endpoints_fit() -> None:
    *endpoint_bodies, probe_body = rag_rest_bodies()
    endpoints = [EndpointCreate.model_validate(body) for body in endpoint_bodies]
    probe = ProbeCreate.model_validate(probe_body)
    assert probe.workload.rag is not None
    assert probe.rag_endpoints is not None
    assert probe.rag_endpoints.rerank_endpoint_id is not None
    kind = {k + 1: endpoint.api_kind for k, endpoint in enumerate(endpoints)}  # ids in order
    assert kind_problems(kind[probe.endpoint_id], kind[probe.rag_endpoints.embed_endpoint_id],
                         kind[probe.rag_endpoints.rerank_endpoint_id]) == []


def test_the_rag_config_file_example_is_valid_with_the_rest_examples_endpoints() -> None:
    endpoints = json.dumps(rag_rest_bodies()[:-1])
    config, _ = parse(f"version: 1\nendpoints: {endpoints}\n" + blocks("yaml")[1],
                      "protocols.md")
    (probe,) = config.probes
    assert probe.rag_endpoints is not None
    assert (probe.endpoint, probe.rag_endpoints.embed, probe.rag_endpoints.rerank) == \
        ("gen", "emb", "rr")
