"""cache-honest workloads: prompt tokens served from the server's prefix cache, per sample

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 23:20:00

Servers that cache prompt prefixes (vLLM, SGLang, OpenAI) report how many prompt tokens a
request reused (`usage.prompt_tokens_details.cached_tokens`); each sample keeps it, so a run
shows whether it measured cold or cached prefills.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("samples", sa.Column("cached_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("samples", "cached_tokens")
