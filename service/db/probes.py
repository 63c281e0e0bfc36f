"""Probe queries beyond plain CRUD."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.db.models import Endpoint, Probe
from sustain.service.errors import NotFoundError

PROBES_CHANNEL = "sustain_probes"
"""LISTEN/NOTIFY channel of probe changes; the payload is the probe id."""


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


async def list_all(session: AsyncSession, *, enabled_only: bool = False) -> Sequence[Probe]:
    query = select(Probe).order_by(Probe.id)
    if enabled_only:
        query = query.where(Probe.enabled.is_(True))
    return (await session.execute(query)).scalars().all()


async def notify_changed(session: AsyncSession, probe_id: int) -> None:
    """Tell every replica's listener (on commit) that the probe changed."""
    await session.execute(text("SELECT pg_notify(:channel, :payload)"),
                          {"channel": PROBES_CHANNEL, "payload": str(probe_id)})
