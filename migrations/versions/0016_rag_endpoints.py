"""RAG probes: the embeddings and rerank endpoints a probe chains before its own

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05 10:40:00

A RAG probe embeds the question with one endpoint, optionally reranks the passages it
retrieved with another, and generates with its own. The two others are endpoints like any:
their secrets, headers, timeouts and egress checks are theirs; a probe refers to them, and an
endpoint a probe refers to cannot be deleted (RESTRICT, as for the probe's own endpoint).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("rag_embed_endpoint_id", "rag_rerank_endpoint_id")


def upgrade() -> None:
    for column in COLUMNS:
        op.add_column("probes", sa.Column(column, sa.BigInteger(), nullable=True))
        op.create_foreign_key(f"probes_{column}_fkey", "probes", "endpoints", [column], ["id"],
                              ondelete="RESTRICT")
        op.create_index(op.f(f"ix_probes_{column}"), "probes", [column], unique=False)
    op.create_check_constraint(
        "rag_rerank_needs_embed", "probes",
        "rag_rerank_endpoint_id IS NULL OR rag_embed_endpoint_id IS NOT NULL")


def downgrade() -> None:
    op.drop_constraint("rag_rerank_needs_embed", "probes", type_="check")
    for column in reversed(COLUMNS):
        op.drop_index(op.f(f"ix_probes_{column}"), table_name="probes")
        op.drop_constraint(f"probes_{column}_fkey", "probes", type_="foreignkey")
        op.drop_column("probes", column)
