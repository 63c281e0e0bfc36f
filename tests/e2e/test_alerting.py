"""Alerting end to end with real parts: three `sustain serve` replicas probe the simulator
under an availability SLO with test-scaled burn-rate windows, and notify a signed webhook and
Debian's Alertmanager (which routes to its own webhook). Half the requests start failing: the
page alert reaches both, once. Healed, both get the resolve. A silence suppresses the next
episode. Every transition is delivered exactly once whichever replica evaluates it."""

from __future__ import annotations

import hashlib
import hmac
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_replicas import db
from tests.processes import SustainProcess, admin_client, free_port, wait_until
from tests.receivers import Receiver

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
SECRET = "e2e-signing-key"
PAGE = {"alertname": "SustainSloBurnRate", "slo": "sim-availability", "tier": "page_fast"}

AM_CONFIG = """\
route:
  receiver: hook
  group_by: [alertname, slo, tier]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: {url}/am-hook
        send_resolved: true
"""


def page_posts(receiver: Receiver, transition: str) -> list[float]:
    """Arrival times of signed webhook posts of the page tier's `transition`."""
    out = []
    for r in receiver.answered("/hook"):
        body = r.json()
        labels = body["alert"]["labels"]
        if body["transition"] == transition and all(labels.get(k) == v
                                                    for k, v in PAGE.items()):
            out.append(r.at)
    return out


def am_statuses(receiver: Receiver) -> list[str]:
    """Statuses of the page tier's alert in Alertmanager's webhook notifications."""
    out = []
    for r in receiver.answered("/am-hook"):
        for alert in r.json()["alerts"]:
            if all(alert["labels"].get(k) == v for k, v in PAGE.items()):
                out.append(alert["status"])
    return out


def switch(sim_port: int, rate: float) -> float:
    r = httpx.put(f"http://127.0.0.1:{sim_port}/sim/fault",
                  json={"fault": "http_500", "fault_rate": rate}, timeout=5)
    assert r.status_code == 200, r.text
    return time.monotonic()


@pytest.mark.skipif(ALERTMANAGER is None, reason="Debian's prometheus-alertmanager is not "
                    "installed (.ci/run installs it)")
