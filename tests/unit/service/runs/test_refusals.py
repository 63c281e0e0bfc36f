"""Telling a refused record (quarantine it, store the rest) from an unavailable database
(retry everything), by SQLSTATE, as asyncpg and SQLAlchemy raise them."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest
from sqlalchemy.exc import DBAPIError

from sustain.service.runs.finals import RunCounts, RunFinal
from sustain.service.runs.refusals import (
    MAX_ERROR_CHARS,
    MAX_RECORD_CHARS,
    REASONS,
    Refused,
    describe,
    record_text,
    refusal_reason,
    refused_final,
    run_error,
)
from sustain.service.runs.rows import STORED_COLUMNS, row_problem
from sustain.service.strict_json import NonFiniteNumberError


@pytest.mark.parametrize(("error", "reason"), [
    (asyncpg.NumericValueOutOfRangeError("smallint out of range"), "out_of_range"),
    (asyncpg.InvalidTextRepresentationError('invalid input syntax for type json'),
     "invalid_text"),
    (asyncpg.UntranslatableCharacterError("unsupported Unicode escape sequence"),
     "invalid_text"),
    (asyncpg.CharacterNotInRepertoireError('invalid byte sequence for encoding "UTF8"'),
     "invalid_text"),
    (asyncpg.StringDataRightTruncationError("value too long"), "too_long"),
    (asyncpg.CheckViolationError("violates check constraint"), "constraint"),
    (asyncpg.ForeignKeyViolationError("violates foreign key constraint"), "constraint"),
    (asyncpg.DivisionByZeroError("division by zero"), "invalid_value"),
    (NonFiniteNumberError("summary.cov", math.inf), "non_finite"),
])
def test_a_data_error_is_a_refusal_of_the_record(error: BaseException, reason: str) -> None:
    assert refusal_reason(error) == reason
    assert reason in REASONS


def test_asyncpgs_own_encoding_refusal_is_a_refusal() -> None:
    """asyncpg refuses a parameter it cannot encode itself (SQLSTATE 22000)."""
    error = asyncpg.DataError("invalid input for query argument $17: [1099511627776] "
                              "(value out of int32 range)")
    assert refusal_reason(error) == "out_of_range"


@pytest.mark.parametrize("error", [
    ConnectionRefusedError(111, "Connection refused"),
    TimeoutError(),
    OSError("network unreachable"),
    asyncpg.AdminShutdownError("terminating connection due to administrator command"),
    asyncpg.CannotConnectNowError("the database system is starting up"),
    asyncpg.TooManyConnectionsError("too many clients"),
    asyncpg.LockNotAvailableError("canceling statement due to lock timeout"),
    asyncpg.SerializationError("could not serialize access"),
    asyncpg.DeadlockDetectedError("deadlock detected"),
    asyncpg.DiskFullError("could not extend file"),
    asyncpg.InterfaceError("connection is closed"),
    asyncpg.UndefinedTableError('relation "samples" does not exist'),
    # the day's partition is missing: the table's state, which the writer repairs
    asyncpg.CheckViolationError('no partition of relation "samples" found for row'),
])
def test_an_unavailable_database_is_not_a_refusal(error: BaseException) -> None:
    assert refusal_reason(error) is None


def test_a_refusal_wrapped_by_sqlalchemy_is_still_recognised() -> None:
    orig = asyncpg.NumericValueOutOfRangeError("integer out of range")
    wrapped = DBAPIError("UPDATE runs ...", {}, orig)
    assert refusal_reason(wrapped) == "out_of_range"


def test_a_refusal_is_described_with_its_sqlstate_and_bounded() -> None:
    error = asyncpg.DataError("invalid input for query argument $1: [" + "7" * 5000 + "]")
    text = describe(error)
    assert text.endswith("(SQLSTATE 22000)")
    assert len(text) <= MAX_ERROR_CHARS + len(" (SQLSTATE 22000)")


def test_a_quarantined_record_is_ascii_json_with_non_finite_numbers_spelled() -> None:
    final = RunFinal(run_id=3, probe_id=4, scheduled_for=datetime(2026, 1, 2, tzinfo=UTC),
                     status="succeeded", summary={"cov": math.inf, "x": "a\x00b"},
                     counts=RunCounts(1, 1, None, 5, 1.0), sketches={(0, "ttft"): b"abc"})
    refused = refused_final(final, NonFiniteNumberError("summary.cov", math.inf))
    record = json.loads(refused.record)
    assert record["summary"] == {"cov": "inf", "x": "a\x00b"}
    assert record["counts"]["output_tokens"] == 5
    assert record["sketches"] == {"(0, 'ttft')": "<3 bytes>"}
    assert refused.record.isascii()
    assert "\x00" not in refused.record


def test_a_huge_record_is_cut_to_the_bound() -> None:
    assert len(record_text({"x": "y" * (2 * MAX_RECORD_CHARS)})) == MAX_RECORD_CHARS


def test_a_runs_error_says_what_was_refused_why_and_where_it_is_kept() -> None:
    first = Refused("sample", 1, 2, "out_of_range", "value out of int32 range", "{}", 7)
    final = Refused("final", 1, 2, "non_finite", "summary.cov is inf", "{}")
    text = run_error(3, first, final)
    assert "refused 3 of this run's samples (out_of_range: value out of int32 range)" in text
    assert "final record (non_finite: summary.cov is inf)" in text
    assert text.endswith("kept in dead_letters")


def sample_row(**values: Any) -> tuple[Any, ...]:
    """A valid sample row, with `values` in place of its columns."""
    row = dict.fromkeys(STORED_COLUMNS)
    row.update(run_id=1, pos=0, probe_id=1, seq=0, stage=0,
               sent_at=datetime(2026, 1, 1, tzinfo=UTC), e2e_ms=10.0, itl_count=0,
               output_tokens=3, tokens_server_counted=True, outcome="success")
    row.update(values)
    return tuple(row[name] for name in STORED_COLUMNS)


@pytest.mark.parametrize(("values", "reason", "column"), [
    ({"input_tokens": 2**40}, "out_of_range", "input_tokens"),
    ({"http_status": 70_000}, "out_of_range", "http_status"),
    ({"cached_tokens": -(2**31) - 1}, "out_of_range", "cached_tokens"),
    ({"conversation": "a\x00b"}, "invalid_text", "conversation"),
    ({"conversation": "\ud800"}, "invalid_text", "conversation"),
    ({"error_detail": "HTTP 500: a\x00b"}, "invalid_text", "error_detail"),
    ({"ttft_ms": math.nan}, "non_finite", "ttft_ms"),
    ({"e2e_ms": math.inf}, "non_finite", "e2e_ms"),
    ({"output_tokens": 3.5}, "invalid_value", "output_tokens"),
])
def test_a_row_the_database_would_refuse_is_told_in_python(
        values: dict[str, Any], reason: str, column: str) -> None:
    problem = row_problem(sample_row(**values))
    assert problem is not None
    assert problem[0] == reason
    assert problem[1].startswith(f"{column}: ")


def test_a_valid_row_has_no_problem() -> None:
    assert row_problem(sample_row(input_tokens=2**31 - 1, http_status=32_767,
                                  conversation="c-1", ttft_ms=0.0)) is None
