"""notifiers, silences, deliveries and drift findings

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 10:30:00

The notifications outbox is now dispatched rather than delivered: a replica claims each
undispatched notification (FOR UPDATE SKIP LOCKED) and fans it out into one `deliveries` row
per matching notifier, in the same transaction. Deliveries carry their own attempts, backoff,
lease and outcome (the delivery log), so a failing notifier retries on its own without holding
back the others. `silences` suppress deliveries whose alert labels they match while active.
`drift_findings` keeps the latest drift verdict of each probe, metric and statistic.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSONB = postgresql.JSONB(astext_type=sa.Text())
TS = sa.TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.alter_column("notifications", "delivered_at", new_column_name="dispatched_at")
    op.drop_column("notifications", "attempts")
    op.drop_column("notifications", "last_error")
    op.create_table(
        "notifiers",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("managed_by", sa.Text(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("url_secret_ref", sa.Text(), nullable=True),
        sa.Column("signing_secret_ref", sa.Text(), nullable=True),
        sa.Column("match", JSONB, server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("send_resolved", sa.Boolean(), server_default=sa.text("true"),
                  nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("timeout_s", sa.Double(), nullable=False),
        sa.Column("resent_at", TS, nullable=True),
        sa.Column("created_at", TS, server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", TS, server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint("kind IN ('webhook', 'slack', 'alertmanager')",
                           name="notifier_kind_known"),
        sa.CheckConstraint("(url IS NULL) <> (url_secret_ref IS NULL)",
                           name="notifier_one_url"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "silences",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("matchers", JSONB, nullable=False),
        sa.Column("starts_at", TS, nullable=False),
        sa.Column("ends_at", TS, nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column("created_at", TS, server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint("ends_at > starts_at", name="silence_ends_after_start"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_silences_ends_at", "silences", ["ends_at"])
    op.create_table(
        "deliveries",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("notification_id", sa.BigInteger(), nullable=False),
        sa.Column("notifier_id", sa.BigInteger(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("transition", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), server_default=sa.text("'pending'"),
                  nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("next_attempt_at", TS, server_default=sa.func.now(), nullable=False),
        sa.Column("leased_until", TS, nullable=True),
        sa.Column("leased_by", sa.Text(), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", TS, server_default=sa.func.now(), nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.CheckConstraint(
            "state IN ('pending', 'delivered', 'failed', 'silenced', 'skipped')",
            name="delivery_state_known"),
        sa.ForeignKeyConstraint(["notification_id"], ["notifications.id"],
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["notifier_id"], ["notifiers.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_deliveries_pending", "deliveries", ["next_attempt_at"],
                    postgresql_where=sa.text("state = 'pending'"))
    op.create_index("ix_deliveries_notifier_id_id", "deliveries", ["notifier_id", "id"])
    op.create_index("ix_deliveries_notification_id", "deliveries", ["notification_id"])
    op.create_table(
        "drift_findings",
        sa.Column("probe_id", sa.BigInteger(), nullable=False),
        sa.Column("metric", sa.String(length=16), nullable=False),
        sa.Column("stat", sa.String(length=16), nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=False),
        sa.Column("ratio", sa.Double(), nullable=True),
        sa.Column("ci_low", sa.Double(), nullable=True),
        sa.Column("ci_high", sa.Double(), nullable=True),
        sa.Column("change_at", TS, nullable=True),
        sa.Column("evaluated_at", TS, nullable=False),
        sa.ForeignKeyConstraint(["probe_id"], ["probes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("probe_id", "metric", "stat"),
    )


def downgrade() -> None:
    op.drop_table("drift_findings")
    op.drop_table("deliveries")
    op.drop_table("silences")
    op.drop_table("notifiers")
    op.add_column("notifications", sa.Column("last_error", sa.Text(), nullable=True))
    op.add_column("notifications", sa.Column("attempts", sa.Integer(),
                                             server_default=sa.text("0"), nullable=False))
    op.alter_column("notifications", "dispatched_at", new_column_name="delivered_at")
