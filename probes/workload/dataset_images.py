"""A dataset's own images: the files its lines name (`"images": ["photos/cat.jpg"]`, relative
to the dataset's directory or absolute), read once before a run under the dataset policy
(each under SUSTAIN_DATASET_DIR, each within its size cap) and decoded with Pillow, so no
request pays for them on the loop that times requests. Each file is decoded once, however many
lines name it and however they spell its path (`./a.png`, `a//a.png`, a link, a hard link):
images are known by their file's identity (media.file_identity), and every spelling shares
the one decoded copy. What is decoded counts against the run's media bound (media.py,
SUSTAIN_MEDIA_MAX_DECODED_BYTES), and decoding stops as soon as it passes it.

Under `cache: defeat` (the default) an image is sent as a stored PNG of its own pixels with a
fresh random 16 x 16 block in its bottom-left corner (images.SaltedPng): no image cache (vLLM
hashes an image's pixels) can answer one request from another's. That PNG is larger than the
file (3 bytes a pixel), so the distinct images of a dataset hold at most MAX_TEMPLATE_PIXELS.
Under `cache: allow` the file's own bytes are sent, as a real client would send them.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from sustain.probes.workload.dataset import DatasetEntry, DatasetError, DatasetPolicy
from sustain.probes.workload.images import MAX_REQUEST_PIXELS, SALT_SIDE, SaltedPng
from sustain.probes.workload.media import FileIdentity, decoded_too_much, file_identity

MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp",
               "GIF": "image/gif"}
"""Formats a vision endpoint takes, by Pillow's name, with their media type."""
MAX_SIDE = 4096
"""Largest width or height of a dataset image (as of a synthetic one)."""
MAX_TEMPLATE_PIXELS = 32 * 1024 * 1024
"""Most pixels a dataset's distinct images may hold under `cache: defeat` (96 MiB of
templates)."""


@dataclass(frozen=True, slots=True)
class DatasetImage:
    """One image file, ready to send: salted pixels, or the file's own data URI."""

    width: int
    height: int
    template: SaltedPng | None
    original: str | None

    @property
    def held_bytes(self) -> int:
        """Bytes this image holds, shared by every request that sends it."""
        return self.template.held_bytes if self.template is not None \
            else len(self.original or "")

    @property
    def uri_bytes(self) -> int:
        """Length of the data URI each request sends of it."""
        return self.template.uri_bytes if self.template is not None \
            else len(self.original or "")

    def data_uri(self, rng: np.random.Generator) -> str:
        if self.template is not None:
            return self.template.salted(rng)
        assert self.original is not None
        return self.original


class DatasetImages:
    """The images of a dataset's lines, by the path each line wrote (spellings of one file
    share one DatasetImage)."""

    def __init__(self, images: dict[str, DatasetImage], decoded: int | None = None) -> None:
        self.images = images
        distinct = {id(image): image for image in images.values()}
        self.decoded = len(distinct) if decoded is None else decoded
        """Files decoded (once each, whatever their spellings)."""
        self.held_bytes = sum(image.held_bytes for image in distinct.values())
        """Bytes the decoded images hold, shared by every request."""

    def request_bytes(self, entries: Sequence[DatasetEntry]) -> int:
        """The most bytes of images one of `entries` sends with its request."""
        return max((sum(self.images[p].uri_bytes for p in entry.images) for entry in entries),
                   default=0)

    def of(self, entry: DatasetEntry) -> list[DatasetImage]:
        return [self.images[path] for path in entry.images]

    def data_uris(self, entry: DatasetEntry, rng: np.random.Generator) -> list[str]:
        return [image.data_uri(rng) for image in self.of(entry)]

    def size(self, entry: DatasetEntry) -> str | None:
        """The line's image sizes as reported (`WIDTHxHEIGHT`, distinct sizes joined by
        `+`); None for a line without images."""
        sizes = sorted({(i.width, i.height) for i in self.of(entry)})
        return "+".join(f"{w}x{h}" for w, h in sizes) or None


def load_dataset_images(entries: Sequence[DatasetEntry], dataset: str, policy: DatasetPolicy,
                        *, salted: bool) -> DatasetImages | None:
    """The images `entries` name, each read where `policy` allows and decoded; None when no
    line names one. DatasetError, naming the dataset and the image, for a file it may not read,
    one that is no PNG, JPEG, WebP or GIF, a side beyond MAX_SIDE or below 16 pixels, a line
    beyond MAX_REQUEST_PIXELS, or templates beyond MAX_TEMPLATE_PIXELS."""
    paths = list(dict.fromkeys(path for entry in entries for path in entry.images))
    if not paths:
        return None
    base = Path(dataset).parent
    images: dict[str, DatasetImage] = {}
    by_file: dict[FileIdentity | str, DatasetImage] = {}
    held = decoded = 0
    for path in paths:
        resolved = str(base / path)  # an absolute path stays itself under the dataset's base
        reason = policy.check(resolved)
        if reason is not None:
            raise DatasetError(f"{resolved}: {reason}")
        try:
            identity: FileIdentity | str = file_identity(resolved)
        except OSError:
            identity = resolved  # _load reads it next, and says why it cannot
        image = by_file.get(identity)
        if image is None:
            image = by_file[identity] = _load(path, resolved, dataset, policy, salted)
            held += image.width * image.height if salted else 0
            if held > MAX_TEMPLATE_PIXELS:
                raise DatasetError(f"{dataset}: its distinct images hold more than "
                                   f"{MAX_TEMPLATE_PIXELS} pixels, the most kept to salt "
                                   "(cache: defeat); use fewer or smaller images")
            decoded += image.held_bytes
            too_much = decoded_too_much(decoded, policy.run_workers, policy.media_max_bytes,
                                        f"{dataset}: its images")
            if too_much is not None:
                raise too_much
        images[path] = image
    for entry in entries:
        pixels = sum(images[p].width * images[p].height for p in entry.images)
        if pixels > MAX_REQUEST_PIXELS:
            raise DatasetError(f"{dataset}: a line's images hold {pixels} pixels; at most "
                               f"{MAX_REQUEST_PIXELS} go with one request")
    return DatasetImages(images, len(by_file))


def _load(path: str, resolved: str, dataset: str, policy: DatasetPolicy, salted: bool
          ) -> DatasetImage:
    data = policy.read(resolved)
    where = f"{dataset}: image {path!r}"
    try:
        with Image.open(io.BytesIO(data)) as image:
            media_type = MEDIA_TYPES.get(image.format or "")
            if media_type is None:
                raise DatasetError(f"{where}: {image.format} is not a PNG, JPEG, WebP or GIF")
            width, height = image.size  # read from the header: nothing decoded yet
            if not (SALT_SIDE <= width <= MAX_SIDE and SALT_SIDE <= height <= MAX_SIDE):
                raise DatasetError(f"{where}: {width}x{height}; each side must be "
                                   f"{SALT_SIDE} to {MAX_SIDE} pixels")
            pixels = np.asarray(image.convert("RGB"), dtype=np.uint8) if salted else None
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise DatasetError(f"{where}: not a readable image ({type(exc).__name__})") from None
    if pixels is not None:
        return DatasetImage(width, height, SaltedPng(width, height, pixels), None)
    uri = f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
    return DatasetImage(width, height, None, uri)
