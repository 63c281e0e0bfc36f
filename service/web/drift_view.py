"""A probe's drift as its pages say it: what moved, "no change", or the true reason there is
no verdict yet (which window lacks runs, that the probe is disabled, or that no evaluation
has run), read from the stored findings and the runs of the windows they compared."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from sustain.service.config import Settings
from sustain.service.db import drift as drift_queries
from sustain.service.evaluation.drift_words import (
    NOT_ENOUGH,
    drift_words,
    span_words,
    why_no_verdict,
)
from sustain.service.history.windows import parse_duration


def every_words(seconds: float) -> str:
    """`every 5 minutes`, `every hour`."""
    count, unit = span_words(seconds)
    return f"every {unit}" if count == 1 else f"every {count} {unit}s"


async def drift_text(session: AsyncSession, probe_id: int, enabled: bool,
                     settings: Settings) -> str:
    """The drift words of one probe: its findings' verdicts, else why it has none. The
    windows are those of its newest evaluation (SUSTAIN_DRIFT_WINDOW and the
    SUSTAIN_DRIFT_BASELINE before it, ending when it ran), so the reason matches the verdict
    it explains."""
    findings = [finding for _, finding in await drift_queries.findings(session, probe_id)]
    words = drift_words(findings)
    if words != NOT_ENOUGH:
        return words
    if not enabled:
        return "not checked: the probe is disabled"
    if not findings:
        return ("not checked yet: drift is checked "
                f"{every_words(settings.drift_evaluation_s)}")
    evaluated = max(finding.evaluated_at for finding in findings)
    window_s = parse_duration(settings.drift_window)
    baseline_s = parse_duration(settings.drift_baseline)
    start = evaluated - timedelta(seconds=window_s)
    recent = await drift_queries.window_runs(session, probe_id, start, evaluated)
    baseline = await drift_queries.window_runs(session, probe_id,
                                               start - timedelta(seconds=baseline_s), start)
    return why_no_verdict(baseline, recent, window_s, baseline_s)
