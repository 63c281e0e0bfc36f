"""A probe's figures over a window, from its stored runs: merged percentiles of every sketched
metric, availability and throughputs from summed counts, and run-to-run stability (the
summary API and the comparison of probes both read them here). Decoding sketches for the
stability figures runs in a worker thread."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import datetime

from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from sustain.probes.measure.deployment import Deployment, Efficiency
from sustain.probes.measure.efficiency import efficiency_of, measured_power_w, window_power_w
from sustain.probes.measure.finite import ratio
from sustain.probes.measure.percentiles import QUANTILES
from sustain.probes.measure.run_sketches import METRICS
from sustain.probes.measure.server_metrics import ServerMetric
from sustain.probes.measure.sketch import SketchMerger
from sustain.service.db import drift as drift_queries
from sustain.service.db import history
from sustain.service.db.models import Endpoint, Probe, Run
from sustain.service.evaluation.drift_runs import RecordRow, SketchRow, metric_rows
from sustain.service.evaluation.stability import Stability, stability
from sustain.service.history.aggregate import count_stat, latency_stat
from sustain.service.schemas.history import MetricSummary, WindowSummary


async def window_summary(session: AsyncSession, probe_id: int, start: datetime,
                         end: datetime, location: str | None = None) -> WindowSummary:
    """The probe's figures over runs scheduled in [start, end), in one location or (None)
    in all of them together."""
    span = (start.timestamp(), end.timestamp())
    (agg,) = await history.aggregates(session, probe_id, [span], list(METRICS), location)
    metrics = {}
    for name in METRICS:
        sketch = agg.sketch(name)
        values = {stat: latency_stat(sketch, stat) for stat in (*QUANTILES, "mean", "max")}
        metrics[name] = MetricSummary(
            count=sketch.count, **{stat: v.value for stat, v in values.items()},
            low_count=[stat for stat in QUANTILES if values[stat].low_count])
    records = await drift_queries.window_records(session, probe_id, start, end, location)
    throughputs = await drift_queries.run_throughputs(session, probe_id, start, end, location)
    steadiness = await asyncio.to_thread(_stability, records, throughputs)
    tps = count_stat(agg, "output_token_throughput").value
    items = agg.sketch("items")
    return WindowSummary(
        probe_id=probe_id, location=location, from_=start, to=end, runs=agg.runs,
        attempts=agg.attempts, successes=agg.successes,
        availability=count_stat(agg, "availability").value,
        measured_s=agg.measured_s,
        requests_per_second=count_stat(agg, "request_throughput").value,
        output_tokens=agg.output_tokens,
        output_tokens_per_second=count_stat(agg, "output_token_throughput").value,
        good=agg.good, goodput=count_stat(agg, "goodput").value,
        items=round(items.sum) if items.count else None,
        items_per_second=count_stat(agg, "item_throughput").value,
        retrieval_checked=agg.sketch("retrieval").count or None,
        retrieval_hit_ratio=count_stat(agg, "retrieval_hit_rate").value, metrics=metrics,
        stability=steadiness,
        efficiency=await window_efficiency(session, probe_id, start, end, tps, agg.measured_s,
                                           location))


async def window_efficiency(session: AsyncSession, probe_id: int, start: datetime,
                            end: datetime, tps: float | None, measured_s: float,
                            location: str | None = None) -> Efficiency | None:
    """The window's efficiency under the probe's endpoint's deployment (as declared now);
    good tokens summed from the runs' summaries; power as the runs' DCGM scrapes measured it
    (weighted by their measured time), else as declared. None without a deployment."""
    raw = await session.scalar(
        select(Endpoint.deployment).join(Probe, Probe.endpoint_id == Endpoint.id)
        .where(Probe.id == probe_id))
    if not raw:
        return None
    in_window = (Run.probe_id == probe_id, Run.scheduled_for >= start,
                 Run.scheduled_for < end, Run.attempts.is_not(None),
                 *([] if location is None else [Run.location == location]))
    good = await session.scalar(
        select(func.sum(Run.summary["good_output_tokens"].as_integer())).where(*in_window))
    good_tps = None if good is None else ratio(float(good), measured_s)
    powers = (await session.execute(
        select(Run.summary["server_metrics"], Run.measured_s).where(
            *in_window, Run.summary["server_metrics"].is_not(None)))).all()
    measured_w = window_power_w((run_power_w(metrics), seconds or 0.0)
                                for metrics, seconds in powers)
    return efficiency_of(tps, good_tps, Deployment.model_validate(raw), measured_w)


def run_power_w(metrics: object) -> float | None:
    """A run's measured power from its summary's server_metrics (JSON); None when it has
    none, or when they do not read as server metrics."""
    if not isinstance(metrics, dict):
        return None
    try:
        return measured_power_w({str(name): ServerMetric.model_validate(value)
                                 for name, value in metrics.items()
                                 if name in ("gpu_energy_mj", "gpu_power_w")})
    except ValidationError:
        return None


def _stability(records: list[RecordRow], throughputs: list[float]) -> dict[str, Stability]:
    """run_stability of TTFT and TPOT from the window's records (in a worker thread)."""
    return run_stability({metric: metric_rows(records, metric) for metric in ("ttft", "tpot")},
                         throughputs)


def run_stability(figures: dict[str, list[SketchRow]], throughputs: list[float]
                  ) -> dict[str, Stability]:
    """Run-to-run stability of p50 and p99 TTFT and TPOT and of output throughput (decodes
    each run's sketches once: for a worker thread)."""
    out: dict[str, Stability] = {}
    for metric, rows in figures.items():
        per_run: dict[int, SketchMerger] = defaultdict(SketchMerger)
        for run_id, _, data in rows:
            per_run[run_id].add(data)
        merged = [merger.result() for merger in per_run.values()]
        for stat in ("p50", "p99"):
            values = [v for sketch in merged
                      if (v := latency_stat(sketch, stat).value) is not None and v > 0]
            out[f"{metric}_{stat}"] = stability(values)
    out["output_token_throughput"] = stability(throughputs)
    return out
