"""An SLO judged in each location: a tier breaches when at least min_locations locations
breach it on their own; across, the counts of all locations decide."""

from __future__ import annotations

from sustain.service.evaluation.slo_status import (
    breaching,
    in_each_location,
    judged,
    needed_windows,
    status,
)
from sustain.service.evaluation.tiers import DEFAULT_TIERS

OBJECTIVE = 0.99
WINDOW_S = 7 * 86400


def counts(bad: float, total: int = 10_000) -> dict[int, tuple[int, int]]:
    """Every window with `bad` of its events failing."""
    return {w: (total - round(bad * total), total)
            for w in needed_windows(WINDOW_S, DEFAULT_TIERS)}


def test_a_tier_pages_only_when_enough_locations_breach_it() -> None:
    places = in_each_location(OBJECTIVE, WINDOW_S, DEFAULT_TIERS,
                              {"a": counts(0.5), "b": counts(0.0), "c": counts(0.5)})
    across = status(OBJECTIVE, WINDOW_S, DEFAULT_TIERS, counts(1 / 3))
    everything = [t.name for t in DEFAULT_TIERS]
    assert breaching(places, "page_fast") == ["a", "c"]
    assert judged(across, places, "each", 2, DEFAULT_TIERS).breached_tiers == everything
    assert judged(across, places, "each", 3, DEFAULT_TIERS).breached_tiers == []
    assert judged(across, places, "across", 3, DEFAULT_TIERS) is across, \
        "across ignores min_locations: the counts of all locations decide"


def test_a_location_without_events_in_a_window_breaches_nothing_there() -> None:
    places = in_each_location(OBJECTIVE, WINDOW_S, DEFAULT_TIERS, {"quiet": {}})
    assert places["quiet"].breached_tiers == []
    assert places["quiet"].compliance is None
