"""A reader of packed samples decodes only the blocks its page needs: a viewer paging through a
long packed run, or exporting a slice of a probe's history, makes the service inflate at most
the blocks that hold the page (each at most 4,096 samples), never the run's or the day's."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from sustain.service.db import sample_packing, samples
from sustain.service.db.models import Run
from sustain.service.runs import sample_block
from sustain.service.runs.rows import SampleTuple
from tests.integration.service.storage import (
    create_probe_rows,
    fetch,
    seed_run,
    synthetic_samples,
)

START = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
RUN_SAMPLES = 3 * sample_block.MAX_BLOCK_SAMPLES + 500
"""Four blocks: three full, one of 500."""


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sample count of every block the service decodes."""
    counts: list[int] = []
    real = sample_block.unpack

    def counting(block: bytes, run_id: int, probe_id: int) -> list[SampleTuple]:
        rows = real(block, run_id, probe_id)
        counts.append(len(rows))
        return rows

    monkeypatch.setattr(sample_block, "unpack", counting)
    return counts


async def packed_run(engine: AsyncEngine) -> tuple[int, int]:
    probe_id = await create_probe_rows(engine)
    run_id = await seed_run(engine, probe_id, START,
                            synthetic_samples(RUN_SAMPLES, START, random.Random(1)))
    await sample_packing.pack_finished(engine, datetime.now(UTC) + timedelta(days=1))
    assert await fetch(engine, "SELECT count(*) FROM sample_blocks") == [(4,)]
    return probe_id, run_id


async def test_a_page_of_a_long_packed_run_inflates_only_the_blocks_holding_it(
        engine: AsyncEngine, decoded: list[int]) -> None:
    _, run_id = await packed_run(engine)
    decoded.clear()

    async with AsyncSession(engine) as session:
        run = await session.get(Run, run_id)
        assert run is not None
        inside = await samples.page(session, run, 5_000, 100)
        across = await samples.page(session, run, 4_000, 1_000)

    assert [s["pos"] for s in inside] == list(range(5_001, 5_101))
    assert [s["pos"] for s in across] == list(range(4_001, 5_001))
    assert decoded == [4096, 4096, 4096]  # one block, then the two the second page spans


async def test_an_export_page_inflates_only_the_blocks_its_time_range_needs(
        engine: AsyncEngine, decoded: list[int]) -> None:
    probe_id, _ = await packed_run(engine)
    decoded.clear()
    middle = START + timedelta(milliseconds=50 * 6_000)  # requests are 50 ms apart

    async with AsyncSession(engine) as session:
        page = await samples.probe_page(session, probe_id, middle, middle + timedelta(hours=1),
                                        None, 200)

    assert len(page) == 200
    assert page[0]["sent_at"] >= middle
    assert decoded == [4096]  # the block holding the page; the next one starts after it
