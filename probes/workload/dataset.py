"""JSONL prompt datasets: one request per line, `{"prompt": "..."}` or `{"messages": [...]}`,
optionally with its own `max_tokens`, an `expect` that makes it a quality canary
(measure/expect.py), a RAG question's expected `passage`, and `images` to send with it
(dataset_images.py). Read once before a run, only from where the DatasetPolicy
allows and up to its size cap; errors name the file and line."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sustain.probes.local_files import FileRefusedError, in_system_dir, read_capped, within
from sustain.probes.measure.expect import Expect

MAX_LINES = 1_000_000
MAX_LINE_IMAGES = 16
"""Images one dataset line may send (as many as a synthetic `images.count`)."""
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""The size cap when none is configured (SUSTAIN_DATASET_MAX_BYTES)."""
DEFAULT_RAG_MAX_INDEX_BYTES = 64 * 1024 * 1024
"""Bytes a RAG index's vectors may take when none is configured
(SUSTAIN_RAG_MAX_INDEX_BYTES)."""
DEFAULT_MEDIA_MAX_BYTES = 1024 * 1024 * 1024
"""Bytes of decoded images and audio a run may hold when none is configured
(SUSTAIN_MEDIA_MAX_DECODED_BYTES)."""


class DatasetError(ValueError):
    """The file cannot be used; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class DatasetEntry:
    messages: tuple[dict[str, Any], ...] | None
    prompt: str | None
    max_tokens: int | None
    expect: Expect | None = None
    """A quality canary's expectation of the reply (measure/quality.py scores it)."""
    passage: str | None = None
    """A RAG question's expected passage (its corpus id): the retrieval hit rate counts it."""
    images: tuple[str, ...] = ()
    """Image files sent with the line (chat kinds), as written: relative to the dataset's
    directory, or absolute (dataset_images.py reads them)."""

    def text(self) -> str:
        """The prompt as plain text (a completions API gets the messages joined)."""
        if self.prompt is not None:
            return self.prompt
        return "\n".join(str(m.get("content", "")) for m in self.messages or ())


def _entry(record: Any, where: str) -> DatasetEntry:
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: expected a JSON object")
    prompt, messages = record.get("prompt"), record.get("messages")
    if (prompt is None) == (messages is None):
        raise DatasetError(f"{where}: needs exactly one of 'prompt' and 'messages'")
    if prompt is not None and (not isinstance(prompt, str) or not prompt):
        raise DatasetError(f"{where}: 'prompt' must be a non-empty string")
    if messages is not None and (
            not isinstance(messages, list) or not messages
            or not all(isinstance(m, dict) and isinstance(m.get("role"), str)
                       and isinstance(m.get("content"), str) for m in messages)):
        raise DatasetError(f"{where}: 'messages' must be a list of {{role, content}} objects")
    max_tokens = record.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                   or not 1 <= max_tokens <= 1_000_000):
        raise DatasetError(f"{where}: 'max_tokens' must be an integer from 1 to 1000000")
    expect = record.get("expect")
    if expect is not None:
        try:
            expect = Expect.model_validate(expect)
        except ValidationError as exc:
            first = exc.errors()[0]
            where_in = ".".join(str(p) for p in first["loc"])
            raise DatasetError(f"{where}: 'expect{'.' + where_in if where_in else ''}': "
                               f"{first['msg']}") from None
    passage = record.get("passage")
    if passage is not None and (not isinstance(passage, str) or not 1 <= len(passage) <= 256):
        raise DatasetError(f"{where}: 'passage' must be a corpus id (1 to 256 characters)")
    images = record.get("images", [])
    if not isinstance(images, list) or len(images) > MAX_LINE_IMAGES or not all(
            isinstance(path, str) and 1 <= len(path) <= 4096 for path in images):
        raise DatasetError(f"{where}: 'images' must be a list of at most {MAX_LINE_IMAGES} "
                           "image file paths")
    return DatasetEntry(messages=None if messages is None else tuple(messages), prompt=prompt,
                        max_tokens=max_tokens, expect=expect, passage=passage,
                        images=tuple(images))


