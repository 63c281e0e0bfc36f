"""endpoints: optional HTTP/2 and the request of plain http probes

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 17:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("endpoints", sa.Column("http2", sa.Boolean(), server_default=sa.text("false"),
                                         nullable=False))
    op.add_column("endpoints", sa.Column("http_check", postgresql.JSONB(astext_type=sa.Text()),
                                         nullable=True))


def downgrade() -> None:
    op.drop_column("endpoints", "http_check")
    op.drop_column("endpoints", "http2")
