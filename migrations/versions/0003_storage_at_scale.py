"""storage at scale: samples partitioned by day, run counts, run sketches, rollups

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 19:20:00

`samples` becomes a range-partitioned table on sent_at (one partition per UTC day, created
ahead by the service, dropped whole by retention). Existing samples are moved into it. Its key
is (run_id, pos, sent_at): pos is the order in which the service buffered a run's samples, so
writes are idempotent and per-run cursors are stable. Runs gain the counts that windowed
availability and throughput are computed from; `run_sketches` holds one mergeable sketch per
run, stage and metric, and `rollups` / `rollup_sketches` the hourly and daily merges of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SAMPLE_COLUMNS = """
    run_id bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    pos integer NOT NULL,
    probe_id bigint NOT NULL,
    seq integer NOT NULL,
    stage smallint NOT NULL,
    sent_at timestamptz NOT NULL,
    t_sched_ms double precision,
    t_send_ms double precision NOT NULL,
    lag_ms double precision,
    ttft_ms double precision,
    itl_count integer NOT NULL,
    itl_mean_ms double precision,
    itl_max_ms double precision,
    tpot_ms double precision,
    e2e_ms double precision NOT NULL,
    corrected_e2e_ms double precision,
    input_tokens integer,
    output_tokens integer NOT NULL,
    tokens_server_counted boolean NOT NULL,
    outcome varchar(16) NOT NULL,
    error_class varchar(32),
    http_status smallint
"""

DATA_COLUMNS = (
    "run_id, probe_id, seq, stage, sent_at, t_sched_ms, t_send_ms, lag_ms, ttft_ms, itl_count, "
    "itl_mean_ms, itl_max_ms, tpot_ms, e2e_ms, corrected_e2e_ms, input_tokens, output_tokens, "
    "tokens_server_counted, outcome, error_class, http_status"
)

CREATE_PARTITIONS = """
DO $$
DECLARE
    day date;
