"""Request traces to replay: when each request arrived and how long its prompt and answer
were, from the public traces serving systems are benchmarked on.

- Mooncake (JSONL): `timestamp` (ms), `input_length`, `output_length`, `hash_ids` (one id per
  512-token block of the prompt; requests that share ids share those prefix blocks).
- Azure LLM inference (CSV): `TIMESTAMP` (a date and time), `ContextTokens`, `GeneratedTokens`.

Arrivals are offsets in seconds from the trace's first request. Read once before a run, only
from where the DatasetPolicy allows and up to its size cap; errors name the file and line.
"""

from __future__ import annotations

import csv
import json
import math
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sustain.probes.workload.dataset import DatasetError, DatasetPolicy

TraceFormat = Literal["mooncake", "azure"]
MOONCAKE_BLOCK_TOKENS = 512
"""Prompt tokens per Mooncake hash id."""
MAX_TRACE_REQUESTS = 1_000_000
MAX_LENGTH = 1_000_000


@dataclass(frozen=True, slots=True)
class TraceRequest:
    offset_s: float
    """When the request arrived, from the trace's first request."""
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    """Mooncake: the prompt's blocks; equal ids are equal prefix blocks."""


@dataclass(frozen=True, slots=True)
class Replay:
    """A loaded trace and the salt of this run: one per run (not per request), put in front
    of every prompt unless the workload allows the cache, so prefix blocks are shared within
    the run exactly as the trace shares them, and never with an earlier run."""

    requests: tuple[TraceRequest, ...]
    salt: str


def _length(value: Any, where: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DatasetError(f"{where}: {name!r} must be a number")
    if not 0 <= value <= MAX_LENGTH:
        raise DatasetError(f"{where}: {name!r} must be from 0 to {MAX_LENGTH}")
    return max(1, int(value))


def _mooncake(lines: list[str], file: str) -> list[tuple[float, TraceRequest]]:
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise DatasetError(f"{where}: invalid JSON ({exc.args[0]})") from None
        if not isinstance(record, dict):
            raise DatasetError(f"{where}: expected a JSON object")
        stamp = record.get("timestamp")
        if isinstance(stamp, bool) or not isinstance(stamp, int | float) \
                or not math.isfinite(stamp) or stamp < 0:
            raise DatasetError(f"{where}: 'timestamp' must be milliseconds >= 0")
        hashes = record.get("hash_ids", [])
        if not isinstance(hashes, list) or not all(
                isinstance(h, int) and not isinstance(h, bool) for h in hashes):
            raise DatasetError(f"{where}: 'hash_ids' must be a list of integers")
        rows.append((float(stamp) / 1000.0, TraceRequest(
            0.0, _length(record.get("input_length"), where, "input_length"),
            _length(record.get("output_length"), where, "output_length"), tuple(hashes))))
    return rows


def _azure_time(text: str, where: str) -> float:
    """Seconds since the epoch of `2023-11-16 18:15:46.6805900` (7 fractional digits, as the
    Azure traces have them; Python reads 6)."""
    whole, _, fraction = text.strip().partition(".")
    try:
        stamp = datetime.fromisoformat(whole)
    except ValueError:
        raise DatasetError(f"{where}: TIMESTAMP {text!r} is not a date and time") from None
    if fraction and not fraction.isdigit():
        raise DatasetError(f"{where}: TIMESTAMP {text!r} is not a date and time")
    return stamp.timestamp() + (float(f"0.{fraction}") if fraction else 0.0)


def _azure(lines: list[str], file: str) -> list[tuple[float, TraceRequest]]:
    reader = csv.DictReader(lines)
    needed = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}
    if not needed <= set(reader.fieldnames or ()):
        raise DatasetError(f"{file}:1: the header needs {', '.join(sorted(needed))}")
    rows = []
    for record in reader:
        where = f"{file}:{reader.line_num}"
        try:
            context, generated = float(record["ContextTokens"]), float(record["GeneratedTokens"])
        except (TypeError, ValueError):
            raise DatasetError(f"{where}: ContextTokens and GeneratedTokens must be numbers"
                               ) from None
        rows.append((_azure_time(record["TIMESTAMP"] or "", where), TraceRequest(
            0.0, _length(context, where, "ContextTokens"),
            _length(generated, where, "GeneratedTokens"))))
    return rows


def load_trace(path: str, fmt: TraceFormat, policy: DatasetPolicy) -> list[TraceRequest]:
    """The trace's requests in arrival order, offsets from its first request."""
    lines = policy.lines(path)
    rows = _mooncake(lines, path) if fmt == "mooncake" else _azure(lines, path)
    if not rows:
        raise DatasetError(f"{path}: no requests")
    if len(rows) > MAX_TRACE_REQUESTS:
        raise DatasetError(f"{path}: more than {MAX_TRACE_REQUESTS} requests")
    rows.sort(key=lambda row: row[0])
    first = rows[0][0]
    return [TraceRequest(at - first, r.input_tokens, r.output_tokens, r.hash_ids)
            for at, r in rows]


def load_replay(path: str, fmt: TraceFormat, policy: DatasetPolicy, cache: str) -> Replay:
    """The trace and a fresh run salt (none when the workload allows the cache)."""
    salt = "" if cache == "allow" else f"s{secrets.token_hex(8)}"
    return Replay(tuple(load_trace(path, fmt, policy)), salt)
