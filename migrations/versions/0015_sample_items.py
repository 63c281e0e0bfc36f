"""embeddings, rerank and transcriptions: each sample's items (inputs embedded, documents
ranked) and the seconds of audio it sent

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05 08:10:00

An embeddings request carries a batch of inputs and a rerank request a batch of documents;
their throughput is items per second, so each sample keeps how many it carried. A
transcription's real-time factor is its processing time over its audio's length, so each sample
keeps that length.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("samples", sa.Column("items", sa.Integer(), nullable=True))
    op.add_column("samples", sa.Column("audio_s", sa.Double(), nullable=True))


def downgrade() -> None:
    op.drop_column("samples", "audio_s")
    op.drop_column("samples", "items")
