"""Sample rows as a Parquet file, written chunk by chunk (one row group per chunk) so an export
of millions of samples needs the memory of one chunk. pyarrow is the optional `parquet`
extra: imported only here, when asked for."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from sustain.service.runs.rows import SAMPLE_COLUMNS, SAMPLE_TYPES


class ParquetUnavailableError(RuntimeError):
    """pyarrow is not installed."""


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ParquetUnavailableError(
            "Parquet export needs pyarrow: pip install 'sustain[parquet]'") from None
    return pa, pq


def _arrow_type(pa: Any, postgres_type: str) -> Any:
    return {
        "bigint": pa.int64(), "integer": pa.int32(), "smallint": pa.int16(),
        "float8": pa.float64(), "boolean": pa.bool_(), "text": pa.string(),
        "timestamptz": pa.timestamp("us", tz="UTC"),
    }[postgres_type]


class ParquetSink:
    """`with ParquetSink(path) as sink: sink.write(rows)`; the file is complete on exit."""

    def __init__(self, path: Path) -> None:
        self._pa, self._pq = _pyarrow()
        pa = self._pa
        self.schema = pa.schema([pa.field(name, _arrow_type(pa, kind))
                                 for name, kind in zip(SAMPLE_COLUMNS, SAMPLE_TYPES,
                                                       strict=True)])
        self._writer = self._pq.ParquetWriter(str(path), self.schema, compression="zstd")

    def write(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            self._writer.write_table(self._pa.Table.from_pylist(list(rows), schema=self.schema))

    def __enter__(self) -> ParquetSink:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._writer.close()
