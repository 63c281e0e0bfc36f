"""How much decoded media (images and audio) a run holds at once, and the bound on it.

A run decodes each of its media once per worker process and shares that copy between all its
users: a synthetic image's template, a synthetic clip, and each image file a dataset names,
decoded once however its path is spelled (`./a.png`, `a//a.png`, a link, a hard link: one file,
known by its identity, `file_identity`). Each request then sends a salted copy: while it is in
flight it holds its body, and its connection may hold another copy until the socket has taken
it (REQUEST_COPIES). So a run holds at most

    workers x shared + peak requests in flight x REQUEST_COPIES x largest request's media

bytes of media, and that must stay within the policy's `media_max_bytes`
(SUSTAIN_MEDIA_MAX_DECODED_BYTES): beyond it the run fails before it sends anything, naming
the variable, rather than taking the memory. Decoding itself stops as soon as what one worker
has decoded passes its share. Pure but for `file_identity`'s stat.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sustain.probes.workload.dataset import DatasetError

MEDIA_VARIABLE = "SUSTAIN_MEDIA_MAX_DECODED_BYTES"
REQUEST_COPIES = 2
"""Copies of its media a request in flight may hold: its encoded body, and the connection's
write buffer until the socket takes the bytes."""


class MediaLimitError(DatasetError):
    """The run would hold more decoded media than the policy allows; the message names
    SUSTAIN_MEDIA_MAX_DECODED_BYTES."""


@dataclass(frozen=True, slots=True)
class MediaHeld:
    """One worker's media for a run, in bytes."""

    shared: int = 0
    """Decoded once and shared by every request (templates, clips, dataset images)."""
    per_request: int = 0
    """The most media one request's body carries (its salted images or audio)."""


FileIdentity = tuple[int, int, int, int]
"""(device, inode, size, mtime in ns) of a file: the same for every path that names it."""


def file_identity(path: str) -> FileIdentity:
    """The identity of the file `path` names, links followed; OSError when it cannot be
    stat'ed (the caller reads it next and reports that error)."""
    info = os.stat(path)
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def run_media_bytes(held: MediaHeld, users: int, workers: int) -> int:
    """Bytes of media a run holds at once at its peak: every worker's shared copies, and
    every request in flight's own."""
    return workers * held.shared + users * REQUEST_COPIES * held.per_request


def media_problem(held: MediaHeld, users: int, workers: int, limit: int) -> str | None:
    """Why a run of `users` requests in flight over `workers` workers may not hold this
    media, or None."""
    total = run_media_bytes(held, users, workers)
    if total <= limit:
        return None
    return (f"the run would hold {total:,} bytes of decoded images and audio ({workers} "
            f"worker(s) x {held.shared:,} shared, {users} request(s) in flight x "
            f"{REQUEST_COPIES} x {held.per_request:,}), more than the {limit:,} of "
            f"{MEDIA_VARIABLE}: use fewer users, shorter audio or smaller images")


def decoded_too_much(decoded: int, workers: int, limit: int, what: str) -> MediaLimitError | None:
    """The error for a worker that has decoded `decoded` bytes of `what` while its share of
    the run's bound is limit / workers, or None while it is within it."""
    if decoded * workers <= limit:
        return None
    return MediaLimitError(f"{what}: decoded images and audio beyond the {limit:,} bytes of "
                           f"{MEDIA_VARIABLE} ({decoded:,} bytes in each of {workers} "
                           "worker(s))")
