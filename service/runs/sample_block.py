"""A block of one run's raw samples, packed: every column of STORED_COLUMNS but the run and
probe ids (the block's row holds those) stored column after column and compressed together,
so a streamed chat sample keeps about 43 B (block row and index included) instead of a 320 B
row.

Lossless: `unpack(pack(rows))` gives back the same tuples, bit for bit. What makes it small is
what the columns hold:
- a time the client measured is a whole number of ns of the monotonic clock over 1e6 (ms),
  so it is kept as that whole number (or of µs, where every value of the column is one); a
  float column where some value is not is kept as 8-byte doubles;
- lag, corrected E2E and TPOT are what Sample computes from the other columns (t_send -
  t_sched, E2E + lag, (E2E - TTFT) / (output tokens - 1)), and TTFO is TTFT for an answer
  without reasoning: where every value of the block is exactly that, the column is not kept
  at all and is computed again on reading;
- the send time (wall clock, µs) is the run's origin plus t_send: it is kept as its
  difference from t_send in µs (a constant, give or take rounding); the mean ITL gap is a
  sum of whole ns over the gap count: it is kept as that sum and the few units in the last
  place by which the float differs from it;
- counters, ordinals and the send time (µs since the epoch) grow steadily, so they are kept
  as differences from the previous sample;
- repeated text (outcome, error class, conversation) is a dictionary and indexes; a W3C trace
  id is its 16 bytes;
- every column is split into byte planes (its values' lowest bytes together, then the next),
  so zlib finds the runs of zero and near-equal bytes.

Decoding is bounded: a block holds at most MAX_BLOCK_SAMPLES samples, its bytes inflate to at
most MAX_INFLATED_BYTES, and any inconsistency is a ValueError, never a partial answer.
Pure functions over plain data (call them off the event loop: a block of 4,096 samples is a
few ms of CPU)."""

from __future__ import annotations

import struct
import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sustain.service.runs.integer_planes import (
    PRESENCE,
    column_head,
    deltas,
    planes,
    read_length,
    sums,
    unplanes,
    unzigzag,
    zigzag,
)
from sustain.service.runs.rows import (
    MAX_STORED_DETAIL_CHARS,
    PROBE_ID,
    RUN_ID,
    STORED_COLUMNS,
    STORED_TYPES,
    SampleTuple,
)

FORMAT = 1
"""The first byte of every block; a reader refuses any other."""
MAX_BLOCK_SAMPLES = 4096
"""Samples a block holds at most: what one decode holds in memory (about 4,096 tuples)."""
MAX_INFLATED_BYTES = MAX_BLOCK_SAMPLES * (MAX_STORED_DETAIL_CHARS * 4 + 2048)
"""The most a block may inflate to (every sample with a full error detail of 4-byte
characters, and room for every other column): a corrupt block is refused, not inflated."""
PACKED = tuple(index for index in range(len(STORED_COLUMNS)) if index not in (RUN_ID, PROBE_ID))
"""The tuple positions a block keeps, in order (the run and probe ids are the block row's)."""
DELTA_COLUMNS = frozenset({"pos", "seq", "sent_at", "t_sched_ms", "t_send_ms", "turn"})
"""Columns kept as differences from the previous sample's value (they grow steadily)."""
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_US = timedelta(microseconds=1)
MAX_EXACT_US = 2**53
"""Values in µs up to here are whole doubles: µs / 1000 is then the stored ms exactly."""

(ALL_NULL, INTEGERS, DELTAS, MICROS, DOUBLES, TEXTS, HEX_IDS, NANOS, NANO_DELTAS, DERIVED,
 FROM_SEND, MEAN_OF_SUM) = range(12)
"""How a column is kept (its mode byte)."""
SCALES = {MICROS: 1_000, DELTAS: 1_000, NANOS: 1_000_000, NANO_DELTAS: 1_000_000}
"""Whole units per ms of a float column kept as integers."""

_HEADER = struct.Struct("<BI")
def _as_whole(values: Sequence[float], scale: int) -> list[int] | None:
    """The values as whole units (`scale` per ms) when each is exactly one (units / scale
    == value, bit for bit), else None."""
    out = []
    for value in values:
        try:
            units = round(value * scale)
        except (ValueError, OverflowError):  # NaN, infinity: kept as doubles
            return None
        if abs(units) >= MAX_EXACT_US or _bits(units / scale) != _bits(value):
            return None
        out.append(units)
    return out


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


