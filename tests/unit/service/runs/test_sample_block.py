"""A packed block gives back exactly the rows packed (every column kind, nulls, figures kept
to the microsecond and figures that are not), small for what a streamed chat sample holds,
and refuses any block it cannot read whole."""

from __future__ import annotations

import math
import random
import secrets
import struct
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sustain.service.runs import integer_planes, sample_block
from sustain.service.runs.rows import STORED_COLUMNS, STORED_TYPES, SampleTuple

START = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)
REFUSALS = r"block|column|flag|presence|dictionary|ids|text|mode|doubles|send time"
"""What a refusal names: the part of the block it could not read."""


def chat_rows(count: int, rng: random.Random, run_id: int = 7) -> list[SampleTuple]:
    """Streamed chat samples at 200 req/s as a run stores them: times read in ns off the
    monotonic clock (ms = ns / 1e6), lag, corrected E2E and TPOT computed as Sample does."""
    rows = []
    for pos in range(count):
        scheduled = pos * 5.0
        sent = (pos * 5_000_000 + int(rng.expovariate(1 / 80_000))) / 1e6
        ttft = int(40e6 * rng.lognormvariate(0, 0.3)) / 1e6
        gaps = [int(8e6 * rng.lognormvariate(0, 0.3)) / 1e6 for _ in range(63)]
        e2e = int((ttft + sum(gaps)) * 1e6) / 1e6
        lag = sent - scheduled
        row: dict[str, Any] = dict.fromkeys(STORED_COLUMNS)
        row.update(
            run_id=run_id, pos=pos, probe_id=3, seq=pos, stage=0,
            sent_at=START + timedelta(microseconds=round(sent * 1000)),
            t_sched_ms=scheduled, t_send_ms=sent, lag_ms=lag, ttft_ms=ttft, itl_count=63,
            itl_mean_ms=sum(gaps) / 63, itl_max_ms=max(gaps), tpot_ms=(e2e - ttft) / 63,
            e2e_ms=e2e, corrected_e2e_ms=e2e + lag, input_tokens=20, output_tokens=64,
            tokens_server_counted=True, outcome="success", http_status=200, streamed=True,
            ttfb_ms=int(rng.uniform(0.3e6, 0.9e6)) / 1e6, connection_reused=pos > 0,
            connect_ms=0.123456 if pos == 0 else None, trace_id=secrets.token_hex(16))
        rows.append(tuple(row[name] for name in STORED_COLUMNS))
    return rows


def test_every_row_comes_back_exactly() -> None:
    rows = chat_rows(500, random.Random(1))
    assert sample_block.unpack(sample_block.pack(rows), 7, 3) == rows


def test_a_streamed_chat_sample_packs_in_under_fifty_bytes() -> None:
    rows = chat_rows(4096, random.Random(2))
    assert len(sample_block.pack(rows)) / len(rows) < 50


@pytest.mark.parametrize("column", ["lag_ms", "corrected_e2e_ms", "tpot_ms"])
def test_a_figure_computed_otherwise_than_sample_does_is_kept_as_given(column: str) -> None:
    rows = chat_rows(20, random.Random(8))
    index = STORED_COLUMNS.index(column)
    odd = [(*row[:index], row[index] + (1e-9 if i == 7 else 0), *row[index + 1:])
           for i, row in enumerate(rows)]
    assert sample_block.unpack(sample_block.pack(odd), 7, 3) == odd
    assert len(sample_block.pack(odd)) > len(sample_block.pack(rows))


def test_every_kind_of_column_and_null_comes_back() -> None:
    rng = random.Random(3)
    rows = []
    for pos in range(300):
        values: list[Any] = []
        for name, kind in zip(STORED_COLUMNS, STORED_TYPES, strict=True):
            if name in ("run_id", "probe_id"):
                values.append(11 if name == "run_id" else 5)
            elif name == "pos":
                values.append(pos * 3)
            elif rng.random() < 0.3:
                values.append(None)
            elif kind == "timestamptz":
                values.append(START - timedelta(microseconds=rng.randrange(-10**12, 10**12)))
            elif kind == "boolean":
                values.append(rng.random() < 0.5)
            elif kind == "text":
                values.append(rng.choice(["success", "ünïcödé ✓", "", "a\x01b", "x" * 1024]))
            elif kind == "float8":
                values.append(rng.choice([rng.uniform(-1e6, 1e6), 1e300, -0.5, 0.001, 3]))
            else:
                bound = {"smallint": 2**15, "integer": 2**31, "bigint": 2**63}[kind]
                values.append(rng.choice([-bound, bound - 1, 0, rng.randrange(-99, 99)]))
        rows.append(tuple(values))
    assert sample_block.unpack(sample_block.pack(rows), 11, 5) == rows


