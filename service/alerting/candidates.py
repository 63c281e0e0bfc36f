"""What may alert: an alert's identity (labels, hence fingerprint), its text, and whether its
condition holds now. SLO burn-rate tiers become candidates here; pure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from service.evaluation.rules import SloRules
from service.evaluation.slo_status import SloStatus, window_label


def fingerprint(labels: Mapping[str, str]) -> str:
    """Stable identity of an alert: a hash of its sorted labels."""
    data = json.dumps(sorted(labels.items()), separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Candidate:
    labels: dict[str, str]
    condition: bool
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def alertname(self) -> str:
        return self.labels["alertname"]

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "page")

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.labels)


def slo_burn_candidates(slo: SloRules, status: SloStatus) -> list[Candidate]:
    """One candidate per enabled tier: firing while the tier is breached."""
    out = []
    for tier in slo.tiers:
        if not tier.enabled:
            continue
        threshold = tier.factor * (1 - slo.objective)
        out.append(Candidate(
            labels={"alertname": "SustainSloBurnRate", "slo": slo.name, "tier": tier.name,
                    "severity": tier.severity},
            condition=tier.name in status.breached_tiers,
            annotations={
                "summary": f"SLO {slo.name} is burning its error budget over "
                           f"{tier.factor:g}x too fast",
                "description": f"Error ratio over {window_label(tier.long_window_s)} and "
                               f"{window_label(tier.short_window_s)} is above "
                               f"{threshold:g}."}))
    return out


def by_fingerprint(candidates: Sequence[Candidate]) -> dict[str, Candidate]:
    return {c.fingerprint: c for c in candidates}
