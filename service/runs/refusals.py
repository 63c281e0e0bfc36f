"""Telling a record the database refuses from a database that cannot take anything.

A write can fail two ways. The database may be *unavailable* (connection refused or lost, a
timeout, the server shutting down or out of resources, a serialisation failure): then every
record waits and the batch is retried, since nothing is wrong with the records. Or the
database *answered and refused this record* (SQLSTATE class 22, data exception: a value out
of range, text it cannot hold; class 23, integrity constraint violation), or the record cannot
even be encoded (a NaN or infinity where JSON has no number): retrying that record can never
succeed, and must never hold back the records of other runs and probes. Those are refusals:
the writer stores everything else, quarantines the refused record and fails its run.

Pure: classification and descriptions over exceptions and records, no I/O.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sustain.service.runs.finals import RunFinal
from sustain.service.runs.rows import POS, RUN_ID, STORED_COLUMNS, SampleTuple
from sustain.service.strict_json import NonFiniteNumberError

REFUSAL_CLASSES = ("22", "23")
"""SQLSTATE classes of a refused record: data exception, integrity constraint violation."""

REASONS = ("non_finite", "out_of_range", "invalid_text", "too_long", "constraint",
           "invalid_value")
"""Every `reason` a refusal can have: the label values of sustain_storage_rejected_total."""

_BY_SQLSTATE = {
    "22003": "out_of_range",  # numeric_value_out_of_range
    "22008": "out_of_range",  # datetime_field_overflow
    "22P02": "invalid_text",  # invalid_text_representation (e.g. JSON PostgreSQL refuses)
    "22P05": "invalid_text",  # untranslatable_character (\u0000 in jsonb)
    "22021": "invalid_text",  # character_not_in_repertoire (NUL in text)
    "22001": "too_long",  # string_data_right_truncation
}

NO_PARTITION = "no partition of relation"
"""How PostgreSQL words a row with no partition to go to (SQLSTATE 23514): the day's partition
is missing (dropped, or not yet made), which the writer repairs and retries."""

MAX_ERROR_CHARS = 1000
"""A refusal's message is cut here: asyncpg quotes whole array parameters in its messages."""
MAX_RECORD_CHARS = 65_536
"""A quarantined record's text is cut here."""


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a database error, raw from asyncpg or wrapped by SQLAlchemy."""
    for candidate in (exc, getattr(exc, "orig", None), exc.__cause__):
        state = getattr(candidate, "sqlstate", None)
        if isinstance(state, str) and state:
            return state
    return None


def refusal_reason(exc: BaseException) -> str | None:
    """Why the record was refused (one of REASONS), or None when `exc` is not a refusal of
    the record but a database that is unavailable (retry)."""
    if isinstance(exc, NonFiniteNumberError):
        return "non_finite"
    state = sqlstate(exc)
    if state is None or state[:2] not in REFUSAL_CLASSES:
        return None
    if NO_PARTITION in str(exc):  # 23514 too, but the table's state, not the row's fault
        return None
    if state.startswith("23"):
        return "constraint"
    if state in _BY_SQLSTATE:
        return _BY_SQLSTATE[state]
    message = str(exc)
    return "out_of_range" if "out of" in message and "range" in message else "invalid_value"


def describe(exc: BaseException) -> str:
    """The refusal as a person reads it: the SQLSTATE and the database's message (its first
    line and DETAIL), bounded."""
    state = sqlstate(exc)
    text = " ".join(line.strip() for line in str(getattr(exc, "orig", None) or exc)
                    .splitlines() if line.strip())
    if isinstance(exc, NonFiniteNumberError):
        text = f"not JSON: {exc}"
    text = text.replace("\x00", "\\x00")
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS - 1] + "…"
    return f"{text} (SQLSTATE {state})" if state else text


@dataclass(frozen=True, slots=True)
class Refused:
    """One record the database refused, as it was, with why: what `dead_letters` keeps."""

    kind: str
    """`sample` or `final`."""
    run_id: int
    probe_id: int
    reason: str
    """One of REASONS."""
    error: str
    """The database's words (or the encoder's), bounded."""
    record: str
    """The record as JSON text, non-finite numbers spelled as strings, bounded."""
    pos: int | None = None
    """A sample's position in its run."""


def _plain(value: Any) -> Any:
    """`value` made JSON-safe for quarantine: NaN and infinities as strings, datetimes in
    ISO 8601, bytes by their length, anything else by its repr."""
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(bytes(value))} bytes>"
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return repr(value)


def record_text(value: Any) -> str:
    """`value` as bounded JSON text that any database text column accepts."""
    text = json.dumps(_plain(value), ensure_ascii=True, default=repr)
    return text if len(text) <= MAX_RECORD_CHARS else text[:MAX_RECORD_CHARS - 1] + "…"


def refused_sample(row: SampleTuple, probe_id: int, exc: BaseException) -> Refused:
    """A sample row the database refused with `exc`."""
    reason = refusal_reason(exc)
    assert reason is not None
    return sample_refusal(row, probe_id, reason, describe(exc))


def sample_refusal(row: SampleTuple, probe_id: int, reason: str, error: str) -> Refused:
    """A sample row refused for `reason` (one of REASONS), in `error`'s words."""
    return Refused("sample", int(row[RUN_ID]), probe_id, reason, error,
                   record_text(dict(zip(STORED_COLUMNS, row, strict=True))), int(row[POS]))


def refused_final(final: RunFinal, exc: BaseException) -> Refused:
    reason = refusal_reason(exc)
    assert reason is not None
    return Refused("final", final.run_id, final.probe_id, reason, describe(exc),
                   record_text(final))


def run_error(samples_refused: int, first_sample: Refused | None,
              final: Refused | None) -> str:
    """Why a run is failed when the database refused some of its records: what was refused,
    why, and where the records are kept."""
    parts = []
    if samples_refused and first_sample is not None:
        parts.append(f"the database refused {samples_refused} of this run's samples "
                     f"({first_sample.reason}: {first_sample.error})")
    if final is not None:
        parts.append(f"the database refused this run's final record ({final.reason}: "
                     f"{final.error}); stored without the parts it refused")
    text = "; ".join(parts) + "; the refused records are kept in dead_letters"
    return text if len(text) <= 2 * MAX_ERROR_CHARS else text[:2 * MAX_ERROR_CHARS - 1] + "…"