def test_figures_not_whole_nanoseconds_are_kept_as_doubles() -> None:
    rows = chat_rows(10, random.Random(4))
    ttft = STORED_COLUMNS.index("ttft_ms")
    odd = [(*row[:ttft], math.pi * (i + 1), *row[ttft + 1:]) for i, row in enumerate(rows)]
    assert sample_block.unpack(sample_block.pack(odd), 7, 3) == odd


def test_trace_ids_that_are_not_lowercase_hex_stay_text() -> None:
    rows = chat_rows(3, random.Random(5))
    trace = STORED_COLUMNS.index("trace_id")
    odd = [(*row[:trace], value, *row[trace + 1:]) for row, value in zip(
        rows, ["A" * 32, "0123 4567 89ab cdef 0123 4567 89", "ab"], strict=True)]
    assert sample_block.unpack(sample_block.pack(odd), 7, 3) == odd


def test_a_block_holds_one_run_and_at_most_its_bound() -> None:
    rows = chat_rows(3, random.Random(6))
    with pytest.raises(ValueError, match="one run"):
        sample_block.pack([*rows, chat_rows(1, random.Random(6), run_id=8)[0]])
    with pytest.raises(ValueError, match="1 to 4096"):
        sample_block.pack([])
    with pytest.raises(ValueError, match="1 to 4096"):
        sample_block.pack(rows * 1366)


def test_negative_zero_and_whole_numbers_in_float_columns_come_back_as_stored() -> None:
    rows = chat_rows(5, random.Random(9))
    ttfb, audio = STORED_COLUMNS.index("ttfb_ms"), STORED_COLUMNS.index("audio_s")
    odd = []
    for i, row in enumerate(rows):
        values = list(row)
        values[ttfb], values[audio] = -0.0 if i % 2 else 0.0, float(i)
        odd.append(tuple(values))
    back = sample_block.unpack(sample_block.pack(odd), 7, 3)
    assert back == odd
    assert [math.copysign(1, row[ttfb]) for row in back] == [1, -1, 1, -1, 1]


def test_not_a_number_and_infinity_come_back_bit_for_bit() -> None:
    rows = chat_rows(4, random.Random(10))
    e2e = STORED_COLUMNS.index("e2e_ms")
    odd = [(*row[:e2e], value, *row[e2e + 1:])
           for row, value in zip(rows, [math.nan, math.inf, -math.inf, 1.5], strict=True)]
    back = sample_block.unpack(sample_block.pack(odd), 7, 3)
    assert sample_block.identical(back, odd)
    assert not sample_block.identical(back, rows)


@pytest.mark.parametrize("damage", ["cut", "mode", "version", "count", "trailing", "bomb",
                                    "after", "far"])
def test_a_damaged_block_is_refused_whole(damage: str) -> None:
    block = sample_block.pack(chat_rows(50, random.Random(7)))
    raw = zlib.decompress(block)
    if damage == "cut":
        bad = block[: len(block) // 2]
    elif damage == "mode":
        bad = zlib.compress(raw[:5] + b"\x63" + raw[6:])  # the first column's mode
    elif damage == "version":
        bad = zlib.compress(b"\x02" + raw[1:])
    elif damage == "count":
        bad = zlib.compress(struct.pack("<BI", 1, 4097) + raw[5:])
    elif damage == "trailing":
        bad = zlib.compress(raw + b"\x00")
    elif damage == "after":
        bad = block + b"more"
    elif damage == "far":  # a send time a hundred thousand years on
        bad = _with_send_offsets(raw, 3 * 10**18)
    else:
        bad = zlib.compress(b"\x00" * (sample_block.MAX_INFLATED_BYTES + 1))
    with pytest.raises(ValueError, match=REFUSALS):
        sample_block.unpack(bad, 7, 3)


def _with_send_offsets(raw: bytes, offset: int) -> bytes:
    """`raw` (an inflated block) with its send time column replaced by offsets of `offset`
    µs from t_send, compressed again."""
    count = struct.unpack_from("<BI", raw)[1]
    at = 5
    for index in sample_block.PACKED:
        head = at
        mode, presence = raw[at] & 0x7F, raw[at] >> 7
        at += 1
        length = 0
        if mode not in (sample_block.ALL_NULL, sample_block.DERIVED):
            length, at = integer_planes.read_length(raw, at)
        at += count if presence else 0
        if STORED_COLUMNS[index] == "sent_at":
            values = [offset << 1] + [0] * (count - 1)  # zigzag of offset, then no change
            section = bytes([8]) + b"".join(
                bytes((value >> (8 * i)) & 0xFF for value in values) for i in range(8))
            head_bytes = integer_planes.column_head(mode, False, len(section))
            return zlib.compress(raw[:head] + head_bytes + section + raw[at + length:])
        at += length
    raise AssertionError("no send time column")
