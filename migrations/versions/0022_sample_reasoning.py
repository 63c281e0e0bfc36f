"""a sample tells its first answer output, its reasoning tokens and a speech request's text;
a probe may judge goodput on the first answer output

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06 04:20:00

A reasoning model thinks before it answers: `samples.ttfo_ms` is the time to its first answer
output (TTFT stays the first output of any kind), `reasoning_tokens` the output it spent
thinking and `reasoning_server_counted` whether that is the server's count or counted from
the deltas; `input_chars` is the text a speech request asked to be spoken; `probes.slo_ttfo_ms`
is a goodput threshold on the first answer output. Nullable columns without defaults rewrite
no partition. Downgrading drops them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS: tuple[tuple[str, sa.types.TypeEngine[Any]], ...] = (
    ("ttfo_ms", sa.Double()),
    ("reasoning_tokens", sa.Integer()),
    ("reasoning_server_counted", sa.Boolean()),
    ("input_chars", sa.Integer()),
)


def upgrade() -> None:
    for name, kind in COLUMNS:
        op.add_column("samples", sa.Column(name, kind, nullable=True))
    op.add_column("probes", sa.Column("slo_ttfo_ms", sa.Double(), nullable=True))


def downgrade() -> None:
    op.drop_column("probes", "slo_ttfo_ms")
    for name, _ in reversed(COLUMNS):
        op.drop_column("samples", name)
