"""How a probe's drift verdicts read to a person, the same on every page and in `sustain
compare`: the metrics that moved, else "no change" only where the runs could show it, else
"not enough runs yet" (a verdict of insufficient_data, or none at all, is not a no)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

MOVED = ("regressed", "improved")
NOT_ENOUGH = "not enough runs yet"


class Verdict(Protocol):
    @property
    def metric(self) -> str: ...
    @property
    def stat(self) -> str: ...
    @property
    def verdict(self) -> str: ...


def drift_words(verdicts: Iterable[Verdict]) -> str:
    """`ttft:p99 regressed, e2e:p50 improved`, `no change` or `not enough runs yet`."""
    found = list(verdicts)
    moved = [f"{v.metric}:{v.stat} {v.verdict}" for v in found if v.verdict in MOVED]
    if moved:
        return ", ".join(moved)
    if any(v.verdict == "no_change" for v in found):
        return "no change"
    return NOT_ENOUGH
