"""replicas and config as code: heartbeats, missed and skipped ticks, cron schedules, objects
managed by a config file

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 07:30:00

`replicas` holds each running sustain's heartbeat and load, so live replicas can spread claims
by load and abandon the runs of a dead one. Runs gain the statuses `missed` (a tick no replica
started in time) and `skipped` (a tick that came while the probe's previous run was still
going). Probes gain an optional cron schedule and `schedule_since` (when the current schedule
began: ticks before it are never reported missed) and `ticks_checked_until` (how far missed
ticks have been looked for); endpoints and probes gain `managed_by`, the
config file that owns them (NULL: created over REST).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STATUSES = ("pending", "running", "succeeded", "failed", "abandoned", "invalid")
NEW_STATUSES = (*OLD_STATUSES, "missed", "skipped")


def _status_check(statuses: tuple[str, ...]) -> None:
    op.drop_constraint("status_known", "runs", type_="check")
    op.create_check_constraint(
        "status_known", "runs", "status IN (" + ", ".join(f"'{s}'" for s in statuses) + ")")


def upgrade() -> None:
    _status_check(NEW_STATUSES)
    op.create_table(
        "replicas",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("started_at", sa.TIMESTAMP(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.Column("heartbeat_at", sa.TIMESTAMP(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.Column("in_flight", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("stopping", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.add_column("probes", sa.Column("cron", sa.Text(), nullable=True))
    op.add_column("probes", sa.Column("schedule_since", sa.TIMESTAMP(timezone=True),
                                      server_default=sa.func.now(), nullable=False))
    op.add_column("probes", sa.Column("ticks_checked_until", sa.TIMESTAMP(timezone=True),
                                      nullable=True))
    op.add_column("probes", sa.Column("managed_by", sa.Text(), nullable=True))
    op.add_column("endpoints", sa.Column("managed_by", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("endpoints", "managed_by")
    op.drop_column("probes", "managed_by")
    op.drop_column("probes", "ticks_checked_until")
    op.drop_column("probes", "schedule_since")
    op.drop_column("probes", "cron")
    op.drop_table("replicas")
    op.execute("UPDATE runs SET status = 'abandoned' WHERE status IN ('missed', 'skipped')")
    _status_check(OLD_STATUSES)
