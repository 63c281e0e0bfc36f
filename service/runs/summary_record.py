"""A run's summary as stored: the whole summary in one compressed record (`runs.summary_record`),
and beside it, as JSON (`runs.summary`), only the figures the database itself reads.

The summary is about 8 KB of JSON for a single request (every figure of the run, and its
stage's again); as JSONB, PostgreSQL kept it in 1.7 KiB, the largest part of a run. The record
is that JSON in a compact form (`compact`: a stage kept as what differs from the whole run, a
distribution of one value as the value), compressed by zlib with a preset dictionary of a
summary's keys and structure (summary_dictionary): about 260 B. Reading it back gives the same
dict, so every figure answers unchanged.

SQL reads a few figures in place (the status page, capacity, efficiency and energy over a
window): SQL_KEYS are kept as JSONB as well, and only those with a value. A run stored before
the record (revision 0028) has no record: its JSONB is its whole summary, as it was.

Pure functions over plain data; decompression is bounded (MAX_SUMMARY_BYTES)."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

from sustain.service.runs.summary_dictionary import DICTIONARY_V1
from sustain.service.strict_json import dumps

PLAIN, COMPACT = 1, 2
"""The record's first byte: the summary's JSON as written, or its compact form (`compact`);
either compressed with DICTIONARY_V1."""
MAX_SUMMARY_BYTES = 64 * 1024 * 1024
"""The most a record may inflate to: an agent's upload of a summary is bounded far below it
(SUSTAIN_AGENT_UPLOAD_MAX_BYTES), so a record past it is damage, refused."""
SQL_KEYS = ("capacity", "cache_hit_ratio", "quality", "sessions", "server_metrics",
            "efficiency", "items_per_second", "item_throughput", "rtf_ratio", "rtf",
            "retrieval_hit_ratio", "retrieval_hit_rate", "good_output_tokens")
"""The figures SQL reads from `runs.summary` (db.status, db.probe_health, db.summaries,
db.runs): kept in the JSONB beside the record."""


PERCENTILES = ["p50", "p90", "p95", "p99", "p999"]
ONE_VALUE_KEYS = frozenset({"max", "min", "mean", "count", "low_count", "upper_bounds",
                            *PERCENTILES})
"""A distribution of one value: every statistic that value, its percentiles all `low_count`
(one value cannot tell them), no upper bounds. Kept as {"=": value}."""
ONE = "="
ABSENT = "_absent"


def _one_value(value: Any) -> Any:
    """A distribution of one value as {"=": value}; anything else as it is."""
    if not isinstance(value, dict) or value.keys() != ONE_VALUE_KEYS or value["count"] != 1 \
            or value["low_count"] != PERCENTILES or value["upper_bounds"] != {}:
        return value
    single = value["max"]
    same = all(type(value[key]) is type(single) and repr(value[key]) == repr(single)
               for key in ("min", "mean", *PERCENTILES))
    return {ONE: single} if same else value


def _distribution(value: Any) -> Any:
    if isinstance(value, dict) and value.keys() == {ONE}:
        single = value[ONE]
        return {"max": single, "min": single, **dict.fromkeys(PERCENTILES, single),
                "mean": single, "count": 1, "low_count": list(PERCENTILES),
                "upper_bounds": {}}
    return value


def _same(left: Any, right: Any) -> bool:
    """Equal as JSON writes them: of one type all the way down (1 is not 1.0, -0.0 is not
    0.0), so what a stage keeps by reference to the run reads back exactly."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_same(v, right[k]) for k, v in left.items())
    if isinstance(left, list | tuple):
        return len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, float):
        return repr(left) == repr(right)
    return bool(left == right)


