"""Multi-window, multi-burn-rate alert tiers (Google SRE Workbook, chapter 5; burn rate as
docs/metrics.md#burn-rate defines it): a tier fires when the burn rate over its long window
AND over its short window both exceed its factor, so it pages fast on a heavy burn and stops
as soon as the burn stops."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from sustain.probes.inputs import InputModel

Severity = Literal["page", "ticket"]


class BurnTier(InputModel):
    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=r"^[a-z0-9_]{1,32}$")
    severity: Severity
    factor: float = Field(gt=0, le=1000, description="Burn-rate threshold.")
    long_window_s: int = Field(gt=0, le=90 * 86400)
    short_window_s: int = Field(gt=0, le=90 * 86400)
    for_s: int = Field(default=0, ge=0, le=86400,
                       description="How long the tier must stay breached before it fires "
                       "(the alert is pending meanwhile); Prometheus rules get it as `for`.")
    enabled: bool = True

    @model_validator(mode="after")
    def _short_is_shorter(self) -> BurnTier:
        if self.short_window_s >= self.long_window_s:
            raise ValueError("short_window_s must be shorter than long_window_s")
        return self


DEFAULT_TIERS: tuple[BurnTier, ...] = (
    BurnTier(name="page_fast", severity="page", factor=14.4, long_window_s=3600,
             short_window_s=300),
    BurnTier(name="page_slow", severity="page", factor=6.0, long_window_s=6 * 3600,
             short_window_s=1800),
    BurnTier(name="ticket_fast", severity="ticket", factor=3.0, long_window_s=86400,
             short_window_s=2 * 3600),
    BurnTier(name="ticket_slow", severity="ticket", factor=1.0, long_window_s=3 * 86400,
             short_window_s=6 * 3600),
)


def windows(tiers: Sequence[BurnTier]) -> list[int]:
    """Every window length the enabled tiers look at, ascending."""
    return sorted({w for t in tiers if t.enabled for w in (t.long_window_s, t.short_window_s)})


def threshold(tier: BurnTier, objective: float) -> float:
    """The error ratio above which the tier burns (its factor times the error budget),
    rounded to 12 places so alerts and generated rules print the same number."""
    return round(tier.factor * (1 - objective), 12)


def tier_breached(tier: BurnTier, burn_rates: Mapping[int, float | None]) -> bool:
    """Whether the tier's condition holds; a window without events (None) never breaches."""
    if not tier.enabled:
        return False
    long, short = burn_rates.get(tier.long_window_s), burn_rates.get(tier.short_window_s)
    return long is not None and short is not None and long > tier.factor and \
        short > tier.factor
