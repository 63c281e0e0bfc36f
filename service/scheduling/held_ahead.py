"""What one replica holds of the ticks claimed ahead, in memory: the claims waiting for their
firing, the ticks another replica took, those whose job fired or whose run started here, and
the claims still to settle in the database (deleted, recorded `missed` or `skipped`).

No database and no runs here: the executor (executor.py) claims batches and settles through
ahead.py's statements, and starts the runs; this book says which ticks are still to claim,
what each firing finds, and what is owed to the database. Times are UTC datetimes; every
entry carries when to forget it, so the book stays the size of the ticks about to fire.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sustain.service.db.models import Endpoint, Probe
from sustain.service.scheduling.ahead import EXPIRY_MARGIN_S, Outcome, Upcoming

Key = tuple[int, datetime]
"""A tick: (probe id, tick)."""


@dataclass(slots=True)
class ClaimedAhead:
    """A tick this replica claimed ahead: its run starts when the tick fires."""

    run_id: int
    probe: Probe
    endpoint: Endpoint
    fire_at: datetime
    expires_at: datetime
    """Not started by then (the loop stalled past its grace): recorded `missed`."""
    timer: asyncio.TimerHandle | None = None
    """What starts its run at its firing (less the measurer's dispatch lead)."""


@dataclass(slots=True)
class Settlement:
    """Claims made ahead whose outcome the database does not know yet (run ids)."""

    release: list[int] = field(default_factory=list)
    """Their probe no longer runs here: to delete."""
    expire: list[int] = field(default_factory=list)
    """Not started in time: to record `missed`."""
    skip: list[int] = field(default_factory=list)
    """Fired while the probe's previous run was still going here: to record `skipped`."""

    def __bool__(self) -> bool:
        return bool(self.release or self.expire or self.skip)

    def copy(self) -> Settlement:
        return Settlement(list(self.release), list(self.expire), list(self.skip))

    def remove(self, done: Settlement) -> None:
        """Forget what `done` (an earlier copy) settled; what came in since stays."""
        self.release = [r for r in self.release if r not in done.release]
        self.expire = [r for r in self.expire if r not in done.expire]
        self.skip = [r for r in self.skip if r not in done.skip]

    def run_ids(self) -> list[int]:
        return [*self.release, *self.expire, *self.skip]


class HeldAhead:
    """The ticks claimed ahead that this replica knows of, by (probe id, tick)."""

    def __init__(self) -> None:
        self.waiting: dict[Key, ClaimedAhead] = {}
        """Ticks claimed ahead here, until they fire."""
        self.elsewhere: dict[Key, datetime] = {}
        """Ticks another replica of the location claimed ahead (nothing to do when they
        fire), with when to forget them."""
        self.claiming: dict[Key, asyncio.Future[None]] = {}
        """Ticks in a batch being claimed: a firing waits for its batch's answer."""
        self.fired: dict[Key, datetime] = {}
        """Ticks whose job has fired here, with when to forget them: never claimed ahead
        after that (no firing would start them)."""
        self.started: dict[Key, datetime] = {}
        """Ticks claimed ahead whose run has started, with when to forget them: their job's
        firing has nothing left to do."""
        self.dropped: set[int] = set()
        """Probes given up while a batch was being claimed: what it claimed of them goes."""
        self.owed = Settlement()
        """What the database is still to be told."""
        self.batches = 0
        """Batches of ticks claimed ahead (each one transaction)."""

    def wanted(self, batch: Sequence[Upcoming], running: set[int]) -> list[Upcoming]:
        """The batch's ticks still to claim: their probe not running here, and not claimed,
        being claimed, fired or started already."""
        return [u for u in batch if u.probe_id not in running
                and u.key not in self.waiting and u.key not in self.elsewhere
                and u.key not in self.claiming and u.key not in self.fired
                and u.key not in self.started]

    def begin(self, wanted: Sequence[Upcoming], answered: asyncio.Future[None]) -> None:
        """A batch of `wanted` is being claimed; `answered` is set when it is over."""
        self.dropped.difference_update(u.probe_id for u in wanted)
        for upcoming in wanted:
            self.claiming[upcoming.key] = answered

    def end(self, wanted: Sequence[Upcoming], answered: asyncio.Future[None]) -> None:
        """The batch's claim is over, whatever it came to: the firings waiting go on."""
        for upcoming in wanted:
            self.claiming.pop(upcoming.key, None)
        answered.set_result(None)

    def keep(self, outcomes: Sequence[Outcome], loaded: dict[int, tuple[Probe, Endpoint]],
             start: Callable[[Key], None], lead_s: float, now: datetime) -> list[int]:
        """Remember what a committed batch came to, and set each claimed tick's run to
        start at its firing less `lead_s` (a loop timer calling `start`: no database, no
        scheduler in between). The run ids claimed here, kept or to release."""
        loop = asyncio.get_running_loop()
        claimed_here: list[int] = []
        for outcome in outcomes:
            upcoming = outcome.upcoming
            forget_at = upcoming.fire_at + timedelta(
                seconds=upcoming.grace_s + EXPIRY_MARGIN_S)
            if outcome.run_id is None:
                if not outcome.busy:
                    self.elsewhere[upcoming.key] = forget_at
                continue
            claimed_here.append(outcome.run_id)
            found = loaded.get(upcoming.probe_id)
            if found is None or upcoming.probe_id in self.dropped:
                self.owed.release.append(outcome.run_id)
                continue
            claimed = ClaimedAhead(outcome.run_id, *found, upcoming.fire_at, forget_at)
            self.waiting[upcoming.key] = claimed
            claimed.timer = loop.call_later(
                max(0.0, (upcoming.fire_at - now).total_seconds() - lead_s),
                start, upcoming.key)
        return claimed_here

    def take(self, key: Key) -> ClaimedAhead | None:
        """The claim of a tick that fires now (its run starts), or None when it has none."""
        claimed = self.waiting.pop(key, None)
        if claimed is not None:
            self.started[key] = claimed.expires_at
        return claimed

    def drop(self, key: Key) -> ClaimedAhead:
        """Give up a waiting claim (its timer cancelled); what becomes of it is the
        caller's."""
        claimed = self.waiting.pop(key)
        if claimed.timer is not None:
            claimed.timer.cancel()
        return claimed

    def release_probe(self, probe_id: int) -> None:
        """The probe no longer runs here: its ticks claimed ahead are given up (deleted at
        the next settlement), and so is what a batch being claimed takes of it."""
        self.dropped.add(probe_id)
        for key in [k for k in self.waiting if k[0] == probe_id]:
            self.owed.release.append(self.drop(key).run_id)

    def expire_due(self, now: datetime) -> list[tuple[Key, ClaimedAhead]]:
        """Claims not started by their expiry, now owed as `missed`, and forget what is past
        its time to forget."""
        expired = [(key, self.drop(key)) for key, claimed in list(self.waiting.items())
                   if claimed.expires_at < now]
        self.owed.expire.extend(claimed.run_id for _, claimed in expired)
        for seen in (self.elsewhere, self.fired, self.started):
            for key in [k for k, at in seen.items() if at < now]:
                del seen[key]
        return expired

    def give_back_all(self, now: datetime) -> None:
        """Shutdown: claims still to fire are owed as deleted, those whose firing passed
        unstarted as `missed`."""
        for key in list(self.waiting):
            claimed = self.drop(key)
            (self.owed.release if claimed.fire_at > now else self.owed.expire).append(
                claimed.run_id)

    def last_firing(self) -> datetime | None:
        """When the last waiting claim fires (None: none waits)."""
        return max((c.fire_at for c in self.waiting.values()), default=None)