def compact(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The summary with each stage kept as what differs from the whole run (a single-stage
    run repeats nearly every figure) and each one-value distribution as its value."""
    top = {key: _one_value(value) for key, value in summary.items() if key != "stages"}
    out: dict[str, Any] = dict(top)
    if "stages" in summary:
        stages = []
        for stage in summary["stages"]:
            own = {key: _one_value(value) for key, value in stage["summary"].items()}
            diff = {key: value for key, value in own.items()
                    if key not in top or not _same(top[key], value)}
            absent = [key for key in top if key not in own]
            if absent:
                diff[ABSENT] = absent
            stages.append({**{k: v for k, v in stage.items() if k != "summary"},
                           "summary": diff})
        out["stages"] = stages
    return out


def expand(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The summary `compact` was given."""
    top = {key: _distribution(value) for key, value in stored.items() if key != "stages"}
    out: dict[str, Any] = dict(top)
    if "stages" in stored:
        stages = []
        for stage in stored["stages"]:
            diff = stage["summary"]
            absent = set(diff.get(ABSENT, ()))
            own = {key: value for key, value in top.items() if key not in absent}
            own.update({key: _distribution(value) for key, value in diff.items()
                        if key != ABSENT})
            stages.append({**{k: v for k, v in stage.items() if k != "summary"},
                           "summary": own})
        out["stages"] = stages
    return out


def pack(summary: Mapping[str, Any]) -> bytes:
    """The record of a summary (strict: no NaN or infinity, as strict_json writes it)."""
    return pack_json(dumps(summary), summary)


def pack_json(text: str, summary: Mapping[str, Any]) -> bytes:
    """The record of `summary`, already written as `text` by strict_json.dumps: COMPACT and
    its compact form, or (a summary whose compact form would not read back exactly: one
    with keys of its own named like the markers, or stages of another shape) PLAIN and
    `text`, compressed with the dictionary."""
    if _compactable(summary):
        try:
            return _deflate(COMPACT, dumps(compact(summary)))
        except (KeyError, TypeError, AttributeError):
            pass
    return _deflate(PLAIN, text)


def _compactable(summary: Mapping[str, Any]) -> bool:
    """Whether the compact form reads back as `summary`: no dict of it is named like the
    markers (a key "=" alone, or "_absent"), and its stages are what the runner writes."""
    stages = summary.get("stages", [])
    if not isinstance(stages, list) or not all(
            isinstance(stage, dict) and isinstance(stage.get("summary"), dict)
            for stage in stages):
        return False
    return not _has_marker(summary)


def _has_marker(value: Any) -> bool:
    if isinstance(value, dict):
        if value.keys() == {ONE} or ABSENT in value:
            return True
        return any(_has_marker(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_has_marker(item) for item in value)
    return False


def _deflate(form: int, text: str) -> bytes:
    compressor = zlib.compressobj(9, zdict=DICTIONARY_V1)
    return bytes([form]) + compressor.compress(text.encode("utf-8")) + compressor.flush()


def unpack(record: bytes) -> dict[str, Any]:
    """The summary of a record; a ValueError for one that does not read whole."""
    if not record or record[0] not in (PLAIN, COMPACT):
        raise ValueError("a summary record of an unknown format")
    inflater = zlib.decompressobj(zdict=DICTIONARY_V1)
    try:
        text = inflater.decompress(record[1:], MAX_SUMMARY_BYTES)
    except zlib.error as error:
        raise ValueError(f"a summary record that does not inflate: {error}") from None
    if inflater.unconsumed_tail or not inflater.eof or inflater.unused_data:
        raise ValueError("a summary record past its bound, cut short or running on")
    summary = json.loads(text)
    if not isinstance(summary, dict):
        raise ValueError("a summary record that is not an object")
    if record[0] == PLAIN:
        return summary
    try:
        return expand(summary)
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"a summary record whose compact form does not expand: {error}"
                         ) from None


def sql_part(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What of the summary is kept as JSONB: SQL_KEYS that have a value."""
    return {key: summary[key] for key in SQL_KEYS if summary.get(key) is not None}


def whole(stored: Mapping[str, Any] | None, record: bytes | None) -> dict[str, Any] | None:
    """A run's summary from its row: the record's, or (a run stored before the record) its
    JSONB; None for a run without one."""
    if record is not None:
        return unpack(bytes(record))
    return None if stored is None else dict(stored)
