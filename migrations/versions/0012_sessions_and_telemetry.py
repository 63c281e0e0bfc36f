"""multi-turn sessions and quality canaries per sample; server telemetry per endpoint and run

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 03:00:00

A sessions run's samples are the turns of conversations: each keeps its conversation id and
turn index (latency by turn, as the history grows), and the time to its first tool-call
delta. A quality canary's sample keeps whether its reply met the dataset line's `expect`.
An endpoint may name its server's Prometheus exposition (`metrics_url`), scraped during its
runs; each run keeps the series it read (run_server_series: one row per series). A run
counts its checked and passed canaries, which a `quality` SLI sums.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("samples", sa.Column("conversation", sa.String(256), nullable=True))
    op.add_column("samples", sa.Column("turn", sa.Integer(), nullable=True))
    op.add_column("samples", sa.Column("tool_call_ms", sa.Double(), nullable=True))
    op.add_column("samples", sa.Column("quality", sa.Boolean(), nullable=True))
    op.add_column("runs", sa.Column("quality_checked", sa.Integer(), nullable=True))
    op.add_column("runs", sa.Column("quality_passed", sa.Integer(), nullable=True))
    op.drop_constraint("kind_known", "slos", type_="check")
    op.create_check_constraint(
        "kind_known", "slos", "kind IN ('availability', 'latency', 'goodput', 'quality')")
    op.add_column("endpoints", sa.Column("metrics_url", sa.Text(), nullable=True))
    op.add_column("endpoints", sa.Column("metrics_interval_s", sa.Double(), nullable=False,
                                         server_default=sa.text("1.0")))
    op.add_column("endpoints", sa.Column("metrics_names", JSONB(), nullable=False,
                                         server_default=sa.text("'[]'::jsonb")))
    op.create_table(
        "run_server_series",
        sa.Column("run_id", sa.BigInteger(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("at", ARRAY(sa.TIMESTAMP(timezone=True)), nullable=False),
        sa.Column("value", ARRAY(sa.Double()), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("run_server_series")
    op.execute("DELETE FROM slos WHERE kind = 'quality'")
    op.drop_constraint("kind_known", "slos", type_="check")
    op.create_check_constraint("kind_known", "slos",
                               "kind IN ('availability', 'latency', 'goodput')")
    for column in ("quality_passed", "quality_checked"):
        op.drop_column("runs", column)
    for column in ("metrics_names", "metrics_interval_s", "metrics_url"):
        op.drop_column("endpoints", column)
    for column in ("quality", "tool_call_ms", "turn", "conversation"):
        op.drop_column("samples", column)
