"""an interrupted run: the `interrupted` status of a run the service stopped during

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06 05:00:00

A run cut short because its service (or agent) was stopped, Ctrl-C or SIGTERM past the
shutdown grace, says nothing about its endpoint: it is `interrupted`, not `abandoned` (which
stays for runs whose replica died or lost them), and the probe keeps the state of its last
finished run. The status check is replaced NOT VALID and then validated, so the table is not
locked against writes while its rows are checked. Downgrading marks interrupted runs
abandoned, as they were before.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STATUSES = ("pending", "running", "succeeded", "failed", "abandoned", "invalid", "missed",
                "skipped", "cancelled")
NEW_STATUSES = (*OLD_STATUSES, "interrupted")


def _status_check(statuses: tuple[str, ...]) -> None:
    op.drop_constraint("status_known", "runs", type_="check")
    listed = ", ".join(f"'{s}'" for s in statuses)
    op.execute(f"ALTER TABLE runs ADD CONSTRAINT status_known CHECK (status IN ({listed})) "
               "NOT VALID")
    op.execute("ALTER TABLE runs VALIDATE CONSTRAINT status_known")


def upgrade() -> None:
    _status_check(NEW_STATUSES)


def downgrade() -> None:
    op.execute("UPDATE runs SET status = 'abandoned' WHERE status = 'interrupted'")
    _status_check(OLD_STATUSES)
