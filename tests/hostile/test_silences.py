"""Silences were unbounded and every delivery loaded them all: 30,000 of them made /healthz
take 4.6 s and the service grow 650 MB at a single alert. Now at most SUSTAIN_MAX_SILENCES
may be pending or active (a create beyond is a 409 naming it; expired ones are a record and
do not count), and a delivery pass reads only the silences active at its moment, once,
matching its alerts against them off the event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, text

from sustain.service.alerting import delivery
from sustain.service.app import create_app, runtime_of
from sustain.service.db import alerts as alert_queries
from sustain.service.db import deliveries as delivery_queries
from sustain.service.evaluation.candidates import Candidate
from sustain.service.evaluation.matchers import SilenceWindow
from tests.integration.service.helpers import app_settings, serving
from tests.receivers import Receiver

MAX_SILENCES = 3
EXPIRED = 5000
"""Expired silences stored straight in the database (more than any limit lets be active):
each matches the alerts below, and none may be read, or silence them."""
DOWN = {"alertname": "SustainEndpointDown", "probe": "chat", "severity": "page"}
SLOW = {"alertname": "SustainEndpointDown", "probe": "embed", "severity": "page"}
AM_PATH = "/am/api/v2/alerts"


@pytest.fixture
def app(database_url: str) -> FastAPI:
    """The app's own delivery worker waits a minute between passes: each test drives a pass
    of it."""
    return create_app(app_settings(database_url, auto_migrate=False,
                                   max_silences=MAX_SILENCES, notify_poll_s=60,
                                   alert_evaluation_s=3600,
                                   alertmanager_resend_s=5))


@pytest.fixture
async def api(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(app) as client:
        yield client


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def silence(probe: str, hours: float = 1) -> dict[str, Any]:
    return {"matchers": [{"name": "probe", "value": probe}], "comment": "maintenance",
            "ends_at": (datetime.now(UTC) + timedelta(hours=hours)).isoformat()}


async def count(app: FastAPI, query: str) -> int:
    async with runtime_of(app).engine.connect() as connection:
        return int((await connection.execute(text(query))).scalar_one())


async def store_expired(app: FastAPI, n: int, *, active: bool = False) -> None:
    """`n` silences of alertname SustainEndpointDown that ended yesterday (or, `active`,
    end tomorrow: stored before the limit was lowered), written straight to the database
    (the API never lets a silence start expired, nor makes more than the limit)."""
    ends = "now() + interval '1 day'" if active else "now() - interval '1 day'"
    async with runtime_of(app).engine.begin() as connection:
        await connection.execute(text(
            "INSERT INTO silences (matchers, starts_at, ends_at, comment, created_by) "
            f"SELECT CAST(:matchers AS jsonb), now() - interval '2 days', {ends}, "
            "'old', 'test' FROM generate_series(1, :n)"),
            {"n": n, "matchers": '[{"name": "alertname", "value": "SustainEndpointDown", '
                                 '"is_regex": false, "is_equal": true}]'})


async def fire(app: FastAPI, labels: dict[str, str]) -> None:
    candidate = Candidate(labels=labels, condition=True, annotations={"summary": "down"})
    async with runtime_of(app).sessions.begin() as session:
        assert await alert_queries.advance(session, candidate, datetime.now(UTC),
                                           timedelta(0), None, "r1") == "firing"


async def test_a_silence_beyond_max_silences_is_409_naming_it(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    made = [await api.post("/api/v1/silences", json=silence(f"p{i}"))
            for i in range(MAX_SILENCES)]
    assert [r.status_code for r in made] == [201] * MAX_SILENCES
    r = await api.post("/api/v1/silences", json=silence("one-more"))
    assert r.status_code == 409, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert "at most 3 silences (SUSTAIN_MAX_SILENCES)" in r.json()["detail"]
    assert await count(app, "SELECT count(*) FROM silences") == MAX_SILENCES
    # A bad body is still named as such, not refused for the count.
    bad = await api.post("/api/v1/silences", json={**silence("x"), "ends_at": "2001-01-01"})
    assert bad.status_code == 422, bad.text
    # Expired silences stay as a record, and make room.
    assert (await api.delete(f"/api/v1/silences/{made[0].json()['id']}")).status_code == 204
    assert (await api.post("/api/v1/silences", json=silence("one-more"))).status_code == 201
    await store_expired(app, 50)
    assert (await api.post("/api/v1/silences", json=silence("two-more"))).status_code == 409


async def test_expired_silences_are_kept_only_as_many_as_the_limit(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    """Creating and expiring silences in a loop cannot grow the table: a create keeps only
    the SUSTAIN_MAX_SILENCES expired most recently."""
    await store_expired(app, 50)
    for i in range(5):
        made = await api.post("/api/v1/silences", json=silence(f"loop{i}"))
        assert made.status_code == 201, made.text
        assert (await api.delete(f"/api/v1/silences/{made.json()['id']}")).status_code == 204
    assert (await api.post("/api/v1/silences", json=silence("last"))).status_code == 201
    assert await count(app, "SELECT count(*) FROM silences WHERE ends_at <= now()") \
        == MAX_SILENCES
    assert await count(app, "SELECT count(*) FROM silences WHERE ends_at > now()") == 1


async def test_a_silence_matcher_whose_regex_needs_megabytes_is_422_and_holds_none(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    """RE2 gave `(?:\\pL|\\pN){151}` 4 MB by default, compiled while the body was
    validated (before the limit, and for a body refused anyway) and kept in a cache of
    1,024: four requests of 32 such patterns held +320 MB. Each pattern may now use
    MAX_PATTERN_MEMORY_BYTES; one that needs more is refused naming the matcher."""
    before = peak_rss()
    for request in range(4):
        matchers = [{"name": f"l{i}", "value": f"(?:\\pL|\\pN){{{151 + 32 * request + i}}}",
                     "is_regex": True} for i in range(32)]
        r = await api.post("/api/v1/silences", json={**silence("x"), "matchers": matchers})
        assert r.status_code == 422, r.text
        assert "matchers.0.value" in {e["field"] for e in r.json()["errors"]}
    grown = peak_rss() - before
    assert grown < 64 * 1024 * 1024, f"peak RSS grew {grown / 1024 / 1024:.0f} MiB"
    assert await count(app, "SELECT count(*) FROM silences") == 0
    fine = {"name": "probe", "value": "chat-(a|b)-[0-9]+", "is_regex": True}
    r = await api.post("/api/v1/silences", json={**silence("x"), "matchers": [fine]})
    assert r.status_code == 201, r.text


def peak_rss() -> int:
    """This process's peak resident set so far, bytes (VmHWM)."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


