"""The agent's disk spool: each finished run, whole, in one file until the service has
stored it. Files survive a restart of the agent (uploads resume from them) and an outage of
the service of any length the bound allows. Bounded in bytes: past it, no new run starts
(the agent's /readyz says so), so a run is never measured only to be thrown away."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

SUFFIX = ".run"


@dataclass(frozen=True, slots=True)
class SpooledRun:
    """A finished run as it will be uploaded: its identity, samples and final record, as
    the plain values of domain/run_upload.py."""

    upload_id: uuid.UUID
    probe_id: int
    tick: float
    """Unix seconds."""
    run_id: int | None
    """The run the service gave the claim; None: measured without one (service away)."""
    started_at: float
    dropped: int
    samples: list[list[Any]]
    final: dict[str, Any]

    def pack(self) -> bytes:
        return msgpack.packb({
            "upload_id": str(self.upload_id), "probe_id": self.probe_id, "tick": self.tick,
            "run_id": self.run_id, "started_at": self.started_at, "dropped": self.dropped,
            "samples": self.samples, "final": self.final}, use_bin_type=True)

    @classmethod
    def unpack(cls, data: bytes) -> SpooledRun:
        raw = msgpack.unpackb(data, raw=False)
        return cls(upload_id=uuid.UUID(raw["upload_id"]), probe_id=int(raw["probe_id"]),
                   tick=float(raw["tick"]), run_id=raw["run_id"],
                   started_at=float(raw["started_at"]), dropped=int(raw["dropped"]),
                   samples=list(raw["samples"]), final=dict(raw["final"]))


class SpoolFullError(Exception):
    """The spool cannot take the run without passing its bound."""


class Spool:
    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        for leftover in directory.glob("*.tmp"):  # a write cut short by a crash
            leftover.unlink(missing_ok=True)
        self._sizes = {p: p.stat().st_size for p in directory.glob(f"*{SUFFIX}")}
        last = max((int(p.name.split("-", 1)[0]) for p in self._sizes), default=0)
        self._seq = itertools.count(last + 1)

    @property
    def bytes(self) -> int:
        return sum(self._sizes.values())

    @property
    def runs(self) -> int:
        return len(self._sizes)

    @property
    def accepting(self) -> bool:
        """Whether a new run may start: the spool is below 90 % of its bound."""
        return self.bytes < 0.9 * self.max_bytes

    def put(self, run: SpooledRun) -> Path:
        """Write the run durably (written whole, then renamed into place)."""
        data = run.pack()
        if self.bytes + len(data) > self.max_bytes:
            raise SpoolFullError(f"the spool holds {self.bytes} of {self.max_bytes} bytes")
        path = self.directory / f"{next(self._seq):012d}-{run.upload_id}{SUFFIX}"
        temporary = path.with_suffix(".tmp")
        with temporary.open("wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        temporary.replace(path)
        self._sizes[path] = len(data)
        return path

    def oldest(self) -> Iterator[tuple[Path, SpooledRun]]:
        """The runs held, oldest first (a file that cannot be read is set aside as
        `.bad`, never retried forever)."""
        for path in sorted(self._sizes):
            try:
                yield path, SpooledRun.unpack(path.read_bytes())
            except (OSError, ValueError, KeyError, TypeError, msgpack.UnpackException):
                path.replace(path.with_suffix(".bad"))
                self._sizes.pop(path, None)

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        self._sizes.pop(path, None)

    def run_ids(self) -> list[int]:
        """The claimed runs held (they ended, though the service still has them running)."""
        ids = []
        for path in sorted(self._sizes):
            try:
                run = SpooledRun.unpack(path.read_bytes())
            except (OSError, ValueError, KeyError, TypeError, msgpack.UnpackException):
                continue
            if run.run_id is not None:
                ids.append(run.run_id)
        return ids
