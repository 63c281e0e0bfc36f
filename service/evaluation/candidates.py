"""What may alert: an alert's identity (labels, hence fingerprint), its text, and whether its
condition holds now. SLO burn-rate tiers become candidates here; pure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sustain.service.evaluation.rules import SloRules
from sustain.service.evaluation.slo_status import SloStatus, breaching, window_label
from sustain.service.evaluation.tiers import threshold
from sustain.service.ticks.schedule import parse_cron


def fingerprint(labels: Mapping[str, str]) -> str:
    """Stable identity of an alert: a hash of its sorted labels."""
    data = json.dumps(sorted(labels.items()), separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Candidate:
    labels: dict[str, str]
    condition: bool
    annotations: dict[str, str] = field(default_factory=dict)
    hold: timedelta = timedelta(0)
    """How long the condition must hold before the alert fires (pending until then)."""

    @property
    def alertname(self) -> str:
        return self.labels["alertname"]

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "page")

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.labels)


def slo_burn_candidates(slo: SloRules, status: SloStatus,
                        by_location: Mapping[str, SloStatus] | None = None
                        ) -> list[Candidate]:
    """One candidate per enabled tier: firing while the tier is breached (as the SLO is
    judged: across locations, or in N of them); its annotations say which locations breach it
    on their own (`by_location`)."""
    out = []
    for tier in slo.tiers:
        if not tier.enabled:
            continue
        limit = threshold(tier, slo.objective)
        where = breaching(by_location or {}, tier.name)
        located = {"locations": ", ".join(where)} if where else {}
        out.append(Candidate(
            labels={"alertname": "SustainSloBurnRate", "slo": slo.name, "tier": tier.name,
                    "severity": tier.severity},
            condition=tier.name in status.breached_tiers,
            hold=timedelta(seconds=tier.for_s),
            annotations={
                "summary": f"SLO {slo.name} is burning its error budget over "
                           f"{tier.factor:g}x too fast",
                "description": f"Error ratio over {window_label(tier.long_window_s)} and "
                               f"{window_label(tier.short_window_s)} is above "
                               f"{limit:g}" + (f" (breaching in {located['locations']})"
                                               if where else "") + ".",
                **located}))
    return out


@dataclass(frozen=True, slots=True)
class ProbeHealth:
    probe_id: int
    name: str
    interval_s: int
    watched_since: datetime
    """When the probe's current schedule began (no-data never counts from before it)."""
    last_started_at: datetime | None
    recent_runs: int
    """Finished runs looked at (at most the N asked for)."""
    recent_failed: int
    """Of those, runs in which no request succeeded."""
    cron: str | None = None
    jitter_s: float = 0.0


NO_DATA_INTERVALS = 3


def endpoint_down_candidates(health: Sequence[ProbeHealth], runs: int) -> list[Candidate]:
    """Firing while a probe's last `runs` finished runs all failed (no request succeeded)."""
    return [Candidate(
        labels={"alertname": "SustainEndpointDown", "probe": h.name, "severity": "page"},
        condition=h.recent_runs >= runs and h.recent_failed >= runs,
        annotations={"summary": f"Probe {h.name}: its endpoint is down",
                     "description": f"No request succeeded in the last {runs} runs."})
        for h in health]


def no_data_candidates(health: Sequence[ProbeHealth], now: datetime) -> list[Candidate]:
    """Firing while an enabled probe has not run for NO_DATA_INTERVALS of its intervals (and
    has been scheduled at least that long)."""
    out = []
    for h in health:
        quiet_for = timedelta(seconds=NO_DATA_INTERVALS * h.interval_s)
        since = max(h.watched_since, h.last_started_at or h.watched_since)
        if h.cron is None:
            quiet = now - since > quiet_for
        else:  # uneven schedules (e.g. weekdays only): three ticks due since, not 3 gaps
            schedule, tick = parse_cron(h.cron), since
            for _ in range(NO_DATA_INTERVALS):
                tick = schedule.next_after(tick)
            quiet = now > tick + timedelta(seconds=h.jitter_s)
        out.append(Candidate(
            labels={"alertname": "SustainNoData", "probe": h.name, "severity": "ticket"},
            condition=quiet,
            annotations={"summary": f"Probe {h.name} has not run",
                         "description": f"No run for {NO_DATA_INTERVALS} intervals "
                                        f"({window_label(int(quiet_for.total_seconds()))}); "
                                        "is the scheduler or the database stuck?"}))
    return out


@dataclass(frozen=True, slots=True)
class DriftState:
    probe: str
    metric: str
    stat: str
    verdict: str
    ratio: float | None


def drift_candidates(findings: Sequence[DriftState]) -> list[Candidate]:
    """Firing while a probe's latest drift finding on a metric statistic is `regressed`."""
    return [Candidate(
        labels={"alertname": "SustainDrift", "probe": f.probe, "metric": f.metric,
                "stat": f.stat, "severity": "ticket"},
        condition=f.verdict == "regressed",
        annotations={"summary": f"Probe {f.probe}: {f.stat} {f.metric} has regressed",
                     "description": "Recent runs are "
                     + (f"{f.ratio:.2f}x" if f.ratio is not None else "unlike")
                     + " the baseline (see the probe's /drift report)."})
        for f in findings]


def by_fingerprint(candidates: Sequence[Candidate]) -> dict[str, Candidate]:
    return {c.fingerprint: c for c in candidates}
