"""Splitting one stage over N worker processes, as plain data (no I/O).

The split keeps the profile's load exactly: an open-loop stage's arrival times are generated
whole in every shard (seeded, so identically) and shard j sends arrivals j, j+N, j+2N, ... at
their intended times from a common origin, so the union is the profile's schedule, request
for request; closed-loop users, request caps and floors are divided so that they add up to
the profile's. Sequence numbers interleave the same way (shard j uses base+j, base+j+N, ...),
so an open-loop request keeps the number it has when one process sends everything.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace

from sustain.probes.load.stages import ClosedStage, OpenStage, SingleStage, Stage


def split_count(total: int, parts: int) -> list[int]:
    """`total` divided into `parts` whole shares that differ by at most one, the larger
    first: split_count(10, 3) == [4, 3, 3]."""
    share, extra = divmod(total, parts)
    return [share + (1 if index < extra else 0) for index in range(parts)]


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard `index` of `count`: what one worker runs of a stage."""

    index: int
    count: int
    stage: Stage | None
    """The stage as this worker runs it (its share of users, in-flight slots and request
    cap); None when it has no share (a single request, fewer users than shards)."""
    sharing: int = 0
    """How many shards have a share (the first `sharing`); 0: all `count`. A sessions
    stage's conversations are dealt among them: shard j plays every `sharing`-th from j."""

    @property
    def deal(self) -> tuple[int, int]:
        """(index, sharing): which conversations of a sessions stage this shard plays."""
        return self.index, self.sharing or self.count

    def offsets(self) -> Iterator[float]:
        """This shard's arrivals of an open-loop stage: every `count`-th, from `index`."""
        assert isinstance(self.stage, OpenStage)
        return itertools.islice(self.stage.offsets(), self.index, None, self.count)

    def seqs(self, base: int) -> Iterator[int]:
        """Sequence numbers of this shard's requests, from the stage's `base`."""
        return itertools.count(base + self.index, self.count)


def shard_stage(stage: Stage, count: int) -> list[Shard]:
    """The `count` shards of `stage`. An open-loop stage needs `count` <= its max_in_flight
    (each shard gets at least one slot; the profile validates this)."""
    if isinstance(stage, SingleStage):
        return [Shard(index, count, stage if index == 0 else None, sharing=1)
                for index in range(count)]
    if isinstance(stage, OpenStage):
        slots = split_count(stage.max_in_flight, count)
        if min(slots) < 1:
            raise ValueError(f"{count} workers need max_in_flight >= {count}")
        return [Shard(index, count, replace(stage, max_in_flight=slots[index]))
                for index in range(count)]
    active = min(count, stage.users)
    users = split_count(stage.users, active) + [0] * (count - active)
    caps: list[int | None] = [None] * count
    if stage.max_requests is not None:
        caps = [*split_count(stage.max_requests, active), *[0] * (count - active)]
    floors: list[int | None] = [None] * count
    if stage.min_requests is not None:
        floors = [*split_count(stage.min_requests, active), *[0] * (count - active)]
    shards = []
    for index in range(count):
        share: ClosedStage | None = None
        if users[index] > 0 and caps[index] != 0:
            share = replace(stage, users=users[index], max_requests=caps[index],
                            min_requests=floors[index])
        shards.append(Shard(index, count, share))
    sharing = sum(1 for shard in shards if shard.stage is not None)  # a prefix of them
    return [replace(shard, sharing=sharing) for shard in shards]


def next_base(base: int, count: int, sends: list[int]) -> int:
    """The first sequence number of the next stage: past every number any shard used (shard
    j's k-th request is base + j + k*count)."""
    return base + count * max(sends, default=0)
