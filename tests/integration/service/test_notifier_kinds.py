"""A notifier kind is one module and one registry entry: a kind registered by a test, and
nowhere else, is stored (no constraint lists the kinds), checked on PATCH by its own spec,
read back, sent its own request and re-sent, with no other change. Every built-in kind goes
through the API and back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import httpx
import pytest
from fastapi import FastAPI
from pydantic import Field, TypeAdapter

from sustain.service.alerting.delivery import DeliveryPolicy, DeliveryWorker
from sustain.service.alerting.notifiers import (
    REGISTRY,
    NotifierKind,
    Request,
    Sending,
    Target,
)
from sustain.service.app import create_app, runtime_of
from sustain.service.db import alerts as alert_queries
from sustain.service.db import notifiers as notifier_queries
from sustain.service.db.models import Notifier
from sustain.service.evaluation.candidates import Candidate
from sustain.service.schemas.notifiers import NotifierSpec
from tests.integration.service.helpers import app_settings, serving
from tests.receivers import Receiver

LABELS = {"alertname": "SustainEndpointDown", "probe": "chat", "severity": "page"}
FAST = DeliveryPolicy(poll_s=0.1, lease_s=30, max_attempts=3, retry_base_s=0.2,
                      retry_max_s=1.0, quick_wait_s=0.01, resend_s=0.5)


class PagerNotifier(NotifierSpec):
    kind: Literal["pager"]
    urgency: Literal["low", "high"] = Field(default="high", exclude=True)
    """Validated by this kind alone (not stored: a test of configuration, not of columns)."""


class Pager(NotifierKind):
    """A kind no module of the service knows: all alerts at once, to `<url>/page`."""

    name = "pager"
    spec = PagerNotifier
    resends = True

    def request(self, target: Target, payloads: Sequence[Mapping[str, Any]],
                sending: Sending) -> Request:
        body = "\n".join(f"{p['transition']} {p['fingerprint']}" for p in payloads)
        return Request(f"{target.url.rstrip('/')}/page", body.encode(),
                       {"Content-Type": "text/plain", "X-Pager": str(sending.delivery_id)})


@pytest.fixture
def pager() -> Iterator[None]:
    REGISTRY.register(Pager())
    try:
        yield
    finally:
        REGISTRY.unregister("pager")


@pytest.fixture
def app(database_url: str) -> FastAPI:
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


async def test_a_kind_registered_by_a_test_is_stored_checked_and_sent_with_no_other_change(
        pager: None, api: httpx.AsyncClient,  # noqa: ARG001 - pager: registered meanwhile
        app: FastAPI, receiver: Receiver) -> None:
    spec = TypeAdapter(REGISTRY.create_type()).validate_python(
        {"name": "oncall", "kind": "pager", "url": receiver.url, "urgency": "low",
         "timeout_s": 1.0})
    assert isinstance(spec, PagerNotifier)
    state = runtime_of(app)
    async with state.sessions.begin() as session:
        row = Notifier(**notifier_queries.columns(spec))
        session.add(row)
        await session.flush()
        notifier_id = row.id
    read = (await api.get(f"/api/v1/notifiers/{notifier_id}")).json()
    assert (read["kind"], read["url"]) == ("pager", f"{receiver.url}/")
    refused = await api.patch(f"/api/v1/notifiers/{notifier_id}",
                              json={"signing_secret_ref": "env:TEST_KEY"})
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["field"] == "signing_secret_ref"
    renamed = await api.patch(f"/api/v1/notifiers/{notifier_id}", json={"name": "oncall2"})
    assert renamed.status_code == 200, renamed.text

    now = datetime.now(UTC)
    candidate = Candidate(labels=LABELS, condition=True, annotations={"summary": "down"})
    async with state.sessions.begin() as session:
        await alert_queries.advance(session, candidate, now, timedelta(0), None, "r1")
    async with httpx.AsyncClient() as client:
        worker = DeliveryWorker(state.sessions, client, "w1", "https://sustain.example",
                                FAST, reach=state.reach)
        await worker.drain()  # the delivery, and the first re-send (due at once)
    sent = receiver.answered("/page")
    assert all(r.body.decode().startswith("firing ") for r in sent)
    ids = sorted(r.headers["x-pager"] for r in sent)
    assert len(ids) == 2
    assert ids[0] == "0", "a re-send is no delivery"
    assert ids[1] != "0", "a delivery carries its id"
    delivered = (await api.get("/api/v1/deliveries",
                               params={"notifier_id": notifier_id})).json()["items"]
    assert [d["state"] for d in delivered] == ["delivered"]


@pytest.mark.parametrize("kind", REGISTRY.names())
async def test_every_kind_goes_through_the_api_and_back(
        kind: str, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_NOTIFIER_URL", "http://127.0.0.1:9/h")
    for where in ({"url": "http://127.0.0.1:9/h"},
                  {"url_secret_ref": "env:TEST_NOTIFIER_URL"}):
        body = {"name": f"n-{kind}", "kind": kind, "timeout_s": 2.0, **where}
        r = await api.post("/api/v1/notifiers", json=body)
        if r.status_code == 201:
            break
        assert r.status_code == 422, r.text
    assert r.status_code == 201, r.text
    got = (await api.get(f"/api/v1/notifiers/{r.json()['id']}")).json()
    assert {k: got[k] for k in body} == body
