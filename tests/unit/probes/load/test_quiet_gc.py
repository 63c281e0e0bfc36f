"""The collector is paused while any run measures, and back (and run) when the last ends."""

from __future__ import annotations

import gc

from sustain.probes.load.quiet_gc import quiet_gc


def test_collector_is_paused_while_runs_overlap_and_restored_after() -> None:
    assert gc.isenabled()
    with quiet_gc():
        assert not gc.isenabled()
        with quiet_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collector_is_restored_when_a_run_fails() -> None:
    try:
        with quiet_gc():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.isenabled()
