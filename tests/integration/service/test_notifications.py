"""Notifiers deliver each alert transition from the Postgres outbox: signed webhooks, Slack
messages and Alertmanager v2 alerts, retried with backoff without holding back the others,
suppressed by silences, in order per alert, once however many workers drain the outbox."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from sustain.service.alerting.delivery import DeliveryPolicy, DeliveryWorker
from sustain.service.app import create_app, runtime_of
from sustain.service.db import alerts as alert_queries
from sustain.service.db import deliveries
from sustain.service.evaluation.candidates import Candidate
from tests.integration.service.helpers import app_settings, samples_of, serving
from tests.integration.service.storage import fetch
from tests.receivers import Receiver

LABELS = {"alertname": "SustainEndpointDown", "probe": "chat", "severity": "page"}
FAST = DeliveryPolicy(poll_s=0.1, lease_s=30, max_attempts=3, retry_base_s=0.2,
                      retry_max_s=1.0, quick_wait_s=0.01, resend_s=0.5)


@pytest.fixture
def app(database_url: str) -> FastAPI:
    """The app's own worker and evaluator stay idle so each test drives its workers."""
    return create_app(app_settings(database_url, auto_migrate=False,
                               notify_poll_s=60, alert_evaluation_s=3600,
                               external_url="https://sustain.example"))


