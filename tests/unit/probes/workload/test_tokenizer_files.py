"""A workload's `tokenizer` is a file read as a dataset is: only from where the DatasetPolicy
allows (under SUSTAIN_DATASET_DIR, links resolved; never /proc, /sys, /dev), only a regular
file, only up to the size cap, and one that is not a tokenizer says so and why."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from sustain.probes.client.target import ApiKind
from sustain.probes.workload.dataset import DatasetError, DatasetPolicy
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import Workload
from sustain.probes.workload.tokenizer import HFTokenizer, TokenizerError


def write_tokenizer(path: Path) -> Path:
    """A small, real byte-level BPE tokenizer.json (the shape of GPT-2 style tokenizers)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(["alpha beta gamma delta river stone cloud"] * 20,
                                  trainers.BpeTrainer(
                                      vocab_size=280,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer.save(str(path))
    return path


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    directory = tmp_path / "datasets"
    directory.mkdir()
    return directory


def test_a_tokenizer_under_the_dataset_dir_counts_tokens(allowed: Path) -> None:
    path = write_tokenizer(allowed / "tokenizer.json")
    tokenizer = HFTokenizer(path, DatasetPolicy(directory=allowed))
    assert tokenizer.count("alpha beta") >= 2


def test_a_system_file_or_one_outside_the_dataset_dir_is_never_opened(
        allowed: Path, tmp_path: Path) -> None:
    outside = write_tokenizer(tmp_path / "outside.json")
    (allowed / "escape.json").symlink_to(outside)
    policy = DatasetPolicy(directory=allowed)
    for path, reason in ((Path("/etc/shadow"), "not under SUSTAIN_DATASET_DIR"),
                         (outside, "not under SUSTAIN_DATASET_DIR"),
                         (allowed / "escape.json", "not under SUSTAIN_DATASET_DIR"),
                         (allowed / ".." / "outside.json", "not under SUSTAIN_DATASET_DIR"),
                         (Path("/proc/self/environ"), "/proc, /sys and /dev are never read")):
        with pytest.raises(TokenizerError, match=f"^tokenizer {path}: .*{reason}"):
            HFTokenizer(path, policy)
    with pytest.raises(TokenizerError, match="SUSTAIN_DATASET_DIR is unset"):
        HFTokenizer(allowed / "tokenizer.json", DatasetPolicy())


def test_a_fifo_is_refused_without_waiting_for_a_writer(allowed: Path) -> None:
    fifo = allowed / "tokenizer.json"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            HFTokenizer(fifo, DatasetPolicy(directory=allowed))
        except TokenizerError as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=10)  # hang guard: a blocking open would never return
    assert not reader.is_alive(), "opening the FIFO blocked"
    assert isinstance(outcome[0], TokenizerError)
    assert str(outcome[0]) == f"tokenizer {fifo}: not a regular file"


def test_a_directory_is_refused(allowed: Path) -> None:
    (allowed / "tok").mkdir()
    with pytest.raises(TokenizerError, match="not a regular file"):
        HFTokenizer(allowed / "tok", DatasetPolicy(directory=allowed))


def test_a_tokenizer_beyond_the_size_cap_is_refused_unparsed(allowed: Path) -> None:
    path = write_tokenizer(allowed / "tokenizer.json")
    size = path.stat().st_size
    HFTokenizer(path, DatasetPolicy(directory=allowed, max_bytes=size))
    with pytest.raises(TokenizerError, match=f"^tokenizer {path}: larger than {size - 1:,} "
                       "bytes$"):
        HFTokenizer(path, DatasetPolicy(directory=allowed, max_bytes=size - 1))


@pytest.mark.parametrize(("content", "reason"), [
    (b'{"prompt": "not a tokenizer"}', r"not a tokenizer file \(.+\)"),
    (b"\xff\xfe binary", r"not a tokenizer file \(not UTF-8 text\)"),
    (b"", r"not a tokenizer file \(.+\)"),
])
def test_a_file_that_is_not_a_tokenizer_says_so_and_why(
        allowed: Path, content: bytes, reason: str) -> None:
    path = allowed / "tokenizer.json"
    path.write_bytes(content)
    with pytest.raises(TokenizerError, match=f"^tokenizer {path}: {reason}$") as caught:
        HFTokenizer(path, DatasetPolicy(directory=allowed))
    assert isinstance(caught.value, DatasetError)  # a run fails with it as with a dataset


def test_a_request_builder_reads_the_tokenizer_under_its_dataset_policy(
        allowed: Path, tmp_path: Path) -> None:
    inside = write_tokenizer(allowed / "tokenizer.json")
    outside = write_tokenizer(tmp_path / "tokenizer.json")
    policy = DatasetPolicy(directory=allowed)
    RequestBuilder(Workload(tokenizer=str(inside)), ApiKind.OPENAI_CHAT, "m", policy)
    with pytest.raises(TokenizerError, match="not under SUSTAIN_DATASET_DIR"):
        RequestBuilder(Workload(tokenizer=str(outside)), ApiKind.OPENAI_CHAT, "m", policy)
    with pytest.raises(TokenizerError, match="SUSTAIN_DATASET_DIR is unset"):
        RequestBuilder(Workload(tokenizer=str(inside)), ApiKind.OPENAI_CHAT, "m")
