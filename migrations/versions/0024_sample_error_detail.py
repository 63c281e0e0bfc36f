"""a failed sample keeps the server's words: `samples.error_detail`

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06 07:00:00

A failed request's error detail (probes/client/error_body.py: the server's own message from
the first KiB of its error body, one printable line, the request's credentials redacted, at
most a few hundred characters) was only in memory, so `sustain probe` could say what the
server said and a run's page on the site could not. The nullable column without a default
rewrites no partition; successful samples leave it null. Downgrading drops it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("samples", sa.Column("error_detail", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("samples", "error_detail")