@pytest.fixture
async def api(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(app) as client:
        yield client


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


@pytest.fixture
async def worker(app: FastAPI, api: httpx.AsyncClient  # noqa: ARG001 - api: the app runs
                 ) -> AsyncIterator[DeliveryWorker]:
    state = runtime_of(app)
    async with httpx.AsyncClient() as client:
        yield DeliveryWorker(state.sessions, client, "w1", "https://sustain.example", FAST,
                             observe=state.metrics.observe_notification, reach=state.reach)


async def move(app: FastAPI, condition: bool, at: datetime,
               labels: dict[str, str] | None = None) -> str | None:
    state = runtime_of(app)
    candidate = Candidate(labels=labels or LABELS, condition=condition,
                          annotations={"summary": "chat is down"})
    async with state.sessions.begin() as session:
        return await alert_queries.advance(session, candidate, at, timedelta(0), None, "r1")


async def add_notifier(api: httpx.AsyncClient, **body: object) -> dict[str, Any]:
    r = await api.post("/api/v1/notifiers", json={"timeout_s": 1, **body})
    assert r.status_code == 201, r.text
    result: dict[str, Any] = r.json()
    return result


async def test_webhook_is_signed_and_carries_the_alert(
        api: httpx.AsyncClient, app: FastAPI, worker: DeliveryWorker, receiver: Receiver,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_HOOK_KEY", "s3cret-key")
    created = await add_notifier(api, name="hook", kind="webhook", url=f"{receiver.url}/h",
                                 signing_secret_ref="env:TEST_HOOK_KEY")
    assert created["signing_secret_ref"] == "env:TEST_HOOK_KEY"
    now = datetime.now(UTC)
    assert await move(app, True, now) == "firing"
    await worker.drain()

    (got,) = receiver.answered("/h")
    stamp = got.headers["x-sustain-timestamp"]
    expected = hmac.new(b"s3cret-key", f"{stamp}.".encode() + got.body,
                        hashlib.sha256).hexdigest()
    assert got.headers["x-sustain-signature"] == f"sha256={expected}"
    body = got.json()
    assert body["status"] == "firing"
    assert body["transition"] == "firing"
    assert body["alert"]["labels"] == LABELS
    assert body["alert"]["startsAt"] is not None
    assert body["alert"]["endsAt"] is None
    fingerprint = body["alert"]["fingerprint"]
    link = body["alert"]["generatorURL"]
    assert link == f"https://sustain.example/api/v1/alerts/{fingerprint}"
    assert (await api.get(f"/api/v1/alerts/{fingerprint}")).json()["state"] == "firing"
    assert got.headers["x-sustain-delivery"] == str(body["delivery_id"])

    log = (await api.get("/api/v1/deliveries")).json()["items"]
    assert [(d["state"], d["attempts"], d["last_status"]) for d in log] == [
        ("delivered", 1, 200)]
    assert "s3cret" not in str(log)
    assert "s3cret" not in (await api.get("/metrics")).text


async def test_failing_notifier_backs_off_and_gives_up_without_holding_back_others(
        api: httpx.AsyncClient, app: FastAPI, receiver: Receiver) -> None:
    state = runtime_of(app)
    # Backoff of 1 s between tries: the second drain below comes right after the first (a
    # request or two later), far within it, however slow the machine.
    policy = replace(FAST, retry_base_s=1.0, retry_max_s=1.0)
    async with httpx.AsyncClient() as client:
        worker = DeliveryWorker(state.sessions, client, "w1", "https://sustain.example", policy,
                                observe=state.metrics.observe_notification, reach=state.reach)
        await _backs_off_and_gives_up(api, app, worker, receiver)
    metrics = samples_of((await api.get("/metrics")).text)["sustain_notifications_total"]
    assert ({"notifier": "bad", "result": "failed"}, 1.0) in metrics
    assert ({"notifier": "bad", "result": "retry"}, 2.0) in metrics
    assert ({"notifier": "good", "result": "delivered"}, 1.0) in metrics


async def _backs_off_and_gives_up(api: httpx.AsyncClient, app: FastAPI, worker: DeliveryWorker,
                                  receiver: Receiver) -> None:
    with Receiver() as broken:
        broken.statuses = [503] * 100
        bad = await add_notifier(api, name="bad", kind="webhook", url=broken.url)
        await add_notifier(api, name="good", kind="webhook", url=receiver.url)
        await move(app, True, datetime.now(UTC))
        await worker.drain()
        assert len(receiver.answered()) == 1
        assert len(broken.answered()) == 3, "one attempt: the quick tries of tenacity"
        (pending,) = (await api.get("/api/v1/deliveries",
                                    params={"notifier_id": bad["id"]})).json()["items"]
        assert (pending["state"], pending["attempts"], pending["last_status"]) == (
            "pending", 1, 503)
        assert pending["last_error"] == "HTTP 503"
        await worker.drain()
        assert len(broken.answered()) == 3, "backing off: not due yet"
        async with asyncio.timeout(60):  # two backoffs of 1 s, then it gives up (hang guard)
            while True:
                await asyncio.sleep(0.1)
                await worker.drain()
                log = (await api.get("/api/v1/deliveries",
                                     params={"notifier_id": bad["id"]})).json()["items"]
                if log[0]["state"] != "pending":
                    break
        assert (log[0]["state"], log[0]["attempts"]) == ("failed", 3)
        assert len(broken.answered()) == 9


async def test_a_stalled_notifier_does_not_delay_another(
        api: httpx.AsyncClient, app: FastAPI, worker: DeliveryWorker,
        receiver: Receiver) -> None:
    with Receiver() as slow:
        slow.stall_s = 3.0
        await add_notifier(api, name="slow", kind="webhook", url=slow.url)
        await add_notifier(api, name="fast", kind="webhook", url=receiver.url)
        await move(app, True, datetime.now(UTC))
        tasks = await worker.pass_once()
        await asyncio.to_thread(receiver.wait_for, lambda got: len(got) == 1, 30.0)
        # The fast one arrived while the slow one was still waiting out its 1 s timeout:
        # held back, it could come only after that timeout had run out.
        assert not all(task.done() for task in tasks), "delivered only after the stalled one"
        await asyncio.to_thread(slow.wait_for, lambda got: len(got) == 1, 30.0)
        (fast,), (stalled,) = receiver.answered(), slow.answered()
        assert fast.at < stalled.at + 1.0, "delivered only after the stalled one timed out"
        await asyncio.gather(*tasks)
    rows = await fetch(runtime_of(app).engine,
                       "SELECT n.name, d.state, d.last_error FROM deliveries d "
                       "JOIN notifiers n ON n.id = d.notifier_id ORDER BY n.name")
    assert rows == [("fast", "delivered", None), ("slow", "pending", "timed out")]


async def test_a_dead_notifier_holds_at_most_its_share_of_leases_and_disabled_ones_none(
        api: httpx.AsyncClient, app: FastAPI, worker: DeliveryWorker,
        receiver: Receiver) -> None:
    with Receiver() as slow:
        slow.stall_s = 2.0
        await add_notifier(api, name="slow", kind="webhook", url=slow.url, timeout_s=5)
        off = await add_notifier(api, name="off", kind="webhook", url=receiver.url)
        now = datetime.now(UTC)
        await move(app, True, now, {**LABELS, "probe": "before"})
        async with runtime_of(app).sessions.begin() as session:
            assert await deliveries.dispatch(session) == 1
        await api.patch(f"/api/v1/notifiers/{off['id']}", json={"enabled": False})
        for i in range(20):
            await move(app, True, now, {**LABELS, "probe": f"p{i}"})
        first = await worker.pass_once()
        second = await worker.pass_once()
        leased = await fetch(runtime_of(app).engine,
                             "SELECT count(*) FROM deliveries WHERE leased_until > now()")
        assert (len(first), len(second)) == (FAST.per_notifier, 0)
        assert leased == [(FAST.per_notifier,)]
        await asyncio.gather(*first)
    assert receiver.answered() == []
    off_rows = await fetch(runtime_of(app).engine,
                           "SELECT state FROM deliveries d JOIN notifiers n ON "
                           "n.id = d.notifier_id WHERE n.name = 'off'")
    assert off_rows == [("pending",)], "dispatched before it was disabled: waits, unsent; " \
        "nothing is dispatched to it while disabled"


async def test_silence_suppresses_delivery_and_the_resolve_that_follows(
        api: httpx.AsyncClient, app: FastAPI, worker: DeliveryWorker,
        receiver: Receiver) -> None:
    await add_notifier(api, name="hook", kind="webhook", url=receiver.url)
    now = datetime.now(UTC)
    r = await api.post("/api/v1/silences", json={
        "matchers": [{"name": "probe", "value": "ch.*", "is_regex": True}],
        "ends_at": (now + timedelta(hours=1)).isoformat(), "comment": "maintenance",
        "created_by": "ops"})
    assert r.status_code == 201, r.text
    silence = r.json()
    assert silence["state"] == "active"
    other = {**LABELS, "probe": "embed"}
    await move(app, True, now)
    await move(app, True, now, other)
    await worker.drain()
    assert [r.json()["alert"]["labels"]["probe"] for r in receiver.answered()] == ["embed"]
    await move(app, False, now + timedelta(seconds=10))
    await worker.drain()
    await move(app, True, now + timedelta(seconds=20))
    await worker.drain()
    assert (await api.delete(f"/api/v1/silences/{silence['id']}")).status_code == 204
    assert (await api.get(f"/api/v1/silences/{silence['id']}")).json()["state"] == "expired"
    await move(app, False, now + timedelta(seconds=30))
    await worker.drain()
    states = await fetch(runtime_of(app).engine,
                         "SELECT transition, state FROM deliveries WHERE fingerprint IN "
                         "(SELECT fingerprint FROM alerts WHERE labels->>'probe' = 'chat') "
                         "ORDER BY id")
    assert states == [("firing", "silenced"), ("resolved", "silenced"),
                      ("firing", "silenced"), ("resolved", "skipped")]
    assert [r.json()["alert"]["labels"]["probe"] for r in receiver.answered()] == ["embed"]

    await move(app, True, now + timedelta(seconds=40))
    await worker.drain()
    assert [r.json()["alert"]["labels"]["probe"] for r in receiver.answered()] == [
        "embed", "chat"]


async def test_resolved_never_overtakes_firing_and_match_routes(
        api: httpx.AsyncClient, app: FastAPI, worker: DeliveryWorker,
        receiver: Receiver) -> None:
    await add_notifier(api, name="pages", kind="webhook", url=f"{receiver.url}/page",
                       match={"severity": "page"})
    await add_notifier(api, name="tickets", kind="webhook", url=f"{receiver.url}/ticket",
                       match={"severity": "ticket"}, send_resolved=False)
    now = datetime.now(UTC)
    await move(app, True, now)
    await move(app, False, now + timedelta(seconds=1))
    ticket = {**LABELS, "severity": "ticket"}
    await move(app, True, now, ticket)
    await move(app, False, now + timedelta(seconds=1), ticket)
    await worker.drain()
    await worker.drain()
    assert [r.json()["transition"] for r in receiver.answered("/page")] == [
        "firing", "resolved"]
    assert [r.json()["transition"] for r in receiver.answered("/ticket")] == ["firing"]


async def test_three_workers_deliver_each_transition_once(
        api: httpx.AsyncClient, app: FastAPI, receiver: Receiver) -> None:
    state = runtime_of(app)
    await add_notifier(api, name="hook", kind="webhook", url=receiver.url)
    now = datetime.now(UTC)
    for i in range(20):
        labels = {**LABELS, "probe": f"p{i}"}
        await move(app, True, now, labels)
        await move(app, False, now + timedelta(seconds=1), labels)
    async with httpx.AsyncClient() as client:
        workers = [DeliveryWorker(state.sessions, client, f"w{i}", "http://x", FAST)
                   for i in range(3)]
        for _ in range(20):
            await asyncio.gather(*(w.drain() for w in workers))
            if len(receiver.answered()) >= 40:
                break
    got = [(r.json()["alert"]["labels"]["probe"], r.json()["transition"])
           for r in receiver.answered()]
    assert len(got) == 40
    assert len(set(got)) == 40
    for i in range(20):
        assert got.index((f"p{i}", "firing")) < got.index((f"p{i}", "resolved"))


async def test_slack_and_alertmanager_shapes_and_alertmanager_resend(
        api: httpx.AsyncClient, app: FastAPI, worker: DeliveryWorker, receiver: Receiver,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_SLACK_URL", f"{receiver.url}/services/T0/B0/xyz")
    slack = await add_notifier(api, name="slack", kind="slack",
                               url_secret_ref="env:TEST_SLACK_URL")
    assert slack["url"] is None
    await add_notifier(api, name="am", kind="alertmanager", url=f"{receiver.url}/am")
    now = datetime.now(UTC)
    await move(app, True, now)
    await worker.drain()
    (message,) = receiver.answered("/services/T0/B0/xyz")
    assert "[FIRING] SustainEndpointDown" in message.json()["text"]
    assert "probe=chat" in message.json()["text"]
    posts = receiver.answered("/am/api/v2/alerts")
    assert posts, "the transition, and the first re-send of firing alerts"
    alert = posts[0].json()[0]
    assert alert["labels"] == LABELS
    assert alert["annotations"] == {"summary": "chat is down"}
    assert alert["generatorURL"].startswith("https://sustain.example/api/v1/alerts/")
    assert datetime.fromisoformat(alert["endsAt"]) > datetime.now(UTC)
    before = len(posts)
    await asyncio.sleep(0.6)  # the behaviour: a firing alert is re-sent once 0.5 s have passed
    await worker.drain()
    assert len(receiver.answered("/am/api/v2/alerts")) == before + 1, "re-sent after 0.5 s"
    await move(app, False, now + timedelta(seconds=5))
    await worker.drain()
    resolved = receiver.answered("/am/api/v2/alerts")[-1].json()[0]
    assert datetime.fromisoformat(resolved["endsAt"]) == now + timedelta(seconds=5)
    assert "RESOLVED" in receiver.answered("/services/T0/B0/xyz")[-1].json()["text"]


async def test_notifier_and_silence_bodies_are_checked(api: httpx.AsyncClient) -> None:
    async def problem(method: str, path: str, body: object) -> str:
        r = await api.request(method, path, json=body)
        assert r.status_code == 422, r.text
        return str(r.json())

    slack = await problem("POST", "/api/v1/notifiers", {
        "name": "s", "kind": "slack", "url": "https://hooks.slack.com/services/T/B/xyzzy"})
    assert "url_secret_ref" in slack
    assert "xyzzy" not in slack, "the refused secret URL is not echoed"
    assert "exactly one" in await problem("POST", "/api/v1/notifiers", {
        "name": "w", "kind": "webhook"})
    assert "kind" in await problem("POST", "/api/v1/notifiers", {
        "name": "w", "kind": "pager", "url": "http://127.0.0.1:1"})
    assert "signing_secret_ref" in await problem("POST", "/api/v1/notifiers", {
        "name": "a", "kind": "alertmanager", "url": "http://127.0.0.1:1",
        "signing_secret_ref": "env:X"})
    hook = await add_notifier(api, name="w", kind="webhook", url="http://127.0.0.1:1/h")
    assert "'url'" in await problem("PATCH", f"/api/v1/notifiers/{hook['id']}",
                                       {"url": None})
    dup = await api.post("/api/v1/notifiers", json={"name": "w", "kind": "webhook",
                                                    "url": "http://127.0.0.1:1"})
    assert dup.status_code == 409
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert "regular expression" in await problem("POST", "/api/v1/silences", {
        "matchers": [{"name": "probe", "value": "(", "is_regex": True}], "ends_at": later,
        "comment": "c", "created_by": "me"})
    assert "ends_at" in await problem("POST", "/api/v1/silences", {
        "matchers": [{"name": "probe", "value": "x"}], "ends_at": later,
        "starts_at": (datetime.now(UTC) + timedelta(hours=2)).isoformat(),
        "comment": "c", "created_by": "me"})
    assert "match everything" in await problem("POST", "/api/v1/silences", {
        "matchers": [{"name": "probe", "value": "x", "is_equal": False}], "ends_at": later,
        "comment": "c", "created_by": "me"})
    assert "ends_at" in await problem("POST", "/api/v1/silences", {
        "matchers": [{"name": "probe", "value": "x"}],
        "ends_at": "9999-12-31T23:00:00-14:00", "comment": "c", "created_by": "me"})
    assert "matchers" in await problem("POST", "/api/v1/silences", {
        "matchers": [], "ends_at": later, "comment": "c", "created_by": "me"})
