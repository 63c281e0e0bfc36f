"""a run's summary is a compressed record, its JSONB only what SQL reads

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-07 07:10:00

`runs.summary_record` holds the run's whole summary, its JSON compressed with a preset
dictionary of a summary's keys (sustain.service.runs.summary_record): about 440 B for a
single-request run. `runs.summary` keeps, for runs written from now on, only the figures SQL
reads in place (SQL_KEYS: capacity, efficiency, server metrics and the status page's few).

A nullable column without a default rewrites nothing. Runs stored before keep their whole
summary in `runs.summary` and no record, and read as before; they age out with
SUSTAIN_RUN_RETENTION_DAYS. Downgrading writes each record's summary back into `runs.summary`
(in batches of BATCH_RUNS runs), then drops the column.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from sustain.service.runs import summary_record

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH_RUNS = 1000


def upgrade() -> None:
    op.add_column("runs", sa.Column("summary_record", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    connection = op.get_bind()
    while True:
        rows = connection.execute(sa.text(
            "SELECT id, summary_record FROM runs WHERE summary_record IS NOT NULL "
            "ORDER BY id LIMIT :n"), {"n": BATCH_RUNS}).all()
        if not rows:
            break
        connection.execute(
            sa.text("UPDATE runs SET summary = CAST(:summary AS jsonb), summary_record = NULL "
                    "WHERE id = :id"),
            [{"id": run_id, "summary": json.dumps(summary_record.unpack(bytes(record)))}
             for run_id, record in rows])
    op.drop_column("runs", "summary_record")
