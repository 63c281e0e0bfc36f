"""probing through a database outage: the `partition` trigger

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 22:40:00

While the database is unreachable, replicas run the ticks they would have claimed (one
replica per tick, by rendezvous hashing over the replicas last seen alive) and store them when
it is back; the unique claim on (probe_id, scheduled_for) of `schedule` runs still decides.
A tick that two replicas measured during a partition is stored once; the other measurement is
kept as a sample-free `skipped` record with trigger `partition`, outside that unique index.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_TRIGGERS = ("schedule", "manual")
NEW_TRIGGERS = (*OLD_TRIGGERS, "partition")


def _trigger_check(triggers: tuple[str, ...]) -> None:
    op.drop_constraint("trigger_known", "runs", type_="check")
    op.create_check_constraint(
        "trigger_known", "runs", "trigger IN (" + ", ".join(f"'{t}'" for t in triggers) + ")")


def upgrade() -> None:
    _trigger_check(NEW_TRIGGERS)


def downgrade() -> None:
    op.execute("DELETE FROM runs WHERE trigger = 'partition'")
    _trigger_check(OLD_TRIGGERS)
