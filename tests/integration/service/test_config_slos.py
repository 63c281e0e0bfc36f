"""SLOs in the config file: synced with the file's probes, recounted when what they count
changes, deleted when the file drops them, and read-only over REST."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from sustain.service.app import runtime_of
from sustain.service.config_file.load import parse
from sustain.service.config_file.sync import SyncResult, sync
from sustain.service.config_file.yaml_lines import ConfigError

BASE = """\
endpoints:
  - {name: sim, base_url: "http://127.0.0.1:9/v1", model: m}
probes:
  - {name: p, endpoint: sim, schedule: {every: 1m}, labels: {team: a}}
"""

WITH_SLOS = BASE + """\
slos:
  - name: avail
    probes: [p]
    sli: {kind: availability}
    objective: 0.99
  - name: fast
    probe_labels: {team: a}
    sli: {kind: latency, metric: e2e, threshold_ms: 500}
    objective: 0.9
    window: 7d
"""


async def apply(app: FastAPI, text: str) -> SyncResult:
    state = runtime_of(app)
    config, located = parse(text, "sustain.yaml", {})
    async with state.sessions.begin() as session:
        return await sync(session, config, located, "/etc/sustain.yaml")


async def test_slos_follow_the_file(api: httpx.AsyncClient, app: FastAPI) -> None:
    result = await apply(app, WITH_SLOS)
    assert set(result.created) >= {"slo avail", "slo fast"}
    slos = {s["name"]: s for s in (await api.get("/api/v1/slos")).json()["items"]}
    assert slos["fast"]["sli"] == {"kind": "latency", "metric": "e2e", "threshold_ms": 500.0}
    assert slos["fast"]["window_s"] == 7 * 86400
    assert slos["avail"]["managed_by"] == "/etc/sustain.yaml"

    r = await api.patch(f"/api/v1/slos/{slos['avail']['id']}", json={"objective": 0.5})
    assert r.status_code == 409
    assert "/etc/sustain.yaml" in r.json()["detail"]

    result = await apply(app, WITH_SLOS.replace("objective: 0.9\n", "objective: 0.95\n"))
    assert result.updated == ["slo fast"]
    assert (await apply(app, WITH_SLOS.replace("objective: 0.9\n", "objective: 0.95\n"))
            ).changed is False

    result = await apply(app, BASE)
    assert sorted(result.deleted) == ["slo avail", "slo fast"]
    assert (await api.get("/api/v1/slos")).json()["items"] == []


async def test_an_slo_created_over_rest_blocks_a_file_slo_of_the_same_name(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    await apply(app, BASE)
    r = await api.post("/api/v1/slos", json={
        "name": "avail", "probes": ["p"], "sli": {"kind": "availability"}, "objective": 0.9})
    assert r.status_code == 201, r.text
    with pytest.raises(ConfigError, match=r"slos\[0\]\.name: .*created over REST"):
        await apply(app, WITH_SLOS)
    assert [s["name"] for s in (await api.get("/api/v1/slos")).json()["items"]] == ["avail"]


WITH_NOTIFIERS = BASE + """\
notifiers:
  - name: hook
    kind: webhook
    url: http://127.0.0.1:9/hook
    signing_secret_ref: env:HOOK_KEY
    match: {severity: page}
  - name: slack
    kind: slack
    url_secret_ref: env:SLACK_URL
"""


async def test_notifiers_follow_the_file(api: httpx.AsyncClient, app: FastAPI) -> None:
    result = await apply(app, WITH_NOTIFIERS)
    assert {"notifier hook", "notifier slack"} <= set(result.created)
    listed = {n["name"]: n for n in (await api.get("/api/v1/notifiers")).json()["items"]}
    assert listed["hook"]["match"] == {"severity": "page"}
    assert listed["slack"]["url"] is None
    assert listed["slack"]["url_secret_ref"] == "env:SLACK_URL"
    r = await api.delete(f"/api/v1/notifiers/{listed['hook']['id']}")
    assert r.status_code == 409
    result = await apply(app, WITH_NOTIFIERS.replace("match: {severity: page}",
                                                     "match: {severity: ticket}"))
    assert result.updated == ["notifier hook"]
    result = await apply(app, BASE)
    assert sorted(result.deleted) == ["notifier hook", "notifier slack"]


def test_a_slack_url_in_the_file_is_refused_naming_its_line() -> None:
    bad = BASE + """\
notifiers:
  - {name: s, kind: slack, url: "https://hooks.slack.com/services/T/B/x"}
"""
    with pytest.raises(ConfigError) as caught:
        parse(bad, "sustain.yaml", {})
    assert "sustain.yaml:6" in str(caught.value)
    assert "url_secret_ref" in str(caught.value)
