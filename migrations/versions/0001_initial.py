"""initial schema: endpoints, probes, runs, samples

Revision ID: 0001
Revises: (none)
Create Date: 2026-12-02 16:40:35.771041
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "endpoints",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("base_url", sa.Text(), nullable=False),
        sa.Column("api_kind", sa.String(length=32), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column(
            "headers",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("auth_secret_ref", sa.Text(), nullable=True),
        sa.Column("timeout_connect_s", sa.Double(), nullable=False),
        sa.Column("timeout_first_token_s", sa.Double(), nullable=False),
        sa.Column("timeout_total_s", sa.Double(), nullable=False),
        sa.Column("tls_verify", sa.Boolean(), nullable=False),
        sa.Column(
            "labels",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "created_at",
            postgresql.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            postgresql.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "probes",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("endpoint_id", sa.BigInteger(), nullable=False),
        sa.Column("workload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("profile", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("interval_seconds", sa.Integer(), nullable=False),
        sa.Column("jitter_seconds", sa.Double(), server_default=sa.text("0"), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("slo_ttft_ms", sa.Double(), nullable=True),
        sa.Column("slo_tpot_ms", sa.Double(), nullable=True),
        sa.Column("slo_e2e_ms", sa.Double(), nullable=True),
        sa.Column(
            "labels",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "created_at",
            postgresql.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            postgresql.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("interval_seconds > 0", name="interval_positive"),
        sa.ForeignKeyConstraint(["endpoint_id"], ["endpoints.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_index(op.f("ix_probes_endpoint_id"), "probes", ["endpoint_id"], unique=False)
    op.create_table(
        "runs",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("probe_id", sa.BigInteger(), nullable=False),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("scheduled_for", postgresql.TIMESTAMP(timezone=True), nullable=False),
        sa.Column(
            "status", sa.String(length=16), server_default=sa.text("'pending'"), nullable=False
        ),
        sa.Column("claimed_by", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            postgresql.TIMESTAMP(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("started_at", postgresql.TIMESTAMP(timezone=True), nullable=True),
        sa.Column("finished_at", postgresql.TIMESTAMP(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("summary", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'succeeded', 'failed', 'abandoned', 'invalid')",
            name="status_known",
        ),
        sa.CheckConstraint("trigger IN ('schedule', 'manual')", name="trigger_known"),
        sa.ForeignKeyConstraint(["probe_id"], ["probes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_runs_probe_id_id", "runs", ["probe_id", sa.literal_column("id DESC")], unique=False
    )
    op.create_index(
        "ix_runs_status_id", "runs", ["status", sa.literal_column("id DESC")], unique=False
    )
    op.create_index(
        "uq_runs_scheduled_tick",
        "runs",
        ["probe_id", "scheduled_for"],
        unique=True,
        postgresql_where=sa.text("trigger = 'schedule'"),
    )
    op.create_table(
        "samples",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("probe_id", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("stage", sa.SmallInteger(), nullable=False),
        sa.Column("sent_at", postgresql.TIMESTAMP(timezone=True), nullable=False),
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
    op.create_index("ix_samples_probe_id_sent_at", "samples", ["probe_id", "sent_at"], unique=False)
    op.create_index("ix_samples_run_id_seq", "samples", ["run_id", "seq"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_samples_run_id_seq", table_name="samples")
    op.drop_index("ix_samples_probe_id_sent_at", table_name="samples")
    op.drop_table("samples")
    op.drop_index(
        "uq_runs_scheduled_tick",
        table_name="runs",
        postgresql_where=sa.text("trigger = 'schedule'"),
    )
    op.drop_index("ix_runs_status_id", table_name="runs")
    op.drop_index("ix_runs_probe_id_id", table_name="runs")
    op.drop_table("runs")
    op.drop_index(op.f("ix_probes_endpoint_id"), table_name="probes")
    op.drop_table("probes")
    op.drop_table("endpoints")
