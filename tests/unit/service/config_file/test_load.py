"""Reading config files: the example is valid, and every kind of mistake is reported with the
file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from sustain.service.config_file.load import parse, read
from sustain.service.config_file.yaml_lines import ConfigError

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "sustain.yaml"

GOOD = """\
version: 1
endpoints:
  - name: sim
    base_url: ${SIM_URL}
    model: ${MODEL:-sim-model}
    auth_secret_ref: env:SIM_KEY
workloads:
  - name: short
    max_tokens: 16
probes:
  - name: every-10s
    endpoint: sim
    workload: short
    schedule: {every: 10s, jitter: 2s}
  - name: cron
    endpoint: sim
    workload: {max_tokens: 4}
    profile: {kind: constant, rate: 2, duration_s: 3}
    schedule: {cron: "*/5 * * * *"}
"""


def problems(text: str, environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(text, "sustain.yaml", environ or {})
    return caught.value.lines()


def test_the_example_config_is_valid() -> None:
    config, _ = read(EXAMPLE, environ={})
    assert len(config.probes) >= 3
    assert {p.schedule.cron is not None for p in config.probes} == {True, False}


def test_env_references_are_expanded_and_schedules_parsed() -> None:
    config, located = parse(GOOD, "sustain.yaml", {"SIM_URL": "http://127.0.0.1:9/v1"})
    endpoint = config.endpoints[0]
    assert str(endpoint.base_url) == "http://127.0.0.1:9/v1"
    assert endpoint.model == "sim-model"
    assert endpoint.auth_secret_ref == "env:SIM_KEY"
    assert config.probes[0].schedule.every == 10
    assert config.probes[0].schedule.jitter == 2.0
    assert config.probes[1].schedule.cron == "*/5 * * * *"
    assert located.line_of(("probes", 1, "schedule")) == 19


def test_an_unset_variable_is_an_error_on_its_line() -> None:
    assert problems(GOOD) == ["sustain.yaml:4: endpoints[0].base_url: environment variable "
                              "SIM_URL is not set"]


def test_unknown_fields_are_named_with_their_line() -> None:
    text = GOOD.replace("    workload: short\n", "    workload: short\n    colour: blue\n")
    assert problems(text, {"SIM_URL": "http://x/v1"}) == [
        "sustain.yaml:14: probes[0].colour: unknown field"]


def test_malformed_yaml_gives_the_line() -> None:
    lines = problems("version: 1\nprobes: [\n  {name: a\nendpoints: []\n")
    assert len(lines) == 1
    assert lines[0].startswith("sustain.yaml:4: not valid YAML")


def test_bad_values_give_line_and_field_each() -> None:
    text = """\
endpoints:
  - name: sim
    base_url: http://127.0.0.1:9/v1
    model: m
probes:
  - name: a
    endpoint: sim
    profile: {kind: constant, rate: -1, duration_s: 5}
    schedule: {every: 30x}
  - name: b
    endpoint: sim
    schedule: {every: 10s, jitter: 10s}
  - name: c
    endpoint: sim
    schedule: {cron: "* * *"}
"""
    assert problems(text) == [
        "sustain.yaml:8: probes[0].profile.rate: Input should be greater than 0",
        "sustain.yaml:9: probes[0].schedule.every: a duration such as 30s, 5m, 1h or 1d, or "
        "a number of seconds",
        "sustain.yaml:12: probes[1].schedule: jitter must be smaller than the interval between "
        "ticks",
        "sustain.yaml:15: probes[2].schedule.cron: not a valid cron expression: a cron "
        "expression has five fields: minute hour day month weekday",
    ]


def test_references_and_duplicate_names_are_checked() -> None:
    text = """\
endpoints:
  - {name: sim, base_url: "http://127.0.0.1:9/v1", model: m}
probes:
  - {name: a, endpoint: nope, schedule: {every: 1m}}
  - {name: a, endpoint: sim, workload: missing, schedule: {every: 1m}}
"""
    assert problems(text) == [
        "sustain.yaml:5: probes[1].name: another probe is named 'a'",
        "sustain.yaml:4: probes[0].endpoint: no endpoint named 'nope' in this file",
        "sustain.yaml:5: probes[1].workload: no workload named 'missing' in this file",
    ]


def test_duplicate_keys_and_a_missing_schedule_are_errors() -> None:
    text = "probes:\n  - name: a\n    name: b\n"
    assert problems(text) == ["sustain.yaml:3: probes[0].name: duplicate key"]
    text = "endpoints: []\nprobes:\n  - name: a\n    endpoint: x\n"
    assert problems(text) == ["sustain.yaml:3: probes[0].schedule: Field required"]


def test_secrets_cannot_be_written_inline() -> None:
    text = """\
endpoints:
  - name: sim
    base_url: http://127.0.0.1:9/v1
    model: m
    headers: {Authorization: Bearer sk-123}
"""
    (line,) = problems(text)
    assert line.startswith("sustain.yaml:5: endpoints[0].headers")
    assert "sk-123" not in line
