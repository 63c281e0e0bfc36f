"""a sample says whether its streamed request was answered as a stream

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06 03:00:00

A server may ignore `stream: true` and answer one JSON body (OpenAI's whisper-1, some chat
gateways): such an answer is a success measured whole (its TTFT is its E2E), and the sample
says so in the new nullable `samples.streamed` (false; true for an answer that streamed; null
for a request not asked to stream, and for every sample stored before). Adding a nullable
column without a default rewrites no partition. Downgrading drops the column.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("samples", sa.Column("streamed", sa.Boolean(), nullable=True))


def downgrade() -> None:
    op.drop_column("samples", "streamed")
