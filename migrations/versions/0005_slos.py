"""SLOs and the good/total event counts of each run for each SLO that covers it

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 08:30:00

An SLO selects probes by name and/or labels and defines an SLI (availability, latency under a
threshold, or goodput), an objective, a compliance window and burn-rate tiers.
`slo_run_counts` holds, per SLO and run, the good and total events: exact from raw samples
while they are retained, approximate (from the run's sketches) for older runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "slos",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("managed_by", sa.Text(), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("probe_names", postgresql.ARRAY(sa.Text()), server_default="{}",
                  nullable=False),
        sa.Column("probe_labels", postgresql.JSONB(astext_type=sa.Text()),
                  server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("metric", sa.String(length=16), nullable=True),
        sa.Column("threshold_ms", sa.Double(), nullable=True),
        sa.Column("objective", sa.Double(), nullable=False),
        sa.Column("window_s", sa.Integer(), nullable=False),
        sa.Column("tiers", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.Column("updated_at", sa.TIMESTAMP(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.CheckConstraint("kind IN ('availability', 'latency', 'goodput')", name="kind_known"),
        sa.CheckConstraint("objective > 0 AND objective < 1", name="objective_range"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "slo_run_counts",
        sa.Column("slo_id", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("scheduled_for", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("good", sa.BigInteger(), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=False),
        sa.Column("approximate", sa.Boolean(), server_default=sa.text("false"),
                  nullable=False),
        sa.ForeignKeyConstraint(["slo_id"], ["slos.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("slo_id", "run_id"),
    )
    op.create_index("ix_slo_run_counts_slo_id_scheduled_for", "slo_run_counts",
                    ["slo_id", "scheduled_for"])
    op.create_index("ix_slo_run_counts_run_id", "slo_run_counts", ["run_id"])


def downgrade() -> None:
    op.drop_table("slo_run_counts")
    op.drop_table("slos")
