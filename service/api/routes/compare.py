"""/api/v1/compare: probes side by side over a window."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from sustain.service.api.deps import SessionDep
from sustain.service.api.filters import LocationQuery
from sustain.service.api.times import utc_or_now
from sustain.service.db import compare as compare_queries
from sustain.service.errors import FieldError
from sustain.service.history.windows import parse_duration
from sustain.service.schemas.common import MAX_NAME_CHARS, NAME_PATTERN, ApiTime
from sustain.service.schemas.compare import Comparison
from sustain.service.schemas.patterns import duration_pattern

router = APIRouter(prefix="/compare", tags=["compare"])

MAX_WINDOW_S = 400 * 86400
MAX_PROBES = compare_queries.MAX_PROBES


@router.get("", response_model_by_alias=True)
async def compare(
    session: SessionDep,
    probe: Annotated[list[str], Query(
        max_length=MAX_PROBES, description=f"1 to {MAX_PROBES} probe names, each once.",
        json_schema_extra={"minItems": 1, "uniqueItems": True, "items": {
            "type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS,
            "pattern": NAME_PATTERN}})],
    window: Annotated[str, Query(
        max_length=16, description="A duration of at most 400d, e.g. 7d or 12h.",
        json_schema_extra={"pattern": duration_pattern(MAX_WINDOW_S)})] = "7d",
    to: ApiTime | None = None,
    location: LocationQuery = None,
    by: Annotated[Literal["probe", "location"], Query(
        description="`location`: one row per probe and location (not with "
        "`location`).")] = "probe",
) -> Comparison:
    """The named probes (`probe=A&probe=B`, up to 8) side by side over [to - window, to):
    availability, TTFT/TPOT/E2E p50 and p99, throughputs and goodput, capacity under SLO
    (newest and over the window), the newest run's efficiency and Pareto curve, run-to-run
    stability with its band, and drift verdicts. Each row is of every location's runs
    together, of one `location`'s, or (`by=location`) of each location the probe lists or
    ran from, side by side."""
    if by == "location" and location is not None:
        raise FieldError("query.by", "by=location splits every location; drop `location`")
    try:
        window_s = parse_duration(window)
    except ValueError as exc:
        raise FieldError("query.window", str(exc)) from None
    if not 0 < window_s <= MAX_WINDOW_S:
        raise FieldError("query.window", "more than 0 and at most 400d")
    end = utc_or_now(to)
    return await compare_queries.compare(session, probe, end - timedelta(seconds=window_s),
                                         end, location=location,
                                         by_location=by == "location")
