"""a finished run's raw samples are packed into blocks

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07 07:00:00

`sample_blocks` holds a run's samples packed, up to 4,096 a block, each column stored after
the other and compressed (sustain.service.runs.sample_block): about 43 B a streamed chat
sample where its `samples` row takes over 300. It is range-partitioned by day as `samples`
is, with a partition for every day `samples` has one.

Existing rows are packed by the service, not here: the storage job packs the rows of runs
that finished a while ago (SUSTAIN_SAMPLE_PACK_AFTER_S) in bounded transactions, and goes on
where it stopped after a restart, so an upgrade does not wait on a long history.

Downgrading unpacks every block back into `samples` rows (one transaction), then drops the
table.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from sustain.service.runs import sample_block
from sustain.service.runs.rows import STORED_COLUMNS

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CREATE_PARTITIONS = """
DO $$
DECLARE part record;
BEGIN
    FOR part IN
        SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        JOIN pg_class p ON p.oid = i.inhparent
        WHERE p.relname = 'samples' AND p.relnamespace = 'public'::regnamespace
          AND c.relname ~ '^samples_p[0-9]{8}$'
    LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF sample_blocks %s',
                       'sample_blocks_p' || substr(part.name, 10), part.bound);
    END LOOP;
END $$
"""
"""A partition of sample_blocks for each day samples has one, with the same bounds."""


def upgrade() -> None:
    op.execute("""
        CREATE TABLE sample_blocks (
            run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            first_pos INTEGER NOT NULL,
            sent_from TIMESTAMP WITH TIME ZONE NOT NULL,
            last_pos INTEGER NOT NULL,
            sent_to TIMESTAMP WITH TIME ZONE NOT NULL,
            probe_id BIGINT NOT NULL,
            samples INTEGER NOT NULL,
            data BYTEA NOT NULL,
            PRIMARY KEY (run_id, first_pos, sent_from)
        ) PARTITION BY RANGE (sent_from)
    """)
    # already compressed: TOAST would only try again
    op.execute("ALTER TABLE sample_blocks ALTER COLUMN data SET STORAGE EXTERNAL")
    op.create_index("ix_sample_blocks_probe_id_sent_from", "sample_blocks",
                    ["probe_id", "sent_from"])
    op.execute(CREATE_PARTITIONS)


def downgrade() -> None:
    connection = op.get_bind()
    columns = ", ".join(STORED_COLUMNS)
    values = ", ".join(f":{name}" for name in STORED_COLUMNS)
    insert = sa.text(f"INSERT INTO samples ({columns}) VALUES ({values}) "
                     "ON CONFLICT DO NOTHING")
    blocks = connection.execute(sa.text(
        "SELECT run_id, probe_id, data FROM sample_blocks ORDER BY run_id, first_pos"))
    for run_id, probe_id, data in blocks.fetchall():
        rows = sample_block.unpack(bytes(data), run_id, probe_id)
        connection.execute(insert, [dict(zip(STORED_COLUMNS, row, strict=True))
                                    for row in rows])
    op.drop_table("sample_blocks")  # its partitions go with it
