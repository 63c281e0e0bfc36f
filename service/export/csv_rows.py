"""Sample rows as CSV text: the columns of `samples` in their stored order, empty for NULL,
ISO 8601 for times, lower-case booleans (what pandas, DuckDB and spreadsheets read back)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sustain.service.runs.rows import SAMPLE_COLUMNS

MEDIA_TYPE = "text/csv; charset=utf-8"


def _value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def csv_text(rows: Iterable[dict[str, Any]], header: bool) -> str:
    """Rows (dicts keyed by column) as CSV lines, with the header line first if asked."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(SAMPLE_COLUMNS)
    writer.writerows([_value(row[c]) for c in SAMPLE_COLUMNS] for row in rows)
    return out.getvalue()
