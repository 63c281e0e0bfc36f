"""A config file is held to the same policies as the REST API: its endpoints' and notifiers'
URLs and secret references, and its workloads' datasets (named or inline), each refused thing
reported with its line and field, all at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.secret_policy import SecretPolicy
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.service.config_file.load import parse, read
from sustain.service.config_file.yaml_lines import ConfigError
from sustain.service.policy.expansion import ExpansionPolicy
from sustain.service.policy.reach import Reach

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "sustain.yaml"
EXAMPLE_SECRETS = "VLLM_API_KEY,WEBHOOK_SECRET,SLACK_WEBHOOK_URL"
EXAMPLE_EXPANDABLE = ExpansionPolicy(("VLLM_URL", "VLLM_MODEL", "GATEWAY_URL"))

TEXT = """\
version: 1
endpoints:
  - name: meta
    base_url: http://2852039166/latest
    model: m
  - name: sim
    base_url: http://127.0.0.1:9/v1
    model: m
    auth_secret_ref: env:SUSTAIN_DATABASE_URL
workloads:
  - name: stolen
    dataset: /etc/passwd
probes:
  - name: a
    endpoint: sim
    workload: stolen
    schedule: {every: 60s}
  - name: b
    endpoint: sim
    workload: {dataset: /dev/zero}
    schedule: {every: 60s}
notifiers:
  - name: hook
    kind: webhook
    url: http://[::ffff:a9fe:a9fe]/h
  - name: slack
    kind: slack
    url_secret_ref: env:HOME
"""


def test_every_refused_target_secret_and_dataset_is_reported_with_its_line(
        tmp_path: Path) -> None:
    reach = Reach(secrets=SecretPolicy(env_globs=("TEST_*",)),
                  datasets=DatasetPolicy(directory=tmp_path))
    with pytest.raises(ConfigError) as caught:
        parse(TEXT, "sustain.yaml", {}, reach=reach)
    lines = caught.value.lines()
    assert [line.split(": ")[0] for line in lines] == [
        "sustain.yaml:4", "sustain.yaml:9", "sustain.yaml:25", "sustain.yaml:28",
        "sustain.yaml:12", "sustain.yaml:20"]
    text = "\n".join(lines)
    for expected in (
            "endpoints[0].base_url: not reachable under the egress policy",
            "169.254.169.254 is link-local (always denied)",
            "endpoints[1].auth_secret_ref: env:SUSTAIN_DATABASE_URL: sustain's own",
            "notifiers[0].url: not reachable", "notifiers[1].url_secret_ref: env:HOME: not in "
            "SUSTAIN_SECRET_ENV",
            f"workloads[0].dataset: not under SUSTAIN_DATASET_DIR ({tmp_path})",
            "probes[1].workload.dataset: files under /proc, /sys and /dev are never read"):
        assert expected in text, text


def test_without_policies_the_file_is_only_checked_for_its_shape() -> None:
    config, _ = parse(TEXT, "sustain.yaml", {})
    assert len(config.endpoints) == 2


def test_the_operators_lists_apply_to_the_file_too() -> None:
    text = TEXT.split("workloads:")[0].replace("http://2852039166/latest",
                                                "http://10.0.0.1/v1")
    text = text.replace("    auth_secret_ref: env:SUSTAIN_DATABASE_URL\n", "")
    assert parse(text, "f.yaml", {}, reach=Reach())[0].endpoints[0].name == "meta"
    with pytest.raises(ConfigError, match=r"f\.yaml:4: endpoints\[0\]\.base_url: .*10\.0\.0\.0/8"):
        parse(text, "f.yaml", {}, reach=Reach(egress=EgressPolicy.parse(denied="10.0.0.0/8")))


def test_the_example_names_secrets_the_operator_must_allow() -> None:
    allowed = Reach(secrets=SecretPolicy(env_globs=tuple(EXAMPLE_SECRETS.split(","))))
    config, _ = read(EXAMPLE, {}, reach=allowed, expandable=EXAMPLE_EXPANDABLE)
    assert config.notifiers
    with pytest.raises(ConfigError) as caught:
        read(EXAMPLE, {}, reach=Reach(), expandable=EXAMPLE_EXPANDABLE)
    refused = [line for line in caught.value.lines() if "not in SUSTAIN_SECRET_ENV" in line]
    assert len(refused) == 3


def test_one_pass_names_the_refused_expansions_and_the_refused_secrets_together() -> None:
    """A file whose `${NAME}`s may not expand does not validate, and the secrets the policy
    refuses are named in the same pass, not only once the expansions are fixed."""
    with pytest.raises(ConfigError) as caught:
        read(EXAMPLE, {}, reach=Reach(), expandable=ExpansionPolicy())
    lines = caught.value.lines()
    assert len([line for line in lines if "may not be expanded" in line]) == 3
    assert len([line for line in lines if "not in SUSTAIN_SECRET_ENV" in line]) == 3
