"""The config file and the command line refuse a TTFT or TPOT threshold on a kind that
answers whole, as the REST API does, naming where it is."""

from __future__ import annotations

import pytest

from sustain.service.cli.oneshot import build
from sustain.service.cli.probe_flags import FlagError, ProbeFlags
from sustain.service.config_file.load import parse
from sustain.service.config_file.yaml_lines import ConfigError

CONFIG = """\
version: 1
endpoints:
  - {name: emb, base_url: "http://127.0.0.1:9/v1", model: m, api_kind: openai-embeddings}
probes:
  - name: p
    endpoint: emb
    schedule: {every: 60s}
    slo: {ttft_ms: 100, e2e_ms: 100}
"""


def test_the_config_file_reports_the_threshold_with_its_line() -> None:
    with pytest.raises(ConfigError) as caught:
        parse(CONFIG, "sustain.yaml", {})
    assert caught.value.lines() == [
        "sustain.yaml:8: probes[0].slo.ttft_ms: an endpoint of api_kind openai-embeddings "
        "answers whole, with no first token or time per output token: judge its latency "
        "with e2e_ms"]
    parse(CONFIG.replace("ttft_ms: 100, ", ""), "sustain.yaml", {})


def test_the_command_line_names_the_flag() -> None:
    flags = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api": "openai-embeddings",
             "slo_tpot_ms": 50.0}
    with pytest.raises(FlagError) as caught:
        build(ProbeFlags.parse(flags))
    assert str(caught.value).startswith(
        "--slo-tpot-ms: an endpoint of api_kind openai-embeddings answers whole")
    build(ProbeFlags.parse(flags | {"slo_tpot_ms": None, "slo_e2e_ms": 50.0}))
