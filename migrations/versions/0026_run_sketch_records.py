"""a run's sketches are one compact record on its row

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06 11:00:00

`runs.sketches` holds every (stage, metric) sketch of the run in one msgpack record
(sustain.probes.measure.sketch_record: a single value where the sketch has one, else its
non-empty bins), where `run_sketches` kept a row per sketch with a dense store of a kilobyte
or more: a single-request run's sketches took 12.8 KiB, their record takes about 140 B.

Existing rows are converted online: in batches of BATCH_RUNS runs, each batch one statement
in its own transaction (the records written and the rows deleted together), so a long
history holds no lock for long, the service's readers and writers go on between batches, and
a conversion that stops resumes where it stopped (what is left in run_sketches is what is
left to do). A session advisory lock keeps a second replica migrating at the same moment
from converting beside it; run_sketches is dropped when it is empty. A sketch this code
cannot pack (an index mapping other than sustain's, a metric it does not know) is left out
of its run's record, and counted in the log.

Downgrading writes the rows back from the records (one transaction) and drops the column.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from sustain.probes.measure import sketch_record
from sustain.probes.measure.sketch import MetricSketch

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH_RUNS = 500
"""Runs converted per statement (and transaction)."""
CONVERSION_LOCK_KEY = 0x5355_5326
"""A session advisory lock: one conversion at a time, whatever the migration lock does."""

log = logging.getLogger("alembic.runtime.migration")

SELECT_BATCH = sa.text("""
    SELECT run_id, stage, metric, sketch FROM run_sketches
    WHERE run_id IN (SELECT DISTINCT run_id FROM run_sketches ORDER BY run_id LIMIT :n)
""")
STORE_BATCH = sa.text("""
    WITH packed AS (
        SELECT * FROM unnest(CAST(:ids AS bigint[]), CAST(:records AS bytea[]))
            AS p(run_id, record)),
    gone AS (DELETE FROM run_sketches k USING packed p WHERE k.run_id = p.run_id)
    UPDATE runs r SET sketches = p.record FROM packed p WHERE r.id = p.run_id
""")

DROP_WHEN_EMPTY = sa.text("""
    DO $$ BEGIN
        LOCK TABLE run_sketches IN ACCESS EXCLUSIVE MODE;
        IF NOT EXISTS (SELECT 1 FROM run_sketches) THEN DROP TABLE run_sketches; END IF;
    END $$
""")
"""One statement: the table is dropped only if still empty once no one else can write it."""


def _pack(rows: Sequence[tuple[int, int, str, bytes]]) -> tuple[dict[int, bytes | None], int]:
    """The record of each run in `rows` (None when none of its sketches packs), and the
    number of sketches left out."""
    by_run: defaultdict[int, dict[tuple[int, str], MetricSketch]] = defaultdict(dict)
    left_out = 0
    for run_id, stage, metric, data in rows:
        try:
            sketch = MetricSketch.from_bytes(bytes(data))
            sketch.pack()
            if metric not in sketch_record.CODES:
                raise ValueError(metric)
        except Exception:  # noqa: BLE001 - whatever a stored sketch holds, the rest converts
            left_out += 1
            by_run.setdefault(run_id, {})
            continue
        by_run[run_id][(stage, metric)] = sketch
    return ({run_id: sketch_record.pack(sketches) if sketches else None
             for run_id, sketches in by_run.items()}, left_out)


def upgrade() -> None:
    op.execute("ALTER TABLE runs ADD COLUMN IF NOT EXISTS sketches bytea")
    with op.get_context().autocommit_block():
        bind = op.get_bind()
        bind.execute(sa.text("SELECT pg_advisory_lock(:key)"), {"key": CONVERSION_LOCK_KEY})
        try:
            converted = left_out = 0
            longest_ms = 0.0
            while bind.execute(sa.text("SELECT to_regclass('run_sketches')")).scalar():
                rows = [(int(r[0]), int(r[1]), str(r[2]), bytes(r[3]))
                        for r in bind.execute(SELECT_BATCH, {"n": BATCH_RUNS})]
                if not rows:
                    bind.execute(DROP_WHEN_EMPTY)
                    continue  # dropped, or rows came in meanwhile: converted next
                records, skipped = _pack(rows)
                started = time.perf_counter()
                bind.execute(STORE_BATCH, {"ids": list(records),
                                           "records": list(records.values())})
                took_ms = (time.perf_counter() - started) * 1000
                log.debug("run sketches: batch of %d runs in %.1f ms", len(records), took_ms)
                longest_ms = max(longest_ms, took_ms)
                converted += len(records)
                left_out += skipped
            if converted:
                log.info("run sketches: %d runs converted to records (longest batch %.0f ms), "
                         "%d sketches left out", converted, longest_ms, left_out)
        finally:
            bind.execute(sa.text("SELECT pg_advisory_unlock(:key)"),
                         {"key": CONVERSION_LOCK_KEY})


def downgrade() -> None:
    op.create_table(
        "run_sketches",
        sa.Column("run_id", sa.BigInteger(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("stage", sa.SmallInteger(), primary_key=True),
        sa.Column("metric", sa.String(16), primary_key=True),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("sum", sa.Double(), nullable=False),
        sa.Column("min", sa.Double(), nullable=False),
        sa.Column("max", sa.Double(), nullable=False),
        sa.Column("sketch", sa.LargeBinary(), nullable=False),
    )
    bind = op.get_bind()
    for run_id, record in bind.execute(
            sa.text("SELECT id, sketches FROM runs WHERE sketches IS NOT NULL")):
        rows = []
        for stage, metric, packed in sketch_record.unpack(bytes(record)):
            sketch = MetricSketch.load(packed)
            rows.append({"run_id": run_id, "stage": stage, "metric": metric,
                         "count": sketch.count, "sum": sketch.sum, "min": sketch.min,
                         "max": sketch.max, "sketch": sketch.to_bytes()})
        if rows:
            bind.execute(sa.text(
                "INSERT INTO run_sketches (run_id, stage, metric, count, sum, min, max, "
                "sketch) VALUES (:run_id, :stage, :metric, :count, :sum, :min, :max, "
                ":sketch)"), rows)
    op.drop_column("runs", "sketches")
