"""docs/sizing.md's arithmetic: from the bytes the storage benchmark measured per run, per raw
sample and per rollup bucket (a Footprint), the disk a fleet of probes writes per day and
per year, and holds once retention is in force. Pure functions over plain data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SECONDS_PER_DAY = 86_400
DEFAULT_SAMPLE_RETENTION_DAYS = 14
"""SUSTAIN_SAMPLE_RETENTION_DAYS's default (service/server_settings.py)."""


@dataclass(frozen=True, slots=True)
class Footprint:
    """What one probe's runs keep on disk, in bytes (heap, TOAST and indexes), as measured."""

    run_bytes: float
    """Per run: its `runs` row (summary included), its sketches, its SLO counts and any other
    per-run row; not its samples, not the rollups."""
    sample_bytes: float
    """Per raw sample (request)."""
    bucket_bytes: float
    """Per rollup bucket (one probe, one location, one hour or one day): its `rollups` row
    and its `rollup_sketches` rows."""


@dataclass(frozen=True, slots=True)
class Fleet:
    """What is probed: `probes` probes, each from `locations` locations every `interval_s`
    seconds, each run `samples_per_run` requests (1 for a single-request probe)."""

    probes: int
    locations: int
    interval_s: float
    samples_per_run: float = 1.0

    @property
    def series(self) -> int:
        """Probe-location pairs: each has its own runs and rollup buckets."""
        return self.probes * self.locations

    @property
    def runs_per_day(self) -> float:
        return self.series * SECONDS_PER_DAY / self.interval_s


def buckets_per_day(interval_s: float) -> float:
    """Rollup buckets one probe-location pair fills per day: an hourly one per hour with a
    run in it (24 at intervals up to an hour), and the daily one."""
    runs = SECONDS_PER_DAY / interval_s
    return min(24.0, runs) + min(1.0, runs)


def written_per_day(footprint: Footprint, fleet: Fleet) -> float:
    """Bytes the fleet adds to the database per day, before any retention deletes."""
    return (fleet.runs_per_day * (footprint.run_bytes
                                  + fleet.samples_per_run * footprint.sample_bytes)
            + fleet.series * buckets_per_day(fleet.interval_s) * footprint.bucket_bytes)


def held(footprint: Footprint, fleet: Fleet, run_retention_days: float,
         sample_retention_days: float = DEFAULT_SAMPLE_RETENTION_DAYS) -> float:
    """Bytes the database holds once retention is in force: runs, their sketches and the
    rollups for `run_retention_days` (SUSTAIN_RUN_RETENTION_DAYS), raw samples for
    `sample_retention_days` (SUSTAIN_SAMPLE_RETENTION_DAYS; never longer than their runs,
    which take their samples with them). Daily sample partitions are dropped whole, so up to
    a day more is held in practice."""
    sample_days = min(sample_retention_days, run_retention_days)
    per_day_runs = fleet.runs_per_day * footprint.run_bytes + fleet.series * buckets_per_day(
        fleet.interval_s) * footprint.bucket_bytes
    per_day_samples = fleet.runs_per_day * fleet.samples_per_run * footprint.sample_bytes
    return per_day_runs * run_retention_days + per_day_samples * sample_days


def human(size: float) -> str:
    """Bytes as a short figure in binary units: `512 B`, `1.5 KiB`, `12 GiB`, `3.4 TiB`."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    value = float(size)
    for unit in units:
        if abs(value) < 1024 or unit == units[-1]:
            if unit == "B":
                return f"{value:.0f} B"
            return f"{value:.1f} {unit}" if abs(value) < 10 else f"{value:,.0f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def interval_words(interval_s: float) -> str:
    """An interval as the sizing table names it: `15 s`, `1 min`, `5 min`."""
    return f"{interval_s / 60:g} min" if interval_s >= 60 else f"{interval_s:g} s"


SIZING_FLEETS = tuple(Fleet(p, loc, i) for p in (10, 100, 1000) for loc in (1, 3)
                      for i in (15, 60, 300))
SIZING_RETENTIONS = (30, 90, 365)


def sizing_table(footprint: Footprint, fleets: Sequence[Fleet] = SIZING_FLEETS,
                 retentions: Sequence[int] = SIZING_RETENTIONS,
                 sample_retention_days: float = DEFAULT_SAMPLE_RETENTION_DAYS) -> str:
    """docs/sizing.md's table: per fleet, runs per day, bytes written per day and per year,
    and bytes held at each run retention (samples kept `sample_retention_days`)."""
    head = ["probes", "locations", "interval", "runs/day", "written/day", "written/year",
            *(f"held, runs kept {days} d" for days in retentions)]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for fleet in fleets:
        per_day = written_per_day(footprint, fleet)
        cells = [f"{fleet.probes:,}", str(fleet.locations), interval_words(fleet.interval_s),
                 f"{fleet.runs_per_day:,.0f}", human(per_day), human(per_day * 365),
                 *(human(held(footprint, fleet, days, sample_retention_days))
                   for days in retentions)]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"
