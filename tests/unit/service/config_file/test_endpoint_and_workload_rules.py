"""A config file is held to the REST API's rules for tokenizers, body checks and headers: a
tokenizer outside SUSTAIN_DATASET_DIR, a `body_contains` without an allow-list, a header the
HTTP client sets itself and headers beyond their bound are each reported with line and
field."""

from __future__ import annotations

from pathlib import Path

import pytest

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.service.config_file.load import parse
from sustain.service.config_file.yaml_lines import ConfigError
from sustain.service.policy.reach import Reach
from sustain.service.schemas.common import MAX_HEADER_BYTES

TEXT = """\
version: 1
endpoints:
  - name: health
    base_url: http://127.0.0.1:9
    model: n/a
    api_kind: http
    http_check: {path: /health, body_contains: ok}
workloads:
  - name: counted
    tokenizer: /etc/shadow
probes:
  - name: a
    endpoint: health
    workload: counted
    schedule: {every: 60s}
  - name: b
    endpoint: health
    workload: {tokenizer: TOKENIZER}
    schedule: {every: 60s}
"""


def problems(text: str, reach: Reach | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(text, "sustain.yaml", {}, reach=reach)
    return caught.value.lines()


def test_tokenizers_outside_the_dataset_dir_are_reported_with_their_lines(
        tmp_path: Path) -> None:
    (tmp_path / "tok.json").write_text("{}")
    (tmp_path / "escape.json").symlink_to("/etc/passwd")
    text = TEXT.replace("TOKENIZER", str(tmp_path / "escape.json"))
    reach = Reach(egress=EgressPolicy.parse("127.0.0.0/8"),
                  datasets=DatasetPolicy(directory=tmp_path))
    assert problems(text, reach) == [
        f"sustain.yaml:10: workloads[0].tokenizer: not under SUSTAIN_DATASET_DIR ({tmp_path})",
        f"sustain.yaml:18: probes[1].workload.tokenizer: not under SUSTAIN_DATASET_DIR "
        f"({tmp_path})"]
    allowed = TEXT.replace("/etc/shadow", str(tmp_path / "tok.json")).replace(
        "TOKENIZER", str(tmp_path / "tok.json"))
    assert parse(allowed, "sustain.yaml", {}, reach=reach)[0].workloads[0].tokenizer


def test_a_body_check_without_an_allow_list_is_reported_at_its_line() -> None:
    text = TEXT.split("workloads:")[0]
    lines = problems(text, Reach(egress=EgressPolicy.parse()))
    assert len(lines) == 1
    assert lines[0].startswith("sustain.yaml:7: endpoints[0].http_check.body_contains: "
                               "body_contains is allowed only on targets listed in "
                               "SUSTAIN_ALLOWED_TARGETS")
    assert parse(text, "f.yaml", {}, reach=Reach(egress=EgressPolicy.parse("127.0.0.1")))


@pytest.mark.parametrize("header", ["Content-Length", "transfer-encoding", "Host",
                                    "Connection", "Keep-Alive", "TE", "Upgrade", "Expect"])
def test_a_header_the_client_sets_itself_is_reported_at_its_line(header: str) -> None:
    text = TEXT.split("workloads:")[0].replace(
        "    http_check: {path: /health, body_contains: ok}\n",
        f"    headers:\n      X-Tenant: a\n      {header}: '5'\n")
    [line] = problems(text)
    assert line.startswith(f"sustain.yaml:8: endpoints[0].headers: {header}: set by the HTTP "
                           "client itself")


def test_headers_beyond_their_size_are_reported() -> None:
    value = "v" * 4000
    headers = "".join(f"      X-H{i}: {value}\n" for i in range(5))
    text = TEXT.split("workloads:")[0].replace(
        "    http_check: {path: /health, body_contains: ok}\n", f"    headers:\n{headers}")
    [line] = problems(text)
    assert line.startswith(f"sustain.yaml:8: endpoints[0].headers: at most {MAX_HEADER_BYTES} "
                           "bytes of header names and values")
