"""The README's example of each protocol is valid as written: every REST body against the
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

README = Path(__file__).resolve().parents[3] / "README.md"
GENERATION_AND_ITEM_KINDS = {kind.value for kind in ApiKind} - {"http", "openai-chat",
                                                                  "openai-completions"}


def section() -> str:
    text = README.read_text()
    start = text.index("## Protocols (`api_kind`)")
    return text[start:text.index("\n## ", start + 1)]


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
    (yaml_text,) = blocks("yaml")
    config, _ = parse("version: 1\n" + yaml_text, "README.md")
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
