"""Settings come from SUSTAIN_* variables; flags given on the command line win."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import typer

from sustain.service.cli.common import load_settings
from sustain.service.config import Settings
from sustain.service.logging import configure_logging


def test_defaults_bind_loopback_and_use_a_per_user_data_dir(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SUSTAIN_HOST", "SUSTAIN_PORT", "SUSTAIN_DATABASE_URL", "SUSTAIN_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    assert settings.host == "127.0.0.1"
    assert settings.port == 8000
    assert settings.database_url is None
    assert settings.data_dir.name == "sustain"
    assert settings.auto_migrate is True


def test_environment_is_read_and_flags_override_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUSTAIN_PORT", "9100")
    monkeypatch.setenv("SUSTAIN_HOST", "0.0.0.0")
    monkeypatch.setenv("SUSTAIN_AUTO_MIGRATE", "false")
    monkeypatch.setenv("SUSTAIN_DATA_DIR", "/srv/sustain")
    settings = load_settings(port=9200, host=None)
    assert settings.port == 9200
    assert settings.host == "0.0.0.0"
    assert settings.auto_migrate is False
    assert settings.data_dir == Path("/srv/sustain")


def test_invalid_setting_exits_2_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SUSTAIN_DATABASE_URL", "mysql://root@localhost/db")
    with pytest.raises(typer.Exit) as info:
        load_settings()
    assert info.value.exit_code == 2
    assert "SUSTAIN_DATABASE_URL" in capsys.readouterr().err


def test_json_log_format_writes_one_object_per_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging("info", "json")
    try:
        logging.getLogger("sustain.test").info("run %s finished", 7)
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
    line = capsys.readouterr().err.strip().splitlines()[-1]
    record = json.loads(line)
    assert record["message"] == "run 7 finished"
    assert record["level"] == "INFO"
    assert record["name"] == "sustain.test"


def test_a_replicas_database_pool_is_sized_by_its_setting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from sustain.service.runtime import Replica

    monkeypatch.setenv("SUSTAIN_DATABASE_POOL_SIZE", "4")
    replica = Replica(load_settings(), "postgresql://127.0.0.1:9/unused")
    assert replica.engine.pool.size() == 4  # type: ignore[attr-defined]
    monkeypatch.setenv("SUSTAIN_DATABASE_POOL_SIZE", "0")
    with pytest.raises(typer.Exit):
        load_settings()