def read_bytes(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; DatasetError for anything else (a
    larger file, a directory, device or FIFO, one that cannot be opened), naming the file."""
    file = Path(path)
    try:
        return read_capped(file, max_bytes)
    except FileRefusedError as exc:
        raise DatasetError(f"{file}: {exc}") from None
    except OSError as exc:
        raise DatasetError(f"{file}: cannot read ({exc.strerror})") from None


def read_lines(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> list[str]:
    """The lines of a UTF-8 text file of at most `max_bytes`; DatasetError for anything else
    (a larger file, a device or FIFO, bad UTF-8), naming the file."""
    data = read_bytes(path, max_bytes)
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{Path(path)}: cannot read ({exc})") from None


def load_jsonl(path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> list[DatasetEntry]:
    """The entries of a JSONL file of at most `max_bytes`; DatasetError for anything else (a
    larger file, a device or FIFO, bad JSON or records), naming the file and line."""
    file = Path(path)
    lines = read_lines(file, max_bytes)
    entries: list[DatasetEntry] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(entries) >= MAX_LINES:
            raise DatasetError(f"{file}: more than {MAX_LINES} prompts")
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise DatasetError(f"{file}:{number}: invalid JSON ({exc.args[0]})") from None
        entries.append(_entry(record, f"{file}:{number}"))
    if not entries:
        raise DatasetError(f"{file}: no prompts")
    return entries


@dataclass(frozen=True, slots=True)
class DatasetPolicy:
    """Where datasets (and the other files a workload names: sessions, traces, tokenizers) may
    be read from, how large they may be, and how much of what a run reads or is answered
    (a RAG index, decoded images and audio) it may hold. The default allows none:
    the service builds its policy from SUSTAIN_DATASET_DIR; a one-shot CLI run, reading its
    user's own file, uses `anywhere`."""

    directory: Path | None = None
    """Datasets must resolve (links followed) under this directory; None: none may be named."""
    anywhere: bool = False
    """Any path outside /proc, /sys and /dev (the CLI)."""
    max_bytes: int = DEFAULT_MAX_BYTES
    rag_max_index_bytes: int = DEFAULT_RAG_MAX_INDEX_BYTES
    """Bytes a RAG probe's in-memory index may take (float32 vectors); beyond: the run fails
    naming SUSTAIN_RAG_MAX_INDEX_BYTES."""
    media_max_bytes: int = DEFAULT_MEDIA_MAX_BYTES
    """Bytes of images and audio a run may hold decoded at once, over all its users (see
    probes/workload/media.py); beyond: the run fails naming
    SUSTAIN_MEDIA_MAX_DECODED_BYTES."""
    run_users: int = 1
    """The run's peak requests in flight (over all its workers), which share its media: set
    by the runner for each run (`for_run`), never by the operator."""
    run_workers: int = 1
    """The worker processes the run is measured in, each holding its own decoded media."""

    @classmethod
    def unrestricted(cls, max_bytes: int = DEFAULT_MAX_BYTES) -> DatasetPolicy:
        return cls(anywhere=True, max_bytes=max_bytes)

    def for_run(self, users: int, workers: int = 1) -> DatasetPolicy:
        """This policy for one run of `users` requests in flight at its peak over `workers`
        worker processes: what its media bound is weighed against (probes/workload/media.py)."""
        return replace(self, run_users=max(1, users), run_workers=max(1, workers))

    def check(self, path: str) -> str | None:
        """Why `path` may not be named as a dataset, or None."""
        if in_system_dir(path):
            return "files under /proc, /sys and /dev are never read"
        if self.anywhere:
            return None
        if self.directory is None:
            return "datasets are not allowed (SUSTAIN_DATASET_DIR is unset)"
        if not within(path, self.directory):
            return f"not under SUSTAIN_DATASET_DIR ({self.directory})"
        return None

    def read(self, path: str) -> bytes:
        """The bytes of the file at `path` (a tokenizer), checked now and read up to the cap;
        DatasetError otherwise."""
        reason = self.check(path)
        if reason is not None:
            raise DatasetError(f"{path}: {reason}")
        return read_bytes(path, self.max_bytes)

    def lines(self, path: str) -> list[str]:
        """The lines of a text file at `path` (a trace), checked now and read up to the cap;
        DatasetError otherwise."""
        reason = self.check(path)
        if reason is not None:
            raise DatasetError(f"{path}: {reason}")
        return read_lines(path, self.max_bytes)

    def load(self, path: str) -> list[DatasetEntry]:
        """The dataset at `path`, checked again now (the settings or links may have changed
        since it was named) and read up to the cap; DatasetError otherwise."""
        reason = self.check(path)
        if reason is not None:
            raise DatasetError(f"{path}: {reason}")
        return load_jsonl(path, self.max_bytes)