def test_page_alert_reaches_alertmanager_and_webhook_once_then_resolves_and_is_silenced(
        tmp_path: Path, database_url: str) -> None:
    assert ALERTMANAGER is not None
    sim_port, am_port = free_port(), free_port()
    ports = [free_port() for _ in range(3)]
    with Receiver() as receiver:
        (tmp_path / "am.yml").write_text(AM_CONFIG.format(url=receiver.url))
        alertmanager = SustainProcess(
            [f"--config.file={tmp_path / 'am.yml'}", f"--storage.path={tmp_path / 'am'}",
             f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="],
            tmp_path / "alertmanager.log", program=[ALERTMANAGER])
        simulator = SustainProcess(
            ["simulate", "--port", str(sim_port), "--ttft-ms", "5", "--itl-ms", "1",
             "--output-tokens", "4"], tmp_path / "simulator.log")
        env = {"SUSTAIN_DATABASE_URL": database_url, "SUSTAIN_ALERT_EVALUATION_S": "1",
               "SUSTAIN_NOTIFY_POLL_S": "0.5", "SUSTAIN_HEARTBEAT_S": "1",
               "SUSTAIN_ALERTMANAGER_RESEND_S": "5", "E2E_HOOK_KEY": SECRET,
               "SUSTAIN_SECRET_ENV": "E2E_*",
               "SUSTAIN_LOG_LEVEL": "info"}
        replicas = [SustainProcess(["serve", "--port", str(port)], tmp_path / f"r{i}.log",
                                   env={**env, "SUSTAIN_REPLICA_ID": f"r{i}"})
                    for i, port in enumerate(ports)]
        with alertmanager, simulator, replicas[0], replicas[1], replicas[2]:
            alertmanager.wait_http(f"http://127.0.0.1:{am_port}/-/ready")
            simulator.wait_http(f"http://127.0.0.1:{sim_port}/v1/models")
            for process, port in zip(replicas, ports, strict=True):
                process.wait_http(f"http://127.0.0.1:{port}/readyz")
            api = admin_client(f"http://127.0.0.1:{ports[0]}")
            _configure(api, sim_port, am_port, receiver)

            time.sleep(8)  # healthy: nothing fires
            assert page_posts(receiver, "firing") == []

            # The waits' timeouts only guard against a hang: the alert fires ~5 s after the
            # failures start (the 12 s window's burn must reach 2) and resolves ~4 s after
            # they stop; the latencies are printed at the end, not bounded.
            broke = switch(sim_port, 0.5)
            receiver.wait_for(lambda _: bool(page_posts(receiver, "firing")), 60)
            webhook_latency = page_posts(receiver, "firing")[0] - broke
            receiver.wait_for(lambda _: "firing" in am_statuses(receiver), 30)
            am_latency = receiver.answered("/am-hook")[0].at - broke
            def listed_in_alertmanager() -> list[dict[str, Any]]:
                listed = httpx.get(f"http://127.0.0.1:{am_port}/api/v2/alerts",
                                   timeout=5).json()
                return [a for a in listed if a["labels"].get("tier") == "page_fast"]
            # a hang guard: Alertmanager lists what it notified of, once its API catches up
            wait_until(lambda: bool(listed_in_alertmanager()), 30, 0.5)
            mine = listed_in_alertmanager()
            assert mine[0]["generatorURL"].startswith("http://127.0.0.1:")

            healed = switch(sim_port, 0.0)
            receiver.wait_for(lambda _: bool(page_posts(receiver, "resolved")), 60)
            resolve_latency = page_posts(receiver, "resolved")[0] - healed
            receiver.wait_for(lambda _: "resolved" in am_statuses(receiver), 30)

            silence = api.post("/api/v1/silences", json={
                "matchers": [{"name": "slo", "value": "sim-availability"}],
                "ends_at": "2099-01-01T00:00:00Z", "comment": "e2e", "created_by": "test"})
            assert silence.status_code == 201, silence.text
            time.sleep(6)  # let the short window clear of the first episode
            switch(sim_port, 0.5)
            wait_until(lambda: _page_events(database_url).count("firing") == 2, 60, 0.5)
            time.sleep(3)  # the behaviour: six notifier polls go by and nothing is sent
            switch(sim_port, 0.0)
            assert len(page_posts(receiver, "firing")) == 1, "the silence held it back"
            silenced = db(database_url, "SELECT count(*) AS n FROM deliveries "
                                        "WHERE state = 'silenced'")[0]["n"]
            assert silenced >= 1

            for process in replicas:
                assert process.stop() == 0
        _check_exactly_once(database_url, receiver)
        movers = db(database_url, "SELECT replica, count(*) AS n FROM alert_events "
                                  "GROUP BY replica ORDER BY replica")
        senders = db(database_url, "SELECT leased_by, count(*) AS n FROM deliveries "
                                   "GROUP BY leased_by ORDER BY leased_by")
        print(f"\nalert latency from failure start: webhook {webhook_latency:.1f} s, "
              f"Alertmanager webhook {am_latency:.1f} s; resolve {resolve_latency:.1f} s; "
              f"transitions by replica {[tuple(r) for r in movers]}, deliveries by replica "
              f"{[tuple(r) for r in senders]}")


def _configure(api: httpx.Client, sim_port: int, am_port: int, receiver: Receiver) -> None:
    endpoint = api.post("/api/v1/endpoints", json={
        "name": "sim", "base_url": f"http://127.0.0.1:{sim_port}/v1", "model": "sim-model"})
    assert endpoint.status_code == 201, endpoint.text
    probe = api.post("/api/v1/probes", json={
        "name": "sim-chat", "endpoint_id": endpoint.json()["id"], "interval_s": 1,
        "profile": {"kind": "constant", "rate": 20, "duration_s": 0.5},
        "workload": {"max_tokens": 4}})
    assert probe.status_code == 201, probe.text
    slo = api.post("/api/v1/slos", json={
        "name": "sim-availability", "probes": ["sim-chat"], "sli": {"kind": "availability"},
        "objective": 0.9, "window": "1h", "tiers": [
            {"name": "page_fast", "severity": "page", "factor": 2,
             "long_window_s": 12, "short_window_s": 4},
            {"name": "ticket_slow", "severity": "ticket", "factor": 1,
             "long_window_s": 60, "short_window_s": 10, "enabled": False}]})
    assert slo.status_code == 201, slo.text
    for body in ({"name": "hook", "kind": "webhook", "url": f"{receiver.url}/hook",
                  "signing_secret_ref": "env:E2E_HOOK_KEY", "match": {"severity": "page"}},
                 {"name": "am", "kind": "alertmanager", "url": f"http://127.0.0.1:{am_port}"}):
        r = api.post("/api/v1/notifiers", json=body)
        assert r.status_code == 201, r.text


def _page_events(database_url: str) -> list[str]:
    rows = db(database_url, "SELECT e.transition FROM alert_events e JOIN alerts a USING "
                            "(fingerprint) WHERE a.labels->>'tier' = 'page_fast' ORDER BY e.id")
    return [r["transition"] for r in rows]


def _check_exactly_once(database_url: str, receiver: Receiver) -> None:
    """Each recorded transition of the page tier reached the webhook once, signed, unless
    silenced; the transitions were made by more than one replica's evaluator or not, but
    never twice."""
    events = db(database_url, "SELECT e.fingerprint, e.transition, e.replica FROM alert_events e"
                              " JOIN alerts a USING (fingerprint) "
                              "WHERE a.labels->>'tier' = 'page_fast' ORDER BY e.id")
    assert [e["transition"] for e in events] == ["firing", "resolved", "firing", "resolved"] \
        or [e["transition"] for e in events] == ["firing", "resolved", "firing"]
    posts = receiver.answered("/hook")
    for post in posts:
        stamp = post.headers["x-sustain-timestamp"]
        mac = hmac.new(SECRET.encode(), f"{stamp}.".encode() + post.body, hashlib.sha256)
        assert post.headers["x-sustain-signature"] == f"sha256={mac.hexdigest()}"
    sent = Counter((p.json()["alert"]["fingerprint"], p.json()["transition"]) for p in posts)
    assert all(n == 1 for n in sent.values()), sent
    assert sent[(events[0]["fingerprint"], "firing")] == 1
    assert sent[(events[0]["fingerprint"], "resolved")] == 1
    deliveries = db(database_url, "SELECT state, count(*) AS n FROM deliveries d JOIN notifiers"
                                  " n ON n.id = d.notifier_id WHERE n.name = 'hook' "
                                  "GROUP BY state")
    assert {r["state"]: r["n"] for r in deliveries}.get("failed") is None
