"""The `connection` probe option (reuse | new) is taken wherever a probe is described: the
`sustain probe --connection` flag, a config file's workload and the REST body's workload;
any other value is refused, naming where it was given."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sustain.service.cli.oneshot import build
from sustain.service.cli.probe_flags import FlagError, ProbeFlags
from sustain.service.config_file.load import parse
from sustain.service.config_file.yaml_lines import ConfigError
from sustain.service.schemas.probes import ProbeCreate

CONFIG = """\
version: 1
endpoints:
  - name: sim
    base_url: http://127.0.0.1:8001/v1
    model: m
probes:
  - name: cold
    endpoint: sim
    workload: {{connection: {connection}}}
    schedule: {{every: 60s}}
"""


def flags(**given: Any) -> ProbeFlags:
    return ProbeFlags.parse({"base_url": "http://127.0.0.1:8001/v1", "model": "m", **given})


def test_the_connection_flag_sets_the_workload_and_defaults_to_reuse() -> None:
    assert build(flags()).workload.connection == "reuse"
    assert build(flags(connection="new")).workload.connection == "new"


def test_an_unknown_connection_flag_is_refused_naming_it() -> None:
    with pytest.raises(FlagError, match="--connection"):
        flags(connection="sometimes")


def test_a_config_file_workload_takes_connection_new_and_refuses_other_values() -> None:
    config, _ = parse(CONFIG.format(connection="new"), "sustain.yaml", {})
    workload = config.probes[0].workload
    assert not isinstance(workload, str)
    assert workload.connection == "new"
    with pytest.raises(ConfigError) as refused:
        parse(CONFIG.format(connection="pooled"), "sustain.yaml", {})
    assert any("connection" in line for line in refused.value.lines())


def test_a_rest_probe_body_takes_connection_in_its_workload() -> None:
    body = {"name": "cold", "endpoint_id": 1, "interval_s": 60,
            "workload": {"connection": "new"}}
    assert ProbeCreate.model_validate(body).workload.connection == "new"
    with pytest.raises(ValidationError, match="connection"):
        ProbeCreate.model_validate({**body, "workload": {"connection": "keep"}})
