"""Datasets are read only from where the operator allows (SUSTAIN_DATASET_DIR, links resolved),
never from /proc, /sys or /dev, and only up to a size cap: a caller cannot have a run send
another file's lines, or read /dev/zero until memory runs out."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from sustain.probes.client.target import ApiKind
from sustain.probes.workload.dataset import DatasetError, DatasetPolicy, load_jsonl
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import Workload

LINE = json.dumps({"prompt": "hello"}) + "\n"


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    directory = tmp_path / "datasets"
    directory.mkdir()
    (directory / "prompts.jsonl").write_text(LINE * 3)
    return directory


def test_a_dataset_under_the_directory_is_read(allowed: Path) -> None:
    policy = DatasetPolicy(directory=allowed)
    assert policy.check(str(allowed / "prompts.jsonl")) is None
    assert len(policy.load(str(allowed / "prompts.jsonl"))) == 3


def test_a_dataset_outside_the_directory_is_refused(allowed: Path, tmp_path: Path) -> None:
    outside = tmp_path / "other.jsonl"
    outside.write_text(LINE)
    policy = DatasetPolicy(directory=allowed)
    assert policy.check(str(outside)) == f"not under SUSTAIN_DATASET_DIR ({allowed})"
    assert policy.check(str(allowed / ".." / "other.jsonl")) is not None
    with pytest.raises(DatasetError, match="not under SUSTAIN_DATASET_DIR"):
        policy.load(str(outside))


def test_a_link_inside_the_directory_that_leads_out_is_refused(allowed: Path,
                                                               tmp_path: Path) -> None:
    outside = tmp_path / "other.jsonl"
    outside.write_text(LINE)
    (allowed / "link.jsonl").symlink_to(outside)
    (allowed / "env").symlink_to("/proc/self/environ")
    policy = DatasetPolicy(directory=allowed)
    assert policy.check(str(allowed / "link.jsonl")) is not None
    assert policy.check(str(allowed / "env")) is not None


def test_with_no_directory_configured_no_dataset_may_be_named(allowed: Path) -> None:
    assert DatasetPolicy().check(str(allowed / "prompts.jsonl")) == \
        "datasets are not allowed (SUSTAIN_DATASET_DIR is unset)"
    workload = Workload(dataset=str(allowed / "prompts.jsonl"))
    with pytest.raises(DatasetError, match="SUSTAIN_DATASET_DIR is unset"):
        RequestBuilder(workload, ApiKind.OPENAI_CHAT, "m")


@pytest.mark.parametrize("path", ["/proc/self/environ", "/dev/zero", "/sys/kernel/uevent_seqnum",
                                  "/dev/../proc/self/environ"])
def test_system_files_are_never_read_even_by_an_unrestricted_policy(path: str) -> None:
    assert DatasetPolicy(directory=Path("/")).check(path) is not None
    with pytest.raises(DatasetError, match="never read"):
        DatasetPolicy.unrestricted().load(path)


def test_a_device_is_refused_unread_without_the_directory_rule() -> None:
    with pytest.raises(DatasetError, match="not a regular file"):
        load_jsonl("/dev/zero")


def test_a_fifo_is_refused_rather_than_waited_on(allowed: Path) -> None:
    fifo = allowed / "pipe.jsonl"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            DatasetPolicy(directory=allowed).load(str(fifo))
        except DatasetError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive()
    assert "not a regular file" in str(outcome[0])


def test_a_dataset_larger_than_the_cap_is_refused(allowed: Path) -> None:
    big = allowed / "big.jsonl"
    big.write_text(LINE * 200)
    policy = DatasetPolicy(directory=allowed, max_bytes=1024)
    with pytest.raises(DatasetError, match="larger than 1,024 bytes"):
        policy.load(str(big))
    assert len(DatasetPolicy(directory=allowed, max_bytes=len(LINE) * 200).load(str(big))) \
        == 200
