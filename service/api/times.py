"""Times in query parameters: a time without an offset is UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def utc_or_now(moment: datetime | None) -> datetime:
    """The given time in UTC, or now when none was given."""
    return datetime.now(UTC) if moment is None else as_utc(moment)
