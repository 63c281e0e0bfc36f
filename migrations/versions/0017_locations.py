"""locations: a probe runs from each location it lists, and each tick once per location

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05 13:40:00

A replica measures from one location (SUSTAIN_LOCATION); a probe lists its locations. The
unique claim of a scheduled tick becomes (probe_id, location, scheduled_for), so each location
runs each tick once, and runs, replicas and rollups carry the location (existing rows are in
`default`, the location of every replica before this revision).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOCATION_NAME = "location ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'"


def _location(table: str) -> None:
    op.add_column(table, sa.Column("location", sa.Text(), nullable=False,
                                   server_default="default"))
    op.create_check_constraint("location_name", table, LOCATION_NAME)


def upgrade() -> None:
    op.add_column("probes", sa.Column("locations", sa.ARRAY(sa.Text()), nullable=False,
                                      server_default="{default}"))
    op.create_check_constraint("locations_count", "probes",
                               "cardinality(locations) BETWEEN 1 AND 16")
    for table in ("runs", "replicas", "rollups", "rollup_sketches"):
        _location(table)
    op.drop_index("uq_runs_scheduled_tick", table_name="runs")
    op.create_index("uq_runs_scheduled_tick", "runs", ["probe_id", "location", "scheduled_for"],
                    unique=True, postgresql_where=sa.text("trigger = 'schedule'"))
    op.drop_constraint("rollups_pkey", "rollups", type_="primary")
    op.create_primary_key("rollups_pkey", "rollups",
                          ["probe_id", "location", "width_s", "start"])
    op.drop_constraint("rollup_sketches_pkey", "rollup_sketches", type_="primary")
    op.create_primary_key("rollup_sketches_pkey", "rollup_sketches",
                          ["probe_id", "location", "metric", "width_s", "start"])


def downgrade() -> None:
    """Back to one location: every row is kept, and rows of other locations become the
    default location's (rollups of several locations are summed into one)."""
    op.drop_constraint("rollup_sketches_pkey", "rollup_sketches", type_="primary")
    op.drop_constraint("rollups_pkey", "rollups", type_="primary")
    op.execute("""
        CREATE TEMP TABLE merged_rollups ON COMMIT DROP AS
        SELECT probe_id, width_s, start, sum(runs) AS runs, sum(attempts) AS attempts,
               sum(successes) AS successes, sum(good) AS good,
               sum(good_measured_s) AS good_measured_s, sum(output_tokens) AS output_tokens,
               sum(measured_s) AS measured_s
        FROM rollups GROUP BY probe_id, width_s, start""")
    op.execute("DELETE FROM rollups")
    op.execute("""
        INSERT INTO rollups (probe_id, width_s, start, runs, attempts, successes, good,
                             good_measured_s, output_tokens, measured_s)
        SELECT * FROM merged_rollups""")
    # Sketches cannot be merged in SQL: each bucket keeps its default location's (or, without
    # one, its first location's) sketch, and the figures of other locations are dropped.
    op.execute("""
        DELETE FROM rollup_sketches s USING rollup_sketches t
        WHERE (s.probe_id, s.metric, s.width_s, s.start) = (t.probe_id, t.metric, t.width_s,
                                                            t.start)
          AND (t.location <> 'default', t.location) < (s.location <> 'default', s.location)
    """)
    op.create_primary_key("rollups_pkey", "rollups", ["probe_id", "width_s", "start"])
    op.create_primary_key("rollup_sketches_pkey", "rollup_sketches",
                          ["probe_id", "metric", "width_s", "start"])
    op.drop_index("uq_runs_scheduled_tick", table_name="runs")
    # A tick run in several locations keeps its first run as the tick's; the others stay,
    # outside the unique claim, as a partition's second measurements do.
    op.execute("""
        UPDATE runs r SET trigger = 'partition'
        WHERE r.trigger = 'schedule' AND r.location <> 'default'
          AND EXISTS (SELECT 1 FROM runs o WHERE o.probe_id = r.probe_id
                      AND o.scheduled_for = r.scheduled_for AND o.trigger = 'schedule'
                      AND o.id < r.id)""")
    op.create_index("uq_runs_scheduled_tick", "runs", ["probe_id", "scheduled_for"],
                    unique=True, postgresql_where=sa.text("trigger = 'schedule'"))
    for table in ("rollup_sketches", "rollups", "replicas", "runs"):
        op.drop_constraint("location_name", table, type_="check")
        op.drop_column(table, "location")
    op.drop_constraint("locations_count", "probes", type_="check")
    op.drop_column("probes", "locations")
