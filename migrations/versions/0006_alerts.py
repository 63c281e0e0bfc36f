"""alerts: the state of every alert, its transitions, and the notifications they owe

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 09:10:00

`alerts` holds one row per alert fingerprint (a hash of its labels) with its state machine
(inactive, pending, firing, resolved). A replica moves an alert only while holding its row
lock, and writes the transition to `alert_events` and the notification it owes to
`notifications` (an outbox) in the same transaction, so each transition is recorded and
notified once however many replicas evaluate.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSONB = postgresql.JSONB(astext_type=sa.Text())
TS = sa.TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("alertname", sa.String(length=100), nullable=False),
        sa.Column("labels", JSONB, nullable=False),
        sa.Column("annotations", JSONB, server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("active_since", TS, nullable=True),
        sa.Column("fired_at", TS, nullable=True),
        sa.Column("resolved_at", TS, nullable=True),
        sa.Column("last_notified_at", TS, nullable=True),
        sa.Column("evaluated_at", TS, nullable=True),
        sa.CheckConstraint("state IN ('inactive', 'pending', 'firing', 'resolved')",
                           name="alert_state_known"),
        sa.PrimaryKeyConstraint("fingerprint"),
    )
    op.create_index("ix_alerts_state", "alerts", ["state"])
    op.create_table(
        "alert_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("transition", sa.String(length=16), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("replica", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["fingerprint"], ["alerts.fingerprint"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_alert_events_fingerprint_at", "alert_events", ["fingerprint", "at"])
    op.create_table(
        "notifications",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("transition", sa.String(length=16), nullable=False),
        sa.Column("payload", JSONB, nullable=False),
        sa.Column("created_at", TS, server_default=sa.func.now(), nullable=False),
        sa.Column("delivered_at", TS, nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["fingerprint"], ["alerts.fingerprint"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_notifications_pending", "notifications", ["id"],
                    postgresql_where=sa.text("delivered_at IS NULL"))


def downgrade() -> None:
    op.drop_table("notifications")
    op.drop_table("alert_events")
    op.drop_table("alerts")
