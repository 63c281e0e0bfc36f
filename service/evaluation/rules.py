"""Prometheus recording and alerting rules equivalent to the in-service SLO logic, over
`sustain_slo_events_total{slo,outcome}`: for each SLO, the error ratio over every tier window,
and one alert per enabled tier that fires when both its windows burn faster than its factor.

Zero-traffic safe: an error ratio is recorded only where events happened in the window
(`and ... > 0`), so an idle window has no series (like the service's null), never NaN, and
never fires. sustain exports both outcomes of every SLO (0 when none), so `bad` exists
wherever `total` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sustain.service.evaluation.slo_status import window_label
from sustain.service.evaluation.tiers import BurnTier, threshold

EVENTS = "sustain_slo_events_total"


@dataclass(frozen=True, slots=True)
class SloRules:
    name: str
    objective: float
    tiers: Sequence[BurnTier]
    description: str | None = None


def ratio_record(window_s: int) -> str:
    return f"sustain_slo:error_ratio:rate{window_label(window_s)}"


def _selector(slo: str, outcome: str | None = None) -> str:
    escaped = slo.replace("\\", "\\\\").replace('"', '\\"')
    labels = f'slo="{escaped}"' + (f', outcome="{outcome}"' if outcome else "")
    return f"{EVENTS}{{{labels}}}"


def _group(slo: SloRules) -> dict[str, Any]:
    windows = sorted({w for t in slo.tiers if t.enabled
                      for w in (t.long_window_s, t.short_window_s)})
    rules: list[dict[str, Any]] = []
    for window in windows:
        span = window_label(window)
        total = f"sum by (slo) (rate({_selector(slo.name)}[{span}]))"
        bad = f"sum by (slo) (rate({_selector(slo.name, 'bad')}[{span}]))"
        rules.append({
            "record": ratio_record(window),
            "expr": f"{bad} / {total} and {total} > 0",
            "labels": {"slo": slo.name},
        })
    for tier in slo.tiers:
        if not tier.enabled:
            continue
        limit = threshold(tier, slo.objective)
        long, short = ratio_record(tier.long_window_s), ratio_record(tier.short_window_s)
        escaped = slo.name.replace("\\", "\\\\").replace('"', '\\"')
        rules.append({
            "alert": "SustainSloBurnRate",
            "expr": (f'{long}{{slo="{escaped}"}} > {limit} and '
                     f'{short}{{slo="{escaped}"}} > {limit}'),
            **({"for": f"{tier.for_s}s"} if tier.for_s else {}),
            "labels": {"slo": slo.name, "tier": tier.name, "severity": tier.severity},
            "annotations": {
                "summary": f"SLO {slo.name} is burning its error budget over "
                           f"{tier.factor:g}x too fast",
                "description": (
                    f"Error ratio over {window_label(tier.long_window_s)} and "
                    f"{window_label(tier.short_window_s)} is above {limit:g} "
                    f"({tier.factor:g} x (1 - {slo.objective:g})). "
                    + (slo.description or "")).strip(),
            },
        })
    return {"name": f"sustain-slo-{slo.name}", "rules": rules}


def rules_document(slos: Sequence[SloRules]) -> dict[str, Any]:
    """The rule file (as data, for YAML): one group per SLO."""
    return {"groups": [_group(slo) for slo in sorted(slos, key=lambda s: s.name)]}
