"""The bounded in-memory write buffer between runs and Postgres.

Runs append sample rows as requests complete (cheap: no I/O on the measurement path) and a
`RunFinal` when they end; one writer drains the buffer in FIFO order, so a run's samples are
written in the order they were buffered and its final status only after all of them. While the
database is down the rows wait here. Past ADMIT_FRACTION of the capacity no new run should
start; at capacity further samples are dropped, counted, and recorded on their run.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, replace

from sustain.probes.measure.sample import Sample
from sustain.service.runs.finals import RunFinal
from sustain.service.runs.rows import SampleTuple, sample_tuple

ADMIT_FRACTION = 0.9


Item = SampleTuple | RunFinal


@dataclass(slots=True)
class RunSink:
    """Where one run puts its samples; numbers them in buffer order (the `pos` column)."""

    buffer: SampleBuffer
    run_id: int
    probe_id: int
    next_pos: int = 0
    dropped: int = 0

    def put(self, sample: Sample) -> None:
        self.buffer.put(self, sample)

    def finish(self, final: RunFinal) -> None:
        self.buffer.finish(replace(final, samples_dropped=self.dropped))


class SampleBuffer:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: deque[Item] = deque()
        self.samples = 0
        """Sample rows buffered, not yet durable."""
        self.dropped_total = 0
        self.unwritten_finals: set[int] = set()
        """Runs whose final record is buffered but not yet durable (still this replica's)."""
        self._ready = asyncio.Event()
        self._empty = asyncio.Event()

    def open(self, run_id: int, probe_id: int) -> RunSink:
        return RunSink(self, run_id, probe_id)

    @property
    def accepting(self) -> bool:
        """Whether a new run may start: below ADMIT_FRACTION of the capacity, so runs already
        in flight have room to finish."""
        return self.samples < self.capacity * ADMIT_FRACTION

    def put(self, sink: RunSink, sample: Sample) -> None:
        pos = sink.next_pos
        sink.next_pos += 1
        if self.samples >= self.capacity:
            sink.dropped += 1
            self.dropped_total += 1
            return
        self._items.append(sample_tuple(sink.run_id, pos, sink.probe_id, sample))
        self.samples += 1
        self._ready.set()

    def finish(self, final: RunFinal) -> None:
        self._items.append(final)
        self.unwritten_finals.add(final.run_id)
        self._ready.set()

    def __len__(self) -> int:
        return len(self._items)

    async def wait(self) -> None:
        """Until something is buffered."""
        while not self._items:
            self._ready.clear()
            await self._ready.wait()

    async def drained(self) -> None:
        """Until everything buffered has been popped (is durable)."""
        while self._items:
            self._empty.clear()
            await self._empty.wait()

    def peek(self, max_samples: int) -> list[Item]:
        """The oldest items, up to `max_samples` sample rows (finals ride along)."""
        batch: list[Item] = []
        rows = 0
        for item in self._items:
            if isinstance(item, tuple):
                if rows == max_samples:
                    break
                rows += 1
            batch.append(item)
        return batch

    def pop(self, count: int) -> None:
        """Forget the oldest `count` items, once they are durable."""
        for _ in range(count):
            item = self._items.popleft()
            if isinstance(item, tuple):
                self.samples -= 1
            else:
                self.unwritten_finals.discard(item.run_id)
        if not self._items:
            self._empty.set()
