"""The drift report of a probe's metric statistic."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class ChangePoint(BaseModel):
    run_id: int
    scheduled_for: datetime


class WindowStat(BaseModel):
    start: datetime | None
    end: datetime | None
    runs: int
    value: float | None = Field(description="The statistic over the window's merged sketch.")


class DriftRead(BaseModel):
    probe_id: int
    location: str | None = None
    """The location whose runs were compared; null: every location's."""
    metric: str
    stat: str
    verdict: Literal["regressed", "improved", "no_change", "insufficient_data"]
    ratio: float | None = Field(
        description="Median of recent run-level values / median of the baseline's (or the "
        "pinned run's value).")
    ci_low: float | None
    ci_high: float | None = Field(description="95 % bootstrap interval of the ratio.")
    p_value: float | None = Field(
        description="Rank test from the change point on, Bonferroni-corrected; null against "
        "a pinned run.")
    shift: float | None = Field(description="Median after the change point / before it.")
    change_point: ChangePoint | None = Field(
        description="The first run of the new level, when there is a finding.")
    recent: WindowStat
    baseline: WindowStat
    baseline_run: int | None
