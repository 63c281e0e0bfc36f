"""`sustain export`: a probe's raw samples in a time range as CSV and Parquet, equal to what
Postgres holds, and clear errors naming the option for bad input."""

from __future__ import annotations

import csv
import io
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from sustain.service.cli import app
from sustain.service.db.engine import create_engine
from tests.conftest import run_sync
from tests.integration.service.storage import create_probe_rows, fetch, seed_run, synthetic_samples

START = datetime(2026, 11, 28, 23, 59, 50, tzinfo=UTC)
"""Runs cross midnight, so the export reads two daily partitions."""


async def _seed(url: str) -> None:
    engine = create_engine(url)
    try:
        probe_id = await create_probe_rows(engine, "exported")
        other = await create_probe_rows(engine, "other")
        rng = random.Random(3)
        for i in range(3):
            at = START + timedelta(minutes=i)
            await seed_run(engine, probe_id, at, synthetic_samples(300, at, rng, fail_every=40))
            await seed_run(engine, other, at, synthetic_samples(50, at, rng))
    finally:
        await engine.dispose()


async def _stored(url: str, start: datetime, end: datetime) -> list[tuple[object, ...]]:
    engine = create_engine(url)
    try:
        return [tuple(r) for r in await fetch(
            engine,
            "SELECT s.run_id, s.pos, s.seq, s.sent_at, s.ttft_ms, s.outcome, s.error_class "
            "FROM samples s JOIN probes p ON p.id = s.probe_id WHERE p.name = 'exported' "
            "AND s.sent_at >= :a AND s.sent_at < :b ORDER BY s.sent_at, s.run_id, s.pos",
            a=start, b=end)]
    finally:
        await engine.dispose()


@pytest.fixture
def seeded(database_url: str) -> str:
    run_sync(_seed(database_url))
    return database_url


def export(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["export", "--database-url", url, *args])
    return result.exit_code, result.stdout, result.stderr


def test_csv_export_holds_exactly_the_samples_in_the_range(seeded: str, tmp_path: Path) -> None:
    start, end = START + timedelta(seconds=20), START + timedelta(minutes=2, seconds=5)
    out = tmp_path / "samples.csv"
    code, _, err = export(seeded, "--probe", "exported", "--from", start.isoformat(),
                          "--to", end.isoformat(), "--output", str(out))
    assert code == 0, err
    rows = list(csv.DictReader(out.open(newline="")))
    expected = run_sync(_stored(seeded, start, end))
    assert 0 < len(rows) < 900
    assert f"exported {len(rows)} samples" in err
    got = [(int(r["run_id"]), int(r["pos"]), int(r["seq"]),
            datetime.fromisoformat(r["sent_at"]), float(r["ttft_ms"]) if r["ttft_ms"] else None,
            r["outcome"], r["error_class"] or None) for r in rows]
    assert got == expected


def test_csv_goes_to_stdout_and_a_time_without_offset_is_utc(seeded: str) -> None:
    code, out, _ = export(seeded, "--probe", "exported", "--from", "2026-11-28T00:00:00",
                          "--to", "2026-11-30T00:00:00")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 900
    assert {r["probe_id"] for r in rows} == {rows[0]["probe_id"]}


def test_parquet_export_equals_the_csv_export(seeded: str, tmp_path: Path) -> None:
    args = ["--probe", "exported", "--from", "2026-11-28T00:00:00Z", "--to",
            "2026-11-30T00:00:00Z"]
    assert export(seeded, *args, "-o", str(tmp_path / "a.csv"))[0] == 0
    code, _, err = export(seeded, *args, "--format", "parquet", "-o", str(tmp_path / "a.pq"))
    assert code == 0, err
    table = pq.read_table(tmp_path / "a.pq")
    from_csv = list(csv.DictReader((tmp_path / "a.csv").open(newline="")))
    assert table.num_rows == len(from_csv) == 900
    assert str(table.schema.field("sent_at").type) == "timestamp[us, tz=UTC]"
    assert str(table.schema.field("ttft_ms").type) == "double"
    for row, text_row in zip(table.to_pylist(), from_csv, strict=True):
        assert row["sent_at"].isoformat() == text_row["sent_at"]
        assert row["pos"] == int(text_row["pos"])
        assert (row["ttft_ms"] is None) == (text_row["ttft_ms"] == "")
        if row["ttft_ms"] is not None:
            assert row["ttft_ms"] == float(text_row["ttft_ms"])
        assert row["tokens_server_counted"] is (text_row["tokens_server_counted"] == "true")


@pytest.mark.parametrize(("args", "named"), [
    (["--probe", "nope", "--from", "2026-11-28T00:00:00Z"], "--probe"),
    (["--probe", "exported", "--from", "yesterday"], "--from"),
    (["--probe", "exported", "--from", "2026-11-29T00:00:00Z", "--to", "2026-11-28T00:00:00Z"],
     "--from"),
    (["--probe", "exported", "--from", "2026-11-28T00:00:00Z", "--format", "xlsx"], "--format"),
    (["--probe", "exported", "--from", "2026-11-28T00:00:00Z", "--format", "parquet"],
     "--output"),
])
def test_bad_options_exit_2_naming_the_option(seeded: str, args: list[str], named: str) -> None:
    code, out, err = export(seeded, *args)
    assert code == 2
    assert named in err
    assert out == ""
