"""a sample tells its HTTP phases and the trace id of the traceparent it carried

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-06 08:00:00

Network or server: `samples.dns_ms`, `connect_ms` and `tls_ms` are what opening a connection
took a request that opened one (null on a reused connection, `connection_reused` true),
`ttfb_ms` the time from the request sent to its response head; `trace_id` is the W3C trace id
of the `traceparent` header every probe request carries, to find the server's trace of it.
Nullable columns without defaults rewrite no partition. Downgrading drops them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS: tuple[tuple[str, sa.types.TypeEngine[Any]], ...] = (
    ("dns_ms", sa.Double()),
    ("connect_ms", sa.Double()),
    ("tls_ms", sa.Double()),
    ("ttfb_ms", sa.Double()),
    ("connection_reused", sa.Boolean()),
    ("trace_id", sa.String(32)),
)


def upgrade() -> None:
    for name, kind in COLUMNS:
        op.add_column("samples", sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    for name, _ in reversed(COLUMNS):
        op.drop_column("samples", name)
