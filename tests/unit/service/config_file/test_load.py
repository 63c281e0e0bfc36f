"""Reading config files: the example is valid, and every kind of mistake is reported with the
file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from sustain.service.config import Settings
from sustain.service.config_file.load import parse, read
from sustain.service.config_file.yaml_lines import ConfigError
from sustain.service.policy.expansion import ExpansionPolicy

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "sustain.yaml"
EXPANDABLE = ExpansionPolicy(("SIM_URL", "MODEL"))
"""What GOOD expands (SUSTAIN_CONFIG_ENV=SIM_URL,MODEL)."""

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
        parse(text, "sustain.yaml", environ or {}, expandable=EXPANDABLE)
    return caught.value.lines()


def test_the_example_config_is_valid() -> None:
    config, _ = read(EXAMPLE, environ={}, expandable=ExpansionPolicy(
        ("VLLM_URL", "VLLM_MODEL", "GATEWAY_URL")))
    assert len(config.probes) >= 3
    assert {p.schedule.cron is not None for p in config.probes} == {True, False}


def test_env_references_are_expanded_and_schedules_parsed() -> None:
    config, located = parse(GOOD, "sustain.yaml", {"SIM_URL": "http://127.0.0.1:9/v1"},
                            expandable=EXPANDABLE)
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


def test_booleans_are_not_numbers_and_extra_body_must_be_storable() -> None:
    text = """\
endpoints:
  - {name: sim, base_url: "http://127.0.0.1:9/v1", model: m}
probes:
  - name: a
    endpoint: sim
    profile: {kind: constant, rate: true, duration_s: 5}
    workload: {extra_body: {min_tokens: .inf}}
    schedule: {every: true}
"""
    assert problems(text) == [
        "sustain.yaml:7: probes[0].workload.extra_body: NaN and infinite numbers cannot be "
        "stored (at ['min_tokens'])",
        "sustain.yaml:6: probes[0].profile.rate: Input should be a valid number",
        "sustain.yaml:8: probes[0].schedule.every: Input should be a valid integer",
    ]


def test_profiles_beyond_the_load_limits_are_problems_with_their_lines() -> None:
    text = """\
endpoints:
  - {name: sim, base_url: "http://127.0.0.1:9/v1", model: m}
probes:
  - name: flood
    endpoint: sim
    profile: {kind: constant, rate: 10000, duration_s: 60}
    schedule: {every: 1h}
  - name: ramp
    endpoint: sim
    profile:
      kind: steps
      stages:
        - {rate: 10, duration_s: 1}
        - {concurrency: 5000, duration_s: 1}
    schedule: {every: 1h}
"""
    with pytest.raises(ConfigError) as caught:
        parse(text, "sustain.yaml", {}, Settings().load_limits())
    assert caught.value.lines() == [
        "sustain.yaml:6: probes[0].profile.rate: 10,000 requests/s; at most 1,000 "
        "(SUSTAIN_MAX_RATE)",
        "sustain.yaml:14: probes[1].profile.stages[1].concurrency: concurrency is 5,000; at "
        "most 2,000 (SUSTAIN_MAX_CONCURRENCY)",
    ]
    parse(text, "sustain.yaml", {})  # without limits (sustain rules), only the shape counts


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


def test_an_slo_names_probes_of_its_own_file() -> None:
    text = """\
endpoints:
  - {name: sim, base_url: "http://127.0.0.1:9/v1", model: m}
probes:
  - {name: a, endpoint: sim, schedule: {every: 1m}}
slos:
  - name: avail
    probes:
      - a
      - elsewhere
    sli: {kind: availability}
    objective: 0.99
"""
    assert problems(text) == [
        "sustain.yaml:9: slos[0].probes[1]: no probe named 'elsewhere' in this file"]


def test_duplicate_keys_and_a_missing_schedule_are_errors() -> None:
    text = "probes:\n  - name: a\n    name: b\n"
    assert problems(text) == ["sustain.yaml:3: probes[0].name: duplicate key"]
    text = "endpoints: []\nprobes:\n  - name: a\n    endpoint: x\n"
    assert problems(text) == ["sustain.yaml:3: probes[0].schedule: Field required",
                              "sustain.yaml:4: probes[0].endpoint: no endpoint named 'x' in "
                              "this file"], "an undeclared endpoint in the same pass"


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


def test_an_unset_variable_does_not_hide_the_files_other_problems() -> None:
    text = GOOD.replace("    max_tokens: 16\n", "    max_tokens: -1\n")
    assert problems(text) == [
        "sustain.yaml:4: endpoints[0].base_url: environment variable SIM_URL is not set",
        "sustain.yaml:9: workloads[0].max_tokens: Input should be greater than or equal to 1"]


@pytest.mark.parametrize("text", [
    "probes: " + "[" * 5000 + "]" * 5000 + "\n",
    "probes:\n" + "".join("  " * i + "- \n" for i in range(1, 200)),
    "a: &a {b: *a}\nprobes: *a\n",
])
def test_deep_or_recursive_yaml_is_one_problem_not_a_crash(text: str) -> None:
    (line,) = problems(text)
    assert "nested deeper than 64 levels" in line or "recursive alias" in line


def test_a_billion_laughs_file_stops_at_the_value_bound() -> None:
    text = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
    (line,) = problems(text)
    assert "expands to more than 100,000 values" in line


def test_a_file_over_the_size_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"# " + b"x" * (4 * 1024 * 1024) + b"\n")
    with pytest.raises(ConfigError, match="larger than 4,194,304 bytes"):
        read(path, environ={})


def test_a_sessions_workload_under_an_open_loop_is_a_problem_with_its_line() -> None:
    text = """\
endpoints:
  - {name: sim, base_url: "http://127.0.0.1:9/v1", model: m}
workloads:
  - {name: chats, turns: 3}
probes:
  - name: a
    endpoint: sim
    workload: chats
    profile: {kind: constant, rate: 1, duration_s: 5}
    schedule: {every: 1m}
  - name: b
    endpoint: sim
    workload: {turns: 2}
    profile: {kind: concurrency, users: 2, duration_s: 5}
    schedule: {every: 1m}
"""
    (problem,) = problems(text)
    assert problem.startswith("sustain.yaml:9: probes[0].profile: sessions run under")


def test_a_probe_lists_its_locations_and_a_bad_one_is_named_with_its_line() -> None:
    text = GOOD.replace("    schedule: {every: 10s, jitter: 2s}\n",
                        "    schedule: {every: 10s, jitter: 2s}\n"
                        "    locations: [eu-west-1, us-east-1]\n")
    config, _ = parse(text, "sustain.yaml", {"SIM_URL": "http://x/v1"},
                      expandable=EXPANDABLE)
    assert config.probes[0].locations == ["eu-west-1", "us-east-1"]
    assert config.probes[1].locations == ["default"]
    bad = text.replace("[eu-west-1, us-east-1]", "[eu-west-1, EU West]")
    (line,) = problems(bad, {"SIM_URL": "http://x/v1"})
    assert line.startswith("sustain.yaml:15: probes[0].locations[1]: 'EU West' is not a "
                           "location name")
