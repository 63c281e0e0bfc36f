"""agents: measuring from places that cannot reach the database

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05 14:00:00

An agent runs a location's probes and reaches the service only over HTTPS, with an API key of
the new `agent` role, bound to its location. It heartbeats into `replicas` (kind `agent`, with
the offset of its wall clock to the service's, as it measured it), claims ticks through the
API, and uploads each finished run in parts: the parts wait in `agent_upload_parts` until the
last one arrives, and the whole run is then stored in one transaction and marked with its
`upload_id`, so a part or a run sent twice is stored once.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.TIMESTAMP(timezone=True)


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("location", sa.Text(), nullable=True))
    op.drop_constraint("api_key_role_known", "api_keys", type_="check")
    op.create_check_constraint("api_key_role_known", "api_keys",
                               "role IN ('viewer', 'editor', 'admin', 'agent')")
    op.create_check_constraint("api_key_agent_location", "api_keys",
                               "(role = 'agent') = (location IS NOT NULL)")
    op.add_column("replicas", sa.Column("kind", sa.String(length=16), nullable=False,
                                        server_default="replica"))
    op.create_check_constraint("replica_kind_known", "replicas", "kind IN ('replica', 'agent')")
    op.add_column("replicas", sa.Column("clock_offset_ms", sa.Double(), nullable=True))
    op.add_column("replicas", sa.Column("spooled_runs", sa.Integer(), nullable=True))
    op.add_column("runs", sa.Column("upload_id", postgresql.UUID(as_uuid=True), nullable=True))
    op.create_index("uq_runs_upload_id", "runs", ["upload_id"], unique=True,
                    postgresql_where=sa.text("upload_id IS NOT NULL"))
    op.create_table(
        "agent_upload_parts",
        sa.Column("upload_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("agent", sa.Text(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", TS, server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("upload_id", "part"),
    )
    op.create_index("ix_agent_upload_parts_created_at", "agent_upload_parts", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_agent_upload_parts_created_at", table_name="agent_upload_parts")
    op.drop_table("agent_upload_parts")
    op.drop_index("uq_runs_upload_id", table_name="runs")
    op.drop_column("runs", "upload_id")
    op.drop_column("replicas", "spooled_runs")
    op.drop_column("replicas", "clock_offset_ms")
    op.drop_constraint("replica_kind_known", "replicas", type_="check")
    op.drop_column("replicas", "kind")
    op.execute("DELETE FROM web_sessions w USING api_keys k "
               "WHERE w.key_hash = k.key_hash AND k.role = 'agent'")
    op.execute("DELETE FROM api_keys WHERE role = 'agent'")
    op.drop_constraint("api_key_agent_location", "api_keys", type_="check")
    op.drop_constraint("api_key_role_known", "api_keys", type_="check")
    op.create_check_constraint("api_key_role_known", "api_keys",
                               "role IN ('viewer', 'editor', 'admin')")
    op.drop_column("api_keys", "location")
