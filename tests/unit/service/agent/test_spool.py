"""The agent's spool: whole runs on disk, oldest first, kept across a restart, bounded."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from sustain.service.agent.spool import Spool, SpooledRun, SpoolFullError


def run(samples: int = 3, run_id: int | None = 7) -> SpooledRun:
    return SpooledRun(upload_id=uuid.uuid4(), probe_id=1, tick=1.8e9, run_id=run_id,
                      started_at=1.8e9 + 0.1, dropped=0,
                      samples=[[i, 0, None, float(i)] for i in range(samples)],
                      final={"status": "succeeded", "sketches": [[0, "ttft", b"\x00\x01"]]})


def test_runs_come_back_whole_and_oldest_first_after_a_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1_000_000)
    first, second = run(), run(run_id=None)
    spool.put(first)
    spool.put(second)
    reopened = Spool(tmp_path, 1_000_000)
    assert reopened.runs == 2
    assert [r for _, r in reopened.oldest()] == [first, second]
    assert reopened.run_ids() == [7], "only claimed runs hold a run id"
    (path, _), _ = list(reopened.oldest())
    reopened.remove(path)
    assert [r for _, r in Spool(tmp_path, 1_000_000).oldest()] == [second]


def test_the_spool_refuses_what_would_pass_its_bound_and_stops_accepting_near_it(
        tmp_path: Path) -> None:
    size = len(run(100).pack())
    spool = Spool(tmp_path, int(size * 2.05))
    spool.put(run(100))
    assert spool.accepting
    spool.put(run(100))
    assert not spool.accepting, "past 90 % of the bound no new run starts"
    with pytest.raises(SpoolFullError):
        spool.put(run(100))
    assert spool.runs == 2


def test_an_unreadable_file_is_set_aside_not_retried(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1_000_000)
    path = spool.put(run())
    path.write_bytes(b"\xc1 not msgpack")
    assert list(spool.oldest()) == []
    assert path.with_suffix(".bad").exists()
    assert spool.runs == 0


def test_a_write_cut_short_is_cleaned_up_at_start(tmp_path: Path) -> None:
    (tmp_path / f"000000000001-{uuid.uuid4()}.tmp").write_bytes(b"half")
    spool = Spool(tmp_path, 1_000_000)
    assert spool.runs == 0
    assert not list(tmp_path.glob("*.tmp"))
