"""How many measurement workers a replica starts by default: its CPUs, within its cgroup's
CPU quota (a Kubernetes CPU limit)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sustain.probes.workers.pool import available_cpus

AFFINITY = len(os.sched_getaffinity(0))


@pytest.mark.parametrize(("cpu_max", "expected"), [
    ("max 100000\n", AFFINITY),
    ("50000 100000\n", 1),
    ("150000 100000\n", min(AFFINITY, 2)),
    ("100000000 100000\n", AFFINITY),
    ("garbage", AFFINITY),
])
def test_the_cgroup_quota_caps_the_cpus(tmp_path: Path, cpu_max: str, expected: int) -> None:
    path = tmp_path / "cpu.max"
    path.write_text(cpu_max)
    assert available_cpus(path) == expected


def test_without_a_cgroup_file_the_affinity_mask_counts(tmp_path: Path) -> None:
    assert available_cpus(tmp_path / "absent") == AFFINITY
