"""The secret, dataset and egress settings: bad entries stop the service at start naming the
variable, and the policies built from them refuse sustain's own credentials whatever their
name."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import typer
from pydantic import SecretStr, ValidationError

from sustain.service.cli.common import load_settings
from sustain.service.config import Settings

DB_URL = "postgresql://sustain:pg-pass-42@db:5432/sustain"
ADMIN = "sk_sustain_GkpUulWzwJXiwbGA4XlqVJhAstehuU53ztfrvFLoLuk"
"""A fixed key printed once by `sustain keys generate` (a predictable one is refused)."""


@pytest.mark.parametrize(("name", "value"), [
    ("SUSTAIN_SECRET_ENV", "OPENAI_API_KEY,bad name"),
    ("SUSTAIN_ALLOWED_TARGETS", "10.0.0.0/33"),
    ("SUSTAIN_DENIED_TARGETS", "http://evil"),
])
def test_a_bad_entry_stops_the_service_naming_the_setting(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str,
        value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(typer.Exit):
        load_settings()
    assert f"invalid setting {name}" in capsys.readouterr().err.replace("\n", "")


def test_the_policies_follow_the_settings(tmp_path: Path) -> None:
    settings = Settings(secret_env="OPENAI_*,HOOK_KEY", secret_dir=tmp_path,
                        dataset_dir=tmp_path, dataset_max_bytes=4096,
                        allowed_targets="10.0.0.0/8,*.svc", denied_targets="10.9.0.0/16",
                        database_url=DB_URL, admin_key=SecretStr(ADMIN))
    reach = settings.reach()
    assert reach.secrets.check("env:OPENAI_API_KEY") is None
    assert reach.secrets.check("env:HOOK_KEY") is None
    assert reach.secrets.check("env:HOME") is not None
    assert reach.secrets.check(f"file:{tmp_path}/key") is None
    assert reach.secrets.forbidden_values >= {DB_URL, "pg-pass-42", ADMIN}
    assert reach.datasets.check(f"{tmp_path}/d.jsonl") is None
    assert reach.datasets.max_bytes == 4096
    assert reach.egress.check_host("10.1.1.1") is None
    assert reach.egress.check_host("10.9.1.1") is not None
    assert reach.egress.check_host("a.svc") is None
    assert reach.egress.check_address(ipaddress.ip_address("192.168.0.1")) is not None


def test_the_database_url_in_use_is_refused_even_when_not_configured() -> None:
    embedded = "postgresql://postgres:embedded-pw@127.0.0.1:5999/sustain"
    reach = Settings(database_url=None).reach(embedded)
    assert {embedded, "embedded-pw"} <= reach.secrets.forbidden_values


def test_by_default_no_secret_or_dataset_is_readable_and_metadata_unreachable() -> None:
    reach = Settings(secret_env="", dataset_dir=None).reach()
    assert reach.secrets.check("env:OPENAI_API_KEY") == "not in SUSTAIN_SECRET_ENV"
    assert reach.secrets.check("file:/var/run/secrets/sustain/key") is None
    assert reach.secrets.check("file:/etc/passwd") is not None
    assert reach.datasets.check("/data/prompts.jsonl") is not None
    assert reach.egress.check_host("169.254.169.254") is not None
    assert reach.egress.check_host("127.0.0.1") is None


def test_settings_validation_names_the_bad_entry() -> None:
    with pytest.raises(ValidationError, match="'a b'"):
        Settings(secret_env="a b")
