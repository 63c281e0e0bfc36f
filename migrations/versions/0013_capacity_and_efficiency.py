"""capacity under SLO per run; an endpoint's deployment for efficiency figures

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 03:30:00

An endpoint may declare what serves it (accelerators, price per hour, power): each run then
reports its throughput per accelerator and per kW and its cost per million output and good
tokens. A capacity probe's run keeps the highest level that met its SLO (and its unit), so
capacity is a series over time, watched for drops.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("endpoints", sa.Column("deployment", JSONB(), nullable=True))
    op.add_column("runs", sa.Column("capacity", sa.Integer(), nullable=True))
    op.add_column("runs", sa.Column("capacity_tps", sa.Double(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "capacity_tps")
    op.drop_column("runs", "capacity")
    op.drop_column("endpoints", "deployment")
