"""Seeding stored runs through the write path's own `store` (rows, then the final record with
its sketches and rollups), and reading back what Postgres holds."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sustain.probes.measure.sample import ErrorClass, Measurement, Sample
from sustain.probes.measure.slo import SloThresholds
from sustain.probes.measure.summary import summarise
from sustain.probes.run_result import RunResult
from sustain.service.db import partitions
from sustain.service.ingest.store import store
from sustain.service.runs.finals import RunFinal, completed
from sustain.service.runs.rows import sample_tuple, sent_at


def synthetic_samples(count: int, start: datetime, rng: random.Random, *,
                      fail_every: int = 0, open_loop: bool = True,
                      ttft_scale: float = 1.0, output_tokens: int = 9,
                      canary_fail_every: int = 0) -> list[Sample]:
    """Requests 50 ms apart: lognormal TTFT around 55 ms, 8 ITL gaps; every `fail_every`-th
    one a 5xx. With `canary_fail_every`, every request is a quality canary and every such
    one fails its check."""
    samples = []
    for seq in range(count):
        failed = fail_every and seq % fail_every == fail_every - 1
        t_send = seq * 50.0 + rng.uniform(0, 2)
        ttft = rng.lognormvariate(4.0, 0.25) * ttft_scale
        gaps = tuple(rng.uniform(8, 12) for _ in range(8))
        measurement = Measurement(
            ttft_ms=None if failed else ttft, itl_ms=() if failed else gaps,
            e2e_ms=ttft if failed else ttft + sum(gaps),
            output_tokens=0 if failed else output_tokens,
            tokens_server_counted=True, input_tokens=12, http_status=500 if failed else 200,
            error_class=ErrorClass.HTTP_5XX if failed else None,
            quality=None if failed or not canary_fail_every
            else seq % canary_fail_every != canary_fail_every - 1)
        samples.append(Sample(
            seq=seq, stage=0, t_sched_ms=seq * 50.0 if open_loop else None, t_send_ms=t_send,
            sent_at=start + timedelta(milliseconds=t_send), measurement=measurement))
    return samples


async def create_probe_rows(engine: AsyncEngine, name: str = "p1") -> int:
    async with engine.begin() as connection:
        endpoint_id = (await connection.execute(text(
            "INSERT INTO endpoints (name, base_url, api_kind, model, timeout_connect_s, "
            "timeout_first_token_s, timeout_total_s, tls_verify) VALUES "
            "(:name, 'http://127.0.0.1:9/v1', 'openai-chat', 'm', 1, 1, 1, true) RETURNING id"),
            {"name": f"e-{name}"})).scalar_one()
        probe_id: int = (await connection.execute(text(
            "INSERT INTO probes (name, endpoint_id, workload, profile, interval_seconds, "
            "enabled) VALUES (:name, :e, '{}', '{\"kind\": \"single\"}', 60, false) "
            "RETURNING id"), {"name": name, "e": endpoint_id})).scalar_one()
    return probe_id


async def create_run(engine: AsyncEngine, probe_id: int, scheduled_for: datetime,
                     status: str = "running", location: str = "default") -> int:
    async with engine.begin() as connection:
        run_id: int = (await connection.execute(text(
            "INSERT INTO runs (probe_id, trigger, scheduled_for, status, started_at, location) "
            "VALUES (:p, 'manual', :s, :status, :s, :l) RETURNING id"),
            {"p": probe_id, "s": scheduled_for, "status": status, "l": location})).scalar_one()
    return run_id


def final_of(run_id: int, probe_id: int, scheduled_for: datetime, samples: list[Sample],
             slo: SloThresholds | None = None) -> RunFinal:
    duration_s = (max(s.t_send_ms + s.e2e_ms for s in samples) / 1000.0) if samples else 0.0
    result = RunResult(samples=samples, summary=summarise(samples, duration_s, slo))
    return completed(RunFinal(run_id=run_id, probe_id=probe_id, scheduled_for=scheduled_for,
                              status="failed"), result)


async def seed_run(engine: AsyncEngine, probe_id: int, scheduled_for: datetime,
                   samples: list[Sample], slo: SloThresholds | None = None,
                   location: str = "default") -> int:
    run_id = await create_run(engine, probe_id, scheduled_for, location=location)
    rows = [sample_tuple(run_id, pos, probe_id, s) for pos, s in enumerate(samples)]
    async with engine.begin() as connection:
        await partitions.ensure(connection, {partitions.utc_day(sent_at(r)) for r in rows})
        await store(connection, rows, [final_of(run_id, probe_id, scheduled_for, samples, slo)])
    return run_id


async def fetch(engine: AsyncEngine, sql: str, **params: Any) -> list[Any]:
    async with engine.connect() as connection:
        return list((await connection.execute(text(sql), params)).all())
