"""dead letters: records the database refused, kept with the reason

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04 15:30:00

When the database answers a write by refusing one record (a value out of range, text or JSON
it cannot hold), the writer stores every other record of the batch, fails the record's run
with the reason, and keeps the refused record here, as it was, with the database's words. The
table is bounded: the writer keeps the newest rows only.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dead_letters",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("at", sa.TIMESTAMP(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("probe_id", sa.BigInteger(), nullable=False),
        sa.Column("pos", sa.Integer(), nullable=True),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
        sa.CheckConstraint("kind IN ('sample', 'final')", name="dead_letter_kind_known"),
    )
    # a record is kept once: a batch retried after a commit whose answer was lost meets it
    op.create_index("uq_dead_letters_record", "dead_letters",
                    ["run_id", "kind", sa.text("coalesce(pos, -1)")], unique=True)


def downgrade() -> None:
    op.drop_index("uq_dead_letters_record", table_name="dead_letters")
    op.drop_table("dead_letters")
