"""Query parameters that several routes filter by."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from sustain.service.schemas.common import Location

LocationQuery = Annotated[Location | None, Query(
    description="Only this location's (default: every location's together).")]
"""A `location` query parameter: one location's runs or figures."""