def _encode(name: str, kind: str, values: list[Any]) -> tuple[int, bytes]:
    """(mode, section) of one column's present values."""
    if kind == "timestamptz":
        micros = [(value - EPOCH) // ONE_US for value in values]
        return DELTAS, planes(zigzag(deltas(micros)))
    if kind == "boolean":
        return INTEGERS, planes([int(value) for value in values])
    if kind == "float8":
        for scale, plain, delta in ((1_000, MICROS, DELTAS), (1_000_000, NANOS, NANO_DELTAS)):
            whole = _as_whole(values, scale)
            if whole is not None:
                if name in DELTA_COLUMNS:
                    return delta, planes(zigzag(deltas(whole)))
                return plain, planes(zigzag(whole))
        return DOUBLES, planes(list(array("Q", array("d", values).tobytes())))
    if kind == "text":
        if all(_is_trace_id(value) for value in values):
            return HEX_IDS, b"".join(bytes.fromhex(value) for value in values)
        words = list(dict.fromkeys(values))
        table = "\x00".join(words).encode("utf-8")
        index = {word: i for i, word in enumerate(words)}
        return TEXTS, (struct.pack("<II", len(words), len(table)) + table
                       + planes([index[value] for value in values]))
    if name in DELTA_COLUMNS:
        return DELTAS, planes(zigzag(deltas(values)))
    return INTEGERS, planes(zigzag(values))


def _ordinal(value: float) -> int:
    """A double's bits as a signed integer: the neighbours of a value are ordinal +- 1."""
    ordinal: int = struct.unpack("<q", struct.pack("<d", value))[0]
    return ordinal


def _from_ordinal(ordinal: int) -> float:
    value: float = struct.unpack("<d", struct.pack("<q", ordinal))[0]
    return value


def _send_us(row: Sequence[Any]) -> int:
    sent: float = row[_AT["t_send_ms"]]
    return round(sent * 1000)


def _mean_parts(value: float, count: int) -> tuple[int, int]:
    """(the gaps' sum in whole ns, the mean's distance in ulps from that sum over count)."""
    total = round(value * count * 1_000_000)
    return total, _ordinal(value) - _ordinal(total / 1_000_000 / count)


def _mean_of(total: int, off: int, count: int) -> float:
    return _from_ordinal(_ordinal(total / 1_000_000 / count) + off)


def _encode_related(index: int, rows: Sequence[SampleTuple]) -> tuple[int, bytes] | None:
    """(mode, section) of a column kept relative to others of its row, or None where it
    cannot be (its rows are those that have a value)."""
    try:
        if index == _AT["sent_at"]:
            offsets = [(row[index] - EPOCH) // ONE_US - _send_us(row) for row in rows]
            return FROM_SEND, planes(zigzag(deltas(offsets)))
        if index == _AT["itl_mean_ms"]:
            parts = [_mean_parts(row[index], row[_AT["itl_count"]]) for row in rows]
            if any(abs(total) >= MAX_EXACT_US or abs(off) >= 2**62 for total, off in parts):
                return None
            totals = planes(zigzag([total for total, _ in parts]))
            return MEAN_OF_SUM, (struct.pack("<I", len(totals)) + totals
                                 + planes(zigzag([off for _, off in parts])))
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, struct.error):
        return None
    return None


_HEX = frozenset("0123456789abcdef")


def _is_trace_id(value: str) -> bool:
    """32 lowercase hex digits, nothing else (bytes.fromhex would also skip spaces)."""
    return len(value) == 32 and _HEX.issuperset(value)


def _decode(kind: str, mode: int, section: bytes, count: int) -> list[Any]:
    if mode == FROM_SEND:
        if kind != "timestamptz":
            raise ValueError("a send time offset in a column that is not the send time")
        return sums(unzigzag(unplanes(section, count)))
    if mode == MEAN_OF_SUM:
        if kind != "float8" or len(section) < 4:
            raise ValueError("a mean gap without its sums")
        (length,) = struct.unpack_from("<I", section)
        totals = unzigzag(unplanes(section[4:4 + length], count))
        offs = unzigzag(unplanes(section[4 + length:], count))
        return list(zip(totals, offs, strict=True))
    if mode == HEX_IDS:
        if kind != "text" or len(section) != 16 * count:
            raise ValueError("trace ids that do not fill their column")
        return [section[i * 16:(i + 1) * 16].hex() for i in range(count)]
    if mode == TEXTS:
        if kind != "text" or len(section) < 8:
            raise ValueError("a text column without its dictionary")
        words_count, table_length = struct.unpack_from("<II", section)
        if 8 + table_length > len(section):
            raise ValueError("a text dictionary longer than its column")
        words = section[8:8 + table_length].decode("utf-8").split("\x00")
        if len(words) != words_count:
            raise ValueError("a text dictionary of the wrong size")
        indexes = unplanes(section[8 + table_length:], count)
        if any(i >= words_count for i in indexes):
            raise ValueError("a text index outside its dictionary")
        return [words[i] for i in indexes]
    if mode == DOUBLES:
        if kind != "float8":
            raise ValueError("doubles in a column that is not a float")
        raw = array("d", array("Q", unplanes(section, count)).tobytes())
        return raw.tolist()
    numbers = unplanes(section, count)
    if not (mode == INTEGERS and kind == "boolean"):
        numbers = unzigzag(numbers)
    if mode in (DELTAS, NANO_DELTAS):
        numbers = sums(numbers)
    if kind == "timestamptz":
        if mode != DELTAS:
            raise ValueError("a send time not kept as differences")
        return [EPOCH + value * ONE_US for value in numbers]
    if kind == "boolean":
        if mode != INTEGERS or any(value not in (0, 1) for value in numbers):
            raise ValueError("a flag that is neither true nor false")
        return [bool(value) for value in numbers]
    if kind == "float8":
        if mode not in SCALES:
            raise ValueError("a float column in an integer mode")
        scale = SCALES[mode]
        return [value / scale for value in numbers]
    if kind == "text" or mode not in (INTEGERS, DELTAS):
        raise ValueError(f"mode {mode} in a {kind} column")
    return numbers


_AT = {name: index for index, name in enumerate(STORED_COLUMNS)}


def _lag(row: Sequence[Any]) -> float | None:
    sent, scheduled = row[_AT["t_send_ms"]], row[_AT["t_sched_ms"]]
    return None if scheduled is None or sent is None else float(sent - scheduled)


def _corrected(row: Sequence[Any]) -> float | None:
    lag, e2e = _lag(row), row[_AT["e2e_ms"]]
    return None if lag is None or e2e is None else float(e2e + lag)


def _tpot(row: Sequence[Any]) -> float | None:
    ttft, e2e, tokens = row[_AT["ttft_ms"]], row[_AT["e2e_ms"]], row[_AT["output_tokens"]]
    if ttft is None or e2e is None or tokens is None or tokens < 2:
        return None
    return float((e2e - ttft) / (tokens - 1))


def _ttfo(row: Sequence[Any]) -> float | None:
    ttft: float | None = row[_AT["ttft_ms"]]
    return ttft


FORMULAS: dict[int, Callable[[Sequence[Any]], float | None]] = {
    _AT["lag_ms"]: _lag, _AT["corrected_e2e_ms"]: _corrected, _AT["tpot_ms"]: _tpot,
    _AT["ttfo_ms"]: _ttfo}
"""Columns that Sample computes from others (probes.measure.sample: lag_ms, corrected_e2e_ms,
tpot_ms, by the same arithmetic), or that repeat another (ttfo_ms is ttft_ms without
reasoning): kept only where a value is not what its formula gives."""


def _derived(index: int, rows: Sequence[SampleTuple]) -> bool:
    """Whether every row's value of the column is, bit for bit, what its formula gives."""
    formula = FORMULAS[index]
    for row in rows:
        value, computed = row[index], formula(row)
        if value is None or computed is None:
            if value is not computed:
                return False
        elif isinstance(value, bool) or not isinstance(value, float) or \
                _bits(value) != _bits(computed):
            return False
    return True


def identical(left: Sequence[SampleTuple], right: Sequence[SampleTuple]) -> bool:
    """Whether two lists of rows hold the same values, floats compared bit for bit (NaN is
    NaN, -0.0 is not 0.0)."""
    if len(left) != len(right):
        return False
    for a, b in zip(left, right, strict=True):
        if len(a) != len(b):
            return False
        for x, y in zip(a, b, strict=True):
            if isinstance(x, float) or isinstance(y, float):
                if not isinstance(x, int | float) or not isinstance(y, int | float) or \
                        isinstance(x, bool) or isinstance(y, bool) or _bits(x) != _bits(y):
                    return False
            elif x != y or type(x) is not type(y):
                return False
    return True


def pack(rows: Sequence[SampleTuple]) -> bytes:
    """One block of `rows` (tuples in STORED_COLUMNS order, all of one run and probe, at most
    MAX_BLOCK_SAMPLES of them)."""
    count = len(rows)
    if not 0 < count <= MAX_BLOCK_SAMPLES:
        raise ValueError(f"a block holds 1 to {MAX_BLOCK_SAMPLES} samples, not {count}")
    if len({(row[RUN_ID], row[PROBE_ID]) for row in rows}) != 1:
        raise ValueError("a block holds samples of one run")
    parts = [_HEADER.pack(FORMAT, count)]
    for index in PACKED:
        name, kind = STORED_COLUMNS[index], STORED_TYPES[index]
        if index in FORMULAS and _derived(index, rows):
            parts.append(column_head(DERIVED, False, None))
            continue
        column = [row[index] for row in rows]
        present = [value for value in column if value is not None]
        if not present:
            parts.append(column_head(ALL_NULL, False, None))
            continue
        mode, section = _encode_related(index, [row for row in rows if row[index] is not None]) \
            or _encode(name, kind, present)
        if len(present) == count:
            parts.append(column_head(mode, False, len(section)))
        else:
            parts.append(column_head(mode, True, len(section)))
            parts.append(bytes(value is not None for value in column))
        parts.append(section)
    return zlib.compress(b"".join(parts), 9)


def _inflate(block: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(block, MAX_INFLATED_BYTES)
    except zlib.error as error:
        raise ValueError(f"a block that does not inflate: {error}") from None
    if inflater.unconsumed_tail or not inflater.eof or inflater.unused_data:
        raise ValueError("a block that inflates past its bound, is cut short or runs on")
    return data


def unpack(block: bytes, run_id: int, probe_id: int) -> list[SampleTuple]:
    """The rows of a block, in the order packed, with the block row's run and probe ids;
    a ValueError for any block it cannot read whole."""
    try:
        return _unpack(block, run_id, probe_id)
    except (OverflowError, struct.error, TypeError, IndexError, ZeroDivisionError,
            UnicodeDecodeError) as error:
        raise ValueError(f"a block that does not read as one: {error}") from None


def _unpack(block: bytes, run_id: int, probe_id: int) -> list[SampleTuple]:
    data = _inflate(block)
    if len(data) < _HEADER.size:
        raise ValueError("a block without its header")
    version, count = _HEADER.unpack_from(data)
    if version != FORMAT:
        raise ValueError(f"a block of format {version}, not {FORMAT}")
    if not 0 < count <= MAX_BLOCK_SAMPLES:
        raise ValueError(f"a block of {count} samples")
    offset = _HEADER.size
    columns: list[list[Any]] = []
    derived: list[int] = []
    related: list[int] = []
    for index in PACKED:
        if offset >= len(data):
            raise ValueError("a block cut short")
        mode, presence = data[offset] & ~PRESENCE, data[offset] >> 7
        offset += 1
        length = 0
        if mode not in (ALL_NULL, DERIVED):
            length, offset = read_length(data, offset)
        if mode > MEAN_OF_SUM or (presence and mode in (ALL_NULL, DERIVED)) \
                or (mode == DERIVED and index not in FORMULAS) \
                or (mode == FROM_SEND and index != _AT["sent_at"]) \
                or (mode == MEAN_OF_SUM and index != _AT["itl_mean_ms"]):
            raise ValueError(f"a column of mode {mode}, presence {presence}")
        if mode in (FROM_SEND, MEAN_OF_SUM):
            related.append(index)
        if mode == DERIVED:
            derived.append(len(columns))
            columns.append([])
            continue
        if mode == ALL_NULL:
            columns.append([None] * count)
            continue
        flags: bytes | None = None
        if presence:
            flags = data[offset:offset + count]
            offset += count
            if len(flags) != count or any(flag > 1 for flag in flags):
                raise ValueError("a presence map that is not one flag per sample")
        section = data[offset:offset + length]
        offset += length
        if len(section) != length:
            raise ValueError("a block cut short")
        present = count if flags is None else sum(flags)
        values = _decode(STORED_TYPES[index], mode, section, present)
        if flags is None:
            columns.append(values)
        else:
            taken: Iterator[Any] = iter(values)
            columns.append([next(taken) if flag else None for flag in flags])
    if offset != len(data):
        raise ValueError("bytes after a block's last column")
    rows: list[SampleTuple] = []
    for i in range(count):
        row: list[Any] = [None if not column else column[i] for column in columns]
        row.insert(RUN_ID, run_id)
        row.insert(PROBE_ID, probe_id)
        for index in related:
            if row[index] is None:
                continue
            if index == _AT["sent_at"]:
                row[index] = EPOCH + (row[index] + _send_us(row)) * ONE_US
            else:
                total, off = row[index]
                row[index] = _mean_of(total, off, row[_AT["itl_count"]])
        for position in derived:  # in column order: lag before corrected E2E
            index = PACKED[position]
            row[index] = FORMULAS[index](row)
        rows.append(tuple(row))
    return rows
