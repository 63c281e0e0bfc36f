"""Locations: where a replica or an agent measures from (a region, a data centre, an office
network). A probe lists the locations it runs from; each of its ticks is run once in each of
them. A location's name is a DNS label (lower-case letters, digits and inner hyphens, at most
63 characters), so it is safe as a Prometheus label value, a Kubernetes name and a URL part."""

from __future__ import annotations

import re
from collections.abc import Sequence

DEFAULT_LOCATION = "default"
"""A replica's location when SUSTAIN_LOCATION is not set, and a probe's when it lists none."""
MAX_LOCATIONS = 16
"""Locations one probe may list: each multiplies its runs."""
PATTERN = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def location_problem(name: str) -> str | None:
    """Why `name` cannot be a location (None: it can)."""
    if PATTERN.fullmatch(name) is None:
        return (f"{name[:70]!r} is not a location name: lower-case letters, digits and inner "
                "hyphens, 1 to 63 characters (like eu-west-1)")
    return None


def locations_problem(names: Sequence[str]) -> str | None:
    """Why a probe's list of locations is refused (None: it is fine)."""
    if not names:
        return "a probe runs from at least one location"
    if len(names) > MAX_LOCATIONS:
        return f"at most {MAX_LOCATIONS} locations per probe ({len(names)} given)"
    for name in names:
        if (problem := location_problem(name)) is not None:
            return problem
    if len(set(names)) != len(names):
        return "each location is listed once"
    return None
