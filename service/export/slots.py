"""How many sample exports (CSV streams, JSON sample pages) may be in flight at once: per
caller (an API key, or an anonymous client's address) and over all callers.

An export is the costliest read: it reads a run's samples page after page and holds them, and
its answer, until the client has taken them. Without a bound, twenty sockets that request
exports and never read hold twenty answers' memory (and, before reads were paged, twenty
database connections). A caller past its share, or any caller once every slot is taken, is
answered 429 with Retry-After; a slot is given back when its answer has been written whole or
its connection closed (a reader that stops reading is closed by the write deadline,
SUSTAIN_EXPORT_WRITE_TIMEOUT_S).

Pure: counts only; the API takes and gives back slots around each answer.
"""

from __future__ import annotations

from collections import Counter


class ExportSlots:
    """Exports in flight, counted per caller and in all."""

    def __init__(self, per_caller: int, total: int) -> None:
        if per_caller < 1 or total < 1:
            raise ValueError("export limits must be at least 1")
        self.per_caller = per_caller
        self.total = total
        self._held: Counter[str] = Counter()
        self._in_flight = 0

    @property
    def in_flight(self) -> int:
        """Slots taken now, over all callers."""
        return self._in_flight

    def held_by(self, caller: str) -> int:
        return self._held[caller]

    def take(self, caller: str) -> bool:
        """Take a slot for `caller`: false (nothing taken) when it already holds its share or
        every slot is taken."""
        if self._in_flight >= self.total or self._held[caller] >= self.per_caller:
            return False
        self._held[caller] += 1
        self._in_flight += 1
        return True

    def give_back(self, caller: str) -> None:
        """Give back one slot `caller` took (exactly once per successful take)."""
        if self._held[caller] <= 0:
            raise ValueError(f"{caller} holds no export slot")
        self._held[caller] -= 1
        if not self._held[caller]:
            del self._held[caller]
        self._in_flight -= 1
