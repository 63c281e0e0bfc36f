"""How a probe's drift verdicts read to a person, the same on every page and in `sustain
compare`: the metrics that moved, else "no change" only where the runs could show it, else
why there is no verdict (a verdict of insufficient_data, or none at all, is not a no): the
pages say which window lacks runs (`why_no_verdict`), `sustain compare` says "not enough
runs yet"."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from sustain.service.evaluation.drift import MIN_RUNS

MOVED = ("regressed", "improved")
NOT_ENOUGH = "not enough runs yet"


class Verdict(Protocol):
    @property
    def metric(self) -> str: ...
    @property
    def stat(self) -> str: ...
    @property
    def verdict(self) -> str: ...


def drift_words(verdicts: Iterable[Verdict], no_verdict: str = NOT_ENOUGH) -> str:
    """`ttft:p99 regressed, e2e:p50 improved`, `no change`, or `no_verdict` (why none could
    be reached: `not enough runs yet` unless the caller knows better)."""
    found = list(verdicts)
    moved = [f"{v.metric}:{v.stat} {v.verdict}" for v in found if v.verdict in MOVED]
    if moved:
        return ", ".join(moved)
    if any(v.verdict == "no_change" for v in found):
        return "no change"
    return no_verdict


def span_words(seconds: float) -> tuple[int, str]:
    """A window's length as a count and a unit (`(7, "day")`, `(24, "hour")`): whole days
    from three days up, else whole hours, else whole minutes, else seconds."""
    whole = int(seconds)
    for unit, size, least in (("day", 86_400, 3 * 86_400), ("hour", 3600, 3600),
                              ("minute", 60, 60)):
        if whole >= least and whole % size == 0:
            return whole // size, unit
    return whole, "second"


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}" + ("" if count == 1 else "s")


def _short(finished: int, measured: int, where: str, note: str, min_runs: int) -> str:
    """Why one window is short of runs: none finished, none with a successful request (no
    latency to compare), or too few with one."""
    if finished == 0:
        return f"no runs {where} yet{note}"
    if measured == 0:
        return f"no run {where} had a successful request{note}"
    return (f"{_plural(measured, 'run')} with a successful request {where}{note}; "
            f"{min_runs} needed")


def why_no_verdict(baseline: tuple[int, int], recent: tuple[int, int], window_s: float,
                   baseline_s: float, min_runs: int = MIN_RUNS) -> str:
    """Why a drift evaluation reached no verdict, from the runs of its two windows (the recent
    `window_s`, and the `baseline_s` before it, seconds), each given as (finished runs, those
    with a successful request: a latency value to compare). The baseline window is named
    first (a new probe has recent runs long before it has a baseline); each test needs
    `min_runs` runs with a value on both sides."""
    count, unit = span_words(baseline_s)
    recent_count, recent_unit = span_words(window_s)
    last = "the last " + (recent_unit if recent_count == 1
                          else _plural(recent_count, recent_unit))
    if baseline[1] < min_runs:
        return _short(*baseline, f"in the {count}-{unit} baseline window",
                      f" (the {_plural(count, unit)} before {last})", min_runs)
    if recent[1] < min_runs:
        return _short(*recent, f"in {last}", "", min_runs)
    return f"too few runs with a value of a watched metric; {min_runs} needed in each window"
