"""A running service holds its config file's `${NAME}` to SUSTAIN_CONFIG_ENV on every reload: a
file edited to expand the admin key is not applied (the database keeps the last good file), and
neither the API, the metrics nor the log shows the key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sustain.service.app import create_app, runtime_of
from tests.integration.service.helpers import app_settings, samples_of, serving
from tests.processes import TEST_ADMIN_KEY

CONFIG = """\
version: 1
endpoints:
  - name: sim
    base_url: http://127.0.0.1:9/v1
    model: m
    labels: {owner: "${OWNER}"}
"""


async def test_a_reload_that_would_expand_the_admin_key_is_refused_and_changes_nothing(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OWNER", "inference")
    monkeypatch.setenv("SUSTAIN_ADMIN_KEY", TEST_ADMIN_KEY)
    config = tmp_path / "sustain.yaml"
    config.write_text(CONFIG)
    app = create_app(app_settings(database_url, auto_migrate=False, config=config,
                                  config_env="*", config_reload_s=0))
    async with serving(app) as api:
        listed = (await api.get("/api/v1/endpoints")).json()["items"]
        assert [e["labels"] for e in listed] == [{"owner": "inference"}]

        config.write_text(CONFIG.replace("${OWNER}", "${SUSTAIN_ADMIN_KEY}"))
        caplog.set_level(logging.INFO)
        assert await runtime_of(app).reloader.reload() is None  # type: ignore[union-attr]

        listed = (await api.get("/api/v1/endpoints")).json()["items"]
        assert [e["labels"] for e in listed] == [{"owner": "inference"}]
        metrics = (await api.get("/metrics")).text
        assert ({"result": "invalid"}, 1.0) in samples_of(metrics)["sustain_config_reloads_total"]
        assert f"{config}:6: endpoints[0].labels.owner: environment variable " \
            "SUSTAIN_ADMIN_KEY may not be expanded" in caplog.text
        for text in (caplog.text, metrics, str(listed)):
            assert TEST_ADMIN_KEY not in text
