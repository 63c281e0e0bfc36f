"""Times in query parameters arrive as ApiTime (UTC, range-checked); a missing one is now."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_or_now(moment: datetime | None) -> datetime:
    """The given time (already UTC, see schemas.common.ApiTime), or now when none was given."""
    return datetime.now(UTC) if moment is None else moment