BEGIN
    FOR day IN
        SELECT DISTINCT (sent_at AT TIME ZONE 'UTC')::date FROM samples_unpartitioned
        UNION SELECT (now() AT TIME ZONE 'UTC')::date
    LOOP
        EXECUTE format(
            'CREATE TABLE IF NOT EXISTS %I PARTITION OF samples FOR VALUES FROM (%L) TO (%L)',
            'samples_p' || to_char(day, 'YYYYMMDD'),
            day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
    END LOOP;
END $$;
"""

def _sketch_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("metric", sa.String(16), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("sum", sa.Double(), nullable=False),
        sa.Column("min", sa.Double(), nullable=False),
        sa.Column("max", sa.Double(), nullable=False),
        sa.Column("sketch", sa.LargeBinary(), nullable=False),
    ]


def upgrade() -> None:
    for name, kind in (("attempts", sa.Integer()), ("successes", sa.Integer()),
                       ("good", sa.Integer()), ("output_tokens", sa.BigInteger()),
                       ("measured_s", sa.Double())):
        op.add_column("runs", sa.Column(name, kind, nullable=True))
    op.add_column("runs", sa.Column("samples_dropped", sa.Integer(), nullable=False,
                                    server_default=sa.text("0")))
    op.execute("""
        UPDATE runs SET
            attempts = (summary->>'attempts')::int,
            successes = (summary->>'successes')::int,
            output_tokens = (summary->>'output_tokens')::bigint,
            measured_s = (summary->>'duration_s')::double precision
        WHERE summary IS NOT NULL
    """)
    op.create_index("ix_runs_probe_id_scheduled_for", "runs", ["probe_id", "scheduled_for"])
    op.create_index("ix_runs_scheduled_for", "runs", ["scheduled_for"])

    op.drop_index("ix_samples_run_id_seq", table_name="samples")
    op.drop_index("ix_samples_probe_id_sent_at", table_name="samples")
    op.rename_table("samples", "samples_unpartitioned")
    op.execute("ALTER TABLE samples_unpartitioned "
               "RENAME CONSTRAINT samples_pkey TO samples_unpartitioned_pkey")
    op.execute(f"""
        CREATE TABLE samples ({SAMPLE_COLUMNS},
            CONSTRAINT samples_pkey PRIMARY KEY (run_id, pos, sent_at)
        ) PARTITION BY RANGE (sent_at)
    """)
    op.create_index("ix_samples_probe_id_sent_at", "samples", ["probe_id", "sent_at"])
    op.execute(CREATE_PARTITIONS)
    op.execute(f"""
        INSERT INTO samples (pos, {DATA_COLUMNS})
        SELECT (row_number() OVER (PARTITION BY run_id ORDER BY id) - 1)::int, {DATA_COLUMNS}
        FROM samples_unpartitioned
    """)
    op.drop_table("samples_unpartitioned")

    op.create_table(
        "run_sketches",
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("stage", sa.SmallInteger(), nullable=False),
        *_sketch_columns(),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "stage", "metric"),
    )
    op.create_table(
        "rollups",
        sa.Column("probe_id", sa.BigInteger(), nullable=False),
        sa.Column("width_s", sa.Integer(), nullable=False),
        sa.Column("start", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.BigInteger(), nullable=False),
        sa.Column("successes", sa.BigInteger(), nullable=False),
        sa.Column("good", sa.BigInteger(), nullable=False),
        sa.Column("good_measured_s", sa.Double(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("measured_s", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["probe_id"], ["probes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("probe_id", "width_s", "start"),
    )
    op.create_table(
        "rollup_sketches",
        sa.Column("probe_id", sa.BigInteger(), nullable=False),
        sa.Column("width_s", sa.Integer(), nullable=False),
        sa.Column("start", sa.TIMESTAMP(timezone=True), nullable=False),
        *_sketch_columns(),
        sa.ForeignKeyConstraint(["probe_id"], ["probes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("probe_id", "metric", "width_s", "start"),
    )


def downgrade() -> None:
    op.drop_table("rollup_sketches")
    op.drop_table("rollups")
    op.drop_table("run_sketches")
    op.rename_table("samples", "samples_partitioned")
    op.execute("ALTER TABLE samples_partitioned "
               "RENAME CONSTRAINT samples_pkey TO samples_partitioned_pkey")
    op.execute("ALTER INDEX ix_samples_probe_id_sent_at RENAME TO ix_samples_partitioned_pst")
    op.create_table(
        "samples",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("probe_id", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("stage", sa.SmallInteger(), nullable=False),
        sa.Column("sent_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("t_sched_ms", sa.Double(), nullable=True),
        sa.Column("t_send_ms", sa.Double(), nullable=False),
        sa.Column("lag_ms", sa.Double(), nullable=True),
        sa.Column("ttft_ms", sa.Double(), nullable=True),
        sa.Column("itl_count", sa.Integer(), nullable=False),
        sa.Column("itl_mean_ms", sa.Double(), nullable=True),
        sa.Column("itl_max_ms", sa.Double(), nullable=True),
        sa.Column("tpot_ms", sa.Double(), nullable=True),
        sa.Column("e2e_ms", sa.Double(), nullable=False),
        sa.Column("corrected_e2e_ms", sa.Double(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("tokens_server_counted", sa.Boolean(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("error_class", sa.String(length=32), nullable=True),
        sa.Column("http_status", sa.SmallInteger(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.execute(f"""
        INSERT INTO samples ({DATA_COLUMNS})
        SELECT {DATA_COLUMNS} FROM samples_partitioned ORDER BY run_id, pos
    """)
    op.drop_table("samples_partitioned")  # its partitions go with it
    op.create_index("ix_samples_probe_id_sent_at", "samples", ["probe_id", "sent_at"])
    op.create_index("ix_samples_run_id_seq", "samples", ["run_id", "seq"])
    op.drop_index("ix_runs_scheduled_for", table_name="runs")
    op.drop_index("ix_runs_probe_id_scheduled_for", table_name="runs")
    for name in ("samples_dropped", "measured_s", "output_tokens", "good", "successes",
                 "attempts"):
        op.drop_column("runs", name)
