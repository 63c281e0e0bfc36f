"""Making the database match a config file, in one transaction: the file's endpoints and probes
are created or updated and marked as managed by it, those it no longer declares are deleted,
and objects created over REST are left alone. A name taken by an object the file does not own
is a conflict: nothing is written and the problem names the line.

Replicas that sync the same file at once take turns (an advisory lock) and the second finds
nothing to change; every changed probe is NOTIFYed so all replicas reschedule it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.workload.spec import Workload
from sustain.service.config_file.model import ConfigFile, ProbeSpec
from sustain.service.config_file.yaml_lines import ConfigError, Located, Problem, dotted
from sustain.service.db import endpoints as endpoint_queries
from sustain.service.db import notifiers as notifier_queries
from sustain.service.db import probes as probe_queries
from sustain.service.db import quotas
from sustain.service.db import runs as run_queries
from sustain.service.db import slos as slo_queries
from sustain.service.db.models import Endpoint, NamedResource, Notifier, Probe, Slo
from sustain.service.policy.limits import LoadLimits, too_many, total_rate_problem
from sustain.service.schemas.probes import ProbeCreate, RagEndpointIds

R = TypeVar("R", bound=NamedResource)
SYNC_LOCK_KEY = 0x5375_7374_0002


@dataclass
class SyncResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    changed_probes: list[int] = field(default_factory=list)
    """Ids of probes created, changed or deleted (to reschedule)."""

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.deleted)


def _probe_columns(spec: ProbeSpec, endpoint_ids: Mapping[str, int], config: ConfigFile
                   ) -> dict[str, Any]:
    workloads = {w.name: w for w in config.workloads}
    workload = workloads[spec.workload] if isinstance(spec.workload, str) else spec.workload
    rag = spec.rag_endpoints
    body = ProbeCreate(
        name=spec.name, endpoint_id=endpoint_ids[spec.endpoint],
        rag_endpoints=None if rag is None else RagEndpointIds(
            embed_endpoint_id=endpoint_ids[rag.embed],
            rerank_endpoint_id=None if rag.rerank is None else endpoint_ids[rag.rerank]),
        workload=Workload.model_validate(workload.model_dump(
            exclude={"name"}, exclude_unset=True, exclude_computed_fields=True)),
        profile=spec.profile, interval_s=spec.schedule.every, cron=spec.schedule.cron,
        jitter_s=spec.schedule.jitter, enabled=spec.enabled, locations=spec.locations,
        slo=spec.slo, labels=spec.labels)
    return probe_queries.columns(body)


def _apply(row: NamedResource, values: dict[str, Any]) -> bool:
    """Set the values that differ; whether any did."""
    changed = False
    for name, value in values.items():
        if getattr(row, name) != value:
            setattr(row, name, value)
            changed = True
    return changed


async def _delete_undeclared(session: AsyncSession, kind: str, rows: Mapping[str, R],
                             declared: set[str], source: str, result: SyncResult) -> list[R]:
    """Delete the objects of `kind` this file owns but no longer declares; those deleted."""
    gone = [row for name, row in rows.items()
            if row.managed_by == source and name not in declared]
    for row in gone:
        await session.delete(row)
        result.deleted.append(f"{kind} {row.name}")
    return gone


def _owner(row: NamedResource) -> str:
    return f"managed by {row.managed_by}" if row.managed_by else "created over REST"


async def sync(session: AsyncSession, config: ConfigFile, located: Located, source: str,
               sample_retention_days: int = 14, limits: LoadLimits | None = None
               ) -> SyncResult:
    """Make the database match `config` (call inside a transaction; ConfigError on a
    conflict, before anything is written). `source` identifies the file in managed_by; SLOs
    created, or changed in what they count, are recounted (see slo_queries.recount). With
    `limits`, a file that would leave more objects of a kind than its limit, or enabled
    probes planning more than max_total_rate, is a ConfigError too (raised after writing:
    the caller's transaction rolls it all back), unless it does not add to a total already
    over its limit (the limit was lowered)."""
    await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SYNC_LOCK_KEY})
    before = None if limits is None else await _totals(session, limits)
    endpoints = {e.name: e for e in (await session.execute(select(Endpoint))).scalars()}
    probes = {p.name: p for p in (await session.execute(select(Probe))).scalars()}
    slos = {s.name: s for s in (await session.execute(select(Slo))).scalars()}
    notifiers = {n.name: n for n in (await session.execute(select(Notifier))).scalars()}
    problems = _conflicts(config, located, source, endpoints=endpoints, probes=probes,
                          slos=slos, notifiers=notifiers)
    if problems:
        raise ConfigError(source, problems)
    result = SyncResult()
    endpoint_ids = await _sync_endpoints(session, config, endpoints, source, result)
    for row in await _delete_undeclared(session, "probe", probes,
                                        {p.name for p in config.probes}, source, result):
        result.changed_probes.append(row.id)
    await session.flush()
    await _sync_probes(session, config, probes, endpoint_ids, source, result)
    await _delete_undeclared_endpoints(session, config, endpoints, source, result)
    await session.flush()
    await _sync_slos(session, config, slos, source, sample_retention_days, result)
    await _sync_notifiers(session, config, notifiers, source, result)
    if limits is not None and before is not None:
        await session.flush()
        problems = _beyond_quotas(before, await _totals(session, limits), limits, located)
        if problems:
            raise ConfigError(source, problems)
    for probe_id in result.changed_probes:
        await probe_queries.notify_changed(session, probe_id)
    return result


def _conflicts(config: ConfigFile, located: Located, source: str,
               **stored: Mapping[str, NamedResource]) -> list[Problem]:
    """A problem for each object the file declares under a name that another source (REST,
    another file) already uses; `stored` holds the rows of each kind (endpoints=...) by name."""
    declared = {"endpoints": [e.name for e in config.endpoints],
                "probes": [p.name for p in config.probes],
                "slos": [s.name for s in config.slos],
                "notifiers": [n.name for n in config.notifiers]}
    return [
        Problem(located.line_of(path), dotted(path),
                f"a {kind[:-1]} named {spec_name!r} already exists, {_owner(row)}; rename one")
        for kind, names in declared.items()
        for i, spec_name in enumerate(names)
        if (row := stored[kind].get(spec_name)) is not None and row.managed_by != source
        for path in [(kind, i, "name")]
    ]


async def _sync_endpoints(session: AsyncSession, config: ConfigFile,
                          endpoints: Mapping[str, Endpoint], source: str, result: SyncResult
                          ) -> dict[str, int]:
    """Create or update the file's endpoints; their ids by name."""
    endpoint_ids: dict[str, int] = {}
    for endpoint_spec in config.endpoints:
        values = endpoint_queries.columns(endpoint_spec) | {"managed_by": source}
        endpoint = endpoints.get(endpoint_spec.name)
        if endpoint is None:
            endpoint = Endpoint(**values)
            session.add(endpoint)
            await session.flush()
            result.created.append(f"endpoint {endpoint_spec.name}")
        elif _apply(endpoint, values):
            result.updated.append(f"endpoint {endpoint_spec.name}")
        endpoint_ids[endpoint_spec.name] = endpoint.id
    return endpoint_ids


async def _sync_probes(session: AsyncSession, config: ConfigFile, probes: Mapping[str, Probe],
                       endpoint_ids: Mapping[str, int], source: str, result: SyncResult) -> None:
    """Create or update the file's probes: a changed schedule restarts from now, and a probe
    disabled here has its run in progress cancelled."""
    for spec in config.probes:
        values = _probe_columns(spec, endpoint_ids, config)
        values["managed_by"] = source
        row = probes.get(spec.name)
        if row is None:
            row = Probe(**values)
            session.add(row)
            await session.flush()
            result.created.append(f"probe {spec.name}")
            result.changed_probes.append(row.id)
            continue
        restart = any(values[k] != getattr(row, k) for k in probe_queries.SCHEDULE_COLUMNS)
        disabled = row.enabled and not values["enabled"]
        if _apply(row, values):
            if restart:
                row.schedule_since = func.now()
            if disabled:  # its run in progress stops (its replica watches for the cancel)
                await run_queries.cancel_probe_runs(session, row.id)
            result.updated.append(f"probe {spec.name}")
            result.changed_probes.append(row.id)


async def _delete_undeclared_endpoints(session: AsyncSession, config: ConfigFile,
                                       endpoints: Mapping[str, Endpoint], source: str,
                                       result: SyncResult) -> None:
    """Delete this file's endpoints it no longer declares; a ConfigError while a probe
    created over REST still uses one."""
    declared_endpoints = {e.name for e in config.endpoints}
    for name, row in endpoints.items():
        if row.managed_by == source and name not in declared_endpoints:
            in_use = (await session.execute(
                select(func.count()).select_from(Probe).where(probe_queries.uses_endpoint(row.id))
            )).scalar_one()
            if in_use:
                raise ConfigError(source, [Problem(None, "endpoints", (
                    f"endpoint {name!r} was removed from the file but {in_use} probes "
                    "created over REST still use it; delete or move them first"))])
            await session.execute(delete(Endpoint).where(Endpoint.id == row.id))
            result.deleted.append(f"endpoint {name}")


Totals = dict[str, float]
"""Objects stored of each kind (endpoint, ...) and the enabled probes' planned rate."""


async def _totals(session: AsyncSession, limits: LoadLimits) -> Totals:
    """What the limits count, under their locks (held until the transaction ends, so REST
    writers wait for the sync)."""
    await quotas.lock(session, *quotas.LOCK_ORDER)
    totals: Totals = {kind: await quotas.count(session, kind) for kind in quotas.MODELS}
    totals["rate"] = await quotas.stored_total_rate(session, limits.max_rate)
    return totals


def _beyond_quotas(before: Totals, after: Totals, limits: LoadLimits, located: Located
                   ) -> list[Problem]:
    """A problem for each total the sync raised beyond its limit."""
    problems = []
    if limits.objects is not None:
        for kind in quotas.MODELS:
            count = int(after[kind])
            message = too_many(kind, count, limits.objects.of(kind))
            if message is not None and count > before[kind]:
                path = (f"{kind}s",)
                problems.append(Problem(located.line_of(path), dotted(path),
                                        f"{count:,} {kind}s in all with this file; {message}"))
    if limits.max_total_rate is not None and after["rate"] > before["rate"]:
        message = total_rate_problem(after["rate"], limits.max_total_rate)
        if message is not None:
            problems.append(Problem(located.line_of(("probes",)), "probes", message))
    return problems


async def _sync_slos(session: AsyncSession, config: ConfigFile, slos: dict[str, Slo],
                     source: str, sample_retention_days: int, result: SyncResult) -> None:
    await _delete_undeclared(session, "slo", slos, {s.name for s in config.slos}, source,
                             result)
    for spec in config.slos:
        values = slo_queries.columns(spec) | {"managed_by": source}
        existing = slos.get(spec.name)
        if existing is None:
            created = Slo(**values)
            session.add(created)
            await session.flush()
            await slo_queries.recount(session, created, sample_retention_days)
            result.created.append(f"slo {spec.name}")
            continue
        recount = any(values[k] != getattr(existing, k) for k in slo_queries.RECOUNT_COLUMNS)
        if _apply(existing, values):
            await session.flush()
            if recount:
                await slo_queries.recount(session, existing, sample_retention_days)
            result.updated.append(f"slo {spec.name}")


async def _sync_notifiers(session: AsyncSession, config: ConfigFile,
                          notifiers: dict[str, Notifier], source: str,
                          result: SyncResult) -> None:
    await _delete_undeclared(session, "notifier", notifiers,
                             {n.name for n in config.notifiers}, source, result)
    for spec in config.notifiers:
        values = notifier_queries.columns(spec) | {"managed_by": source}
        existing = notifiers.get(spec.name)
        if existing is None:
            session.add(Notifier(**values))
            result.created.append(f"notifier {spec.name}")
        elif _apply(existing, values):
            result.updated.append(f"notifier {spec.name}")
    await session.flush()
