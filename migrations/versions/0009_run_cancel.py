"""cancelling runs: the `cancelled` status and the cancel request a replica watches for

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 19:00:00

A run can be cancelled (POST /api/v1/runs/{id}/cancel, or by disabling or deleting its probe).
A pending run becomes `cancelled` at once; a running one gets `cancel_requested_at`, which the
replica executing it watches for (within a second), then it stops the run and records it as
`cancelled` with the samples measured so far and their summary.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STATUSES = ("pending", "running", "succeeded", "failed", "abandoned", "invalid", "missed",
                "skipped")
NEW_STATUSES = (*OLD_STATUSES, "cancelled")


def _status_check(statuses: tuple[str, ...]) -> None:
    op.drop_constraint("status_known", "runs", type_="check")
    op.create_check_constraint(
        "status_known", "runs", "status IN (" + ", ".join(f"'{s}'" for s in statuses) + ")")


def upgrade() -> None:
    _status_check(NEW_STATUSES)
    op.add_column("runs", sa.Column("cancel_requested_at", sa.TIMESTAMP(timezone=True),
                                    nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "cancel_requested_at")
    op.execute("UPDATE runs SET status = 'abandoned' WHERE status = 'cancelled'")
    _status_check(OLD_STATUSES)
