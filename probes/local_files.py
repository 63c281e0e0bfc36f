"""Reading local files that a caller named (secret files, datasets) without letting the name
reach further than intended: the path as it resolves (links followed) must lie under an allowed
directory, never under /proc, /sys or /dev, and the file is read up to a size cap, so a FIFO,
a device such as /dev/zero or a huge file cannot block or exhaust the process."""

from __future__ import annotations

import os
import stat
from pathlib import Path

SYSTEM_DIRS = ("/proc", "/sys", "/dev")
"""Never read, whatever directory is allowed: process environments, kernel state, devices."""


class FileRefusedError(ValueError):
    """The file is not one that may be read; the message says why, never its content."""


def real_path(path: str | Path) -> str:
    """`path` with every link that exists resolved (os.path.realpath; a missing tail is kept
    as written)."""
    return os.path.realpath(path)


def within(path: str | Path, directory: str | Path) -> bool:
    """Whether `path`, links resolved, is `directory` (links resolved) or under it."""
    real, root = real_path(path), real_path(directory)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def in_system_dir(path: str | Path) -> bool:
    """Whether `path`, as written or with links resolved, lies under /proc, /sys or /dev."""
    written = os.path.normpath(os.path.abspath(path))
    return any(p == d or p.startswith(d + os.sep)
               for p in (written, real_path(path)) for d in SYSTEM_DIRS)


def read_capped(path: str | Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`. FileRefusedError for anything else
    (a directory, FIFO, socket or device, or a larger file); OSError when it cannot be opened.
    Opened without blocking, so a FIFO is refused rather than waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefusedError("not a regular file")
        if info.st_size > max_bytes:
            raise FileRefusedError(f"larger than {max_bytes:,} bytes")
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise FileRefusedError(f"larger than {max_bytes:,} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)