async def test_concurrent_silence_creates_do_not_overshoot_the_limit(
        api: httpx.AsyncClient, app: FastAPI) -> None:
    answers = await asyncio.gather(*(api.post("/api/v1/silences", json=silence(f"p{i}"))
                                     for i in range(10)))
    assert sorted(r.status_code for r in answers) == [201] * MAX_SILENCES + [409] * 7
    assert await count(app, "SELECT count(*) FROM silences") == MAX_SILENCES


async def test_the_active_silences_query_reads_only_active_rows_and_at_most_the_limit(
        app: FastAPI, api: httpx.AsyncClient) -> None:
    assert (await api.post("/api/v1/silences", json=silence("chat"))).status_code == 201
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    pending = {**silence("embed", hours=2), "starts_at": later}
    assert (await api.post("/api/v1/silences", json=pending)).status_code == 201
    await store_expired(app, EXPIRED)  # after the creates, which keep only the newest
    async with runtime_of(app).sessions() as session:
        rows = (await session.execute(
            delivery_queries.active_silences_query(datetime.now(UTC), MAX_SILENCES))).all()
    assert len(rows) == 1
    assert await count(app, "SELECT count(*) FROM silences") == EXPIRED + 2
    # More active than the limit (it was lowered): a pass reads at most one past it.
    await store_expired(app, 100, active=True)
    async with runtime_of(app).sessions() as session:
        windows = await delivery_queries.active_silences(session, datetime.now(UTC),
                                                         MAX_SILENCES)
    assert len(windows) == MAX_SILENCES + 1


async def test_a_pass_reads_the_active_silences_once_and_still_honours_them(
        api: httpx.AsyncClient, app: FastAPI, receiver: Receiver,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Three webhooks and an Alertmanager (whose firing alerts are re-sent in the same pass)
    among thousands of expired silences that all match: one silence query, one row read,
    the matching off the event loop; the silenced alert is not sent, the other is."""
    await store_expired(app, EXPIRED)
    assert (await api.post("/api/v1/silences", json=silence("chat"))).status_code == 201
    for name in ("a", "b", "c"):
        r = await api.post("/api/v1/notifiers", json={
            "name": name, "kind": "webhook", "url": f"{receiver.url}/{name}", "timeout_s": 5})
        assert r.status_code == 201, r.text
    r = await api.post("/api/v1/notifiers", json={
        "name": "am", "kind": "alertmanager", "url": f"{receiver.url}/am", "timeout_s": 5})
    assert r.status_code == 201, r.text
    await fire(app, DOWN)
    await fire(app, SLOW)

    state = runtime_of(app)
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "FROM silences" in statement:
            statements.append(statement)

    rows_read: list[int] = []
    real_query = delivery_queries.active_silences

    async def counted(session: Any, now: datetime, limit: int) -> list[SilenceWindow]:
        windows = await real_query(session, now, limit)
        rows_read.append(len(windows))
        return windows

    loop_thread = threading.get_ident()
    matched_on: list[int] = []
    real_muted = delivery.muted

    def watched(silences: Sequence[SilenceWindow], labels: Sequence[Mapping[str, str]],
                now: datetime) -> list[bool]:
        matched_on.append(threading.get_ident())
        return real_muted(silences, labels, now)

    monkeypatch.setattr(delivery_queries, "active_silences", counted)
    monkeypatch.setattr(delivery, "muted", watched)
    event.listen(state.engine.sync_engine, "before_cursor_execute", seen)
    try:
        await state.delivery.drain()
    finally:
        event.remove(state.engine.sync_engine, "before_cursor_execute", seen)

    assert len(statements) == 1, statements
    assert rows_read == [1]
    assert len(matched_on) == 1, "one matching per pass"
    assert loop_thread not in matched_on
    log = (await api.get("/api/v1/deliveries", params={"limit": 100})).json()["items"]
    assert sorted(d["state"] for d in log) == ["delivered"] * 4 + ["silenced"] * 4
    hooks = [r.json()["alert"]["labels"] for r in receiver.answered() if r.path != AM_PATH]
    assert hooks == [SLOW] * 3
    # The Alertmanager got the firing transition and, in the same pass, its re-send.
    sent_to_am = [[a["labels"] for a in r.json()] for r in receiver.answered(AM_PATH)]
    assert sent_to_am == [[SLOW], [SLOW]]
