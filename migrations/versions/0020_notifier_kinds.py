"""notifier kinds come from the registry, not the schema

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 09:00:00

A notifier's kind is any kind the service's notifier registry knows
(sustain.service.alerting.notifiers, one module per kind), so adding a kind needs no
migration: the CHECK listing webhook, slack and alertmanager goes. The registry limits a
kind's name to the column's 16 characters. Downgrading restores the CHECK, and fails while
a notifier of another kind is stored (delete it first).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_constraint("notifier_kind_known", "notifiers", type_="check")


def downgrade() -> None:
    op.create_check_constraint("notifier_kind_known", "notifiers",
                               "kind IN ('webhook', 'slack', 'alertmanager')")
