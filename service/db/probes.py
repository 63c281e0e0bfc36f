"""Probe rows: the one mapping between the probe schemas and their columns (used by the REST
routes and the config-file sync alike), and queries beyond plain CRUD."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, or_, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.measure.slo import SloThresholds
from sustain.service.db.models import Endpoint, Probe
from sustain.service.errors import NotFoundError
from sustain.service.schemas.probes import ProbeCreate, ProbeRead, ProbeUpdate, period_of

PROBES_CHANNEL = "sustain_probes"
"""LISTEN/NOTIFY channel of probe changes; the payload is the probe id."""

SCHEDULE_COLUMNS = ("interval_seconds", "cron", "enabled")
"""A change to any of these starts the schedule afresh (see Probe.schedule_since)."""

COLUMN_OF = {"interval_s": "interval_seconds", "jitter_s": "jitter_seconds"}
"""The column of each body field named otherwise (the API's durations end in `_s`)."""


def columns(body: ProbeCreate | ProbeUpdate) -> dict[str, Any]:
    """Column values for the fields the body sets (all of them for a create)."""
    values: dict[str, Any] = {}
    for name in body.model_fields_set if isinstance(body, ProbeUpdate) else type(body).model_fields:
        value = getattr(body, name)
        if isinstance(value, SloThresholds):
            values.update({f"slo_{k}": v for k, v in value.model_dump().items()})
        elif name in ("workload", "profile"):
            values[name] = value.model_dump(mode="json")
        elif name == "rag_endpoints":
            values["rag_embed_endpoint_id"] = None if value is None else value.embed_endpoint_id
            values["rag_rerank_endpoint_id"] = None if value is None \
                else value.rerank_endpoint_id
        else:
            values[COLUMN_OF.get(name, name)] = value
    if "cron" in values or "interval_seconds" in values:
        values["interval_seconds"] = period_of(values.get("interval_seconds"),
                                               values.get("cron"))
        values.setdefault("cron", None)
    return values


def read(probe: Probe) -> ProbeRead:
    """What the API answers for a stored probe (its SLO columns folded into `slo`)."""
    return ProbeRead.model_validate({
        "id": probe.id,
        "name": probe.name,
        "endpoint_id": probe.endpoint_id,
        "workload": probe.workload,
        "rag_endpoints": None if probe.rag_embed_endpoint_id is None
        else {"embed_endpoint_id": probe.rag_embed_endpoint_id,
              "rerank_endpoint_id": probe.rag_rerank_endpoint_id},
        "profile": probe.profile,
        "interval_s": probe.interval_seconds,
        "cron": probe.cron,
        "jitter_s": probe.jitter_seconds,
        "enabled": probe.enabled,
        "locations": probe.locations,
        "slo": {"ttft_ms": probe.slo_ttft_ms, "tpot_ms": probe.slo_tpot_ms,
                "ttfo_ms": probe.slo_ttfo_ms, "e2e_ms": probe.slo_e2e_ms},
        "labels": probe.labels,
        "managed_by": probe.managed_by,
        "created_at": probe.created_at,
        "updated_at": probe.updated_at,
    })


async def get_with_endpoint(session: AsyncSession, probe_id: int) -> tuple[Probe, Endpoint]:
    row = (
        await session.execute(
            select(Probe, Endpoint)
            .join(Endpoint, Probe.endpoint_id == Endpoint.id)
            .where(Probe.id == probe_id)
        )
    ).first()
    if row is None:
        raise NotFoundError("probe", probe_id)
    return row[0], row[1]


def uses_endpoint(endpoint_id: int) -> ColumnElement[bool]:
    """Probes that send to endpoint `endpoint_id`: their own, or one of their RAG stages."""
    return or_(Probe.endpoint_id == endpoint_id, Probe.rag_embed_endpoint_id == endpoint_id,
               Probe.rag_rerank_endpoint_id == endpoint_id)


async def list_all(session: AsyncSession, *, enabled_only: bool = False) -> Sequence[Probe]:
    query = select(Probe).order_by(Probe.id)
    if enabled_only:
        query = query.where(Probe.enabled.is_(True))
    return (await session.execute(query)).scalars().all()


async def enabled_with_endpoints(session: AsyncSession) -> Sequence[tuple[Probe, Endpoint]]:
    """Every enabled probe with its endpoint (what a replica keeps to run ticks offline)."""
    rows = await session.execute(
        select(Probe, Endpoint).join(Endpoint, Probe.endpoint_id == Endpoint.id)
        .where(Probe.enabled.is_(True)).order_by(Probe.id))
    return [(row[0], row[1]) for row in rows]


async def notify_changed(session: AsyncSession, probe_id: int) -> None:
    """Tell every replica's listener (on commit) that the probe changed."""
    await session.execute(text("SELECT pg_notify(:channel, :payload)"),
                          {"channel": PROBES_CHANNEL, "payload": str(probe_id)})
