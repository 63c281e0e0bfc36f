"""HTTP status -> error class: the one table every sender uses (OpenAI requests over either
transport, the `code` of an error event inside an OpenAI stream, and plain `http` checks)."""

from __future__ import annotations

from sustain.probes.measure.sample import ErrorClass


def error_class_for_status(status: int) -> ErrorClass | None:
    """429, other 4xx and 5xx are failures by status alone; None for anything below 400 (the
    caller decides whether that status is the one it expected)."""
    if status == 429:
        return ErrorClass.HTTP_429
    if 400 <= status < 500:
        return ErrorClass.HTTP_4XX
    if status >= 500:
        return ErrorClass.HTTP_5XX
    return None
