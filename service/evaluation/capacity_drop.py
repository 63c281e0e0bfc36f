"""Capacity watched over time (pure): a capacity probe's newest run against the runs before
it. Headroom monitoring: a deploy, a config change or a noisy neighbour that takes away
capacity under the SLO shows as a drop, before the traffic that needs it arrives."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from sustain.service.evaluation.candidates import Candidate

DROP = 0.2
"""A drop is the newest capacity at or below (1 - DROP) x the median of the runs before."""
BASELINE_RUNS = 3
"""Runs before the newest one needed for a verdict (at most HISTORY - 1 are used)."""
HISTORY = 11
"""Newest capacity runs read per probe."""


@dataclass(frozen=True, slots=True)
class CapacityHistory:
    probe: str
    unit: str
    values: tuple[int | None, ...]
    """Each capacity run's highest passing level, newest first (None: no level passed)."""


def dropped(values: Sequence[int | None]) -> tuple[bool, float | None]:
    """Whether the newest value dropped against the median of those before it, and that
    median (None without enough runs before it)."""
    if len(values) < BASELINE_RUNS + 1:
        return False, None
    newest, before = values[0], [v or 0 for v in values[1:HISTORY]]
    baseline = float(statistics.median(before))
    if baseline <= 0:
        return False, baseline
    return (newest or 0) <= (1 - DROP) * baseline, baseline


def capacity_drop_candidates(histories: Sequence[CapacityHistory]) -> list[Candidate]:
    """Firing while a capacity probe's newest capacity under its SLO is at least DROP below
    the median of its previous runs."""
    out = []
    for history in histories:
        fired, baseline = dropped(history.values)
        newest = history.values[0] if history.values else None
        now = "no level" if newest is None else f"{newest} ({history.unit})"
        before = "more" if not baseline else f"a median of {baseline:g}"
        out.append(Candidate(
            labels={"alertname": "SustainCapacityDrop", "probe": history.probe,
                    "severity": "ticket"},
            condition=fired,
            annotations={
                "summary": f"Probe {history.probe}: capacity under SLO dropped",
                "description": f"The newest run sustains {now} within the SLO; the runs "
                               f"before it sustained {before}."}))
    return out
