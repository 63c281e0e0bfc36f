"""SLOs over locations: across them (as before) or in each, with N of M locations to page

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05 14:20:00

Each SLO event count keeps the location of its run, so an SLO's status can be read in each
location as well as across them. An SLO states which it is judged by (`locations_mode`:
`across`, or `each`, where a tier breaches when at least `min_locations` locations breach it
on their own: one location's network trouble then does not page for the endpoint).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("slos", sa.Column("locations_mode", sa.String(length=8), nullable=False,
                                    server_default="across"))
    op.create_check_constraint("locations_mode_known", "slos",
                               "locations_mode IN ('across', 'each')")
    op.add_column("slos", sa.Column("min_locations", sa.Integer(), nullable=False,
                                    server_default="1"))
    op.create_check_constraint("min_locations_range", "slos",
                               "min_locations BETWEEN 1 AND 16")
    op.add_column("slo_run_counts", sa.Column("location", sa.Text(), nullable=False,
                                              server_default="default"))
    op.execute("UPDATE slo_run_counts c SET location = r.location FROM runs r "
               "WHERE r.id = c.run_id AND r.location <> 'default'")


def downgrade() -> None:
    op.drop_column("slo_run_counts", "location")
    op.drop_constraint("min_locations_range", "slos", type_="check")
    op.drop_column("slos", "min_locations")
    op.drop_constraint("locations_mode_known", "slos", type_="check")
    op.drop_column("slos", "locations_mode")
