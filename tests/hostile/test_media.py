"""Images and audio a run decodes: one image file named ten ways (`./a.png`, `a//a.png`, a
link, a hard link, its absolute path...) is decoded once and shared by every spelling, so the
process grows by about one image, not ten; and a run that would hold more decoded media than
SUSTAIN_MEDIA_MAX_DECODED_BYTES over all its users (24 users x 600 s of audio against 256 MiB,
64 users against the default 1 GiB) fails before it
sends anything, naming the variable, rather than taking the memory."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import os
import tracemalloc
from pathlib import Path

import httpx
import numpy as np
import psutil
import pytest
from PIL import Image

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import ConcurrencyProfile
from sustain.probes.runner import execute
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.media import MEDIA_VARIABLE, MediaLimitError
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import Workload
from tests.integration.service.helpers import create_endpoint, create_probe, wait_for_run

MiB = 1024 * 1024
SIDE = 2048
"""A 2048 x 2048 image: some 17 MiB held as its salting template."""


LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def rss() -> int:
    """The process's resident bytes, after handing back what the allocator holds free (a
    decode's passing copies leave several images' worth in glibc's heap otherwise)."""
    gc.collect()
    LIBC.malloc_trim(0)
    return int(psutil.Process().memory_info().rss)


def spellings(root: Path) -> list[str]:
    """Ten ways to name root/img/a.png from a dataset in `root`."""
    (root / "img").mkdir()
    pixels = np.random.default_rng(0).integers(0, 256, (SIDE, SIDE, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(root / "img" / "a.png", compress_level=0)
    (root / "link.png").symlink_to(root / "img" / "a.png")
    (root / "dir").symlink_to(root / "img")
    os.link(root / "img" / "a.png", root / "hard.png")
    return ["img/a.png", "./img/a.png", "img//a.png", "img/./a.png", "img/../img/a.png",
            "link.png", "dir/a.png", "hard.png", str(root / "img" / "a.png"),
            "./dir//./a.png"]


def test_an_image_spelled_ten_ways_is_decoded_once(tmp_path: Path) -> None:
    names = spellings(tmp_path)
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": f"q{k}", "images": [name]}) + "\n"
                               for k, name in enumerate(names)))
    policy = DatasetPolicy(directory=tmp_path)
    before = rss()
    tracemalloc.start()
    builder = RequestBuilder(Workload(dataset=str(dataset)), ApiKind.OPENAI_CHAT, "m", policy)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    grown = rss() - before
    images = builder.dataset_images
    assert images is not None
    assert len(images.images) == 10  # every spelling is answered...
    assert images.decoded == 1  # ...by one decode
    assert len({id(image) for image in images.images.values()}) == 1
    one = images.held_bytes
    assert one > SIDE * SIDE * 3  # the template: the pixels as a stored PNG, in base64
    assert builder.media.shared == one
    assert held < 2 * one, (held, one)  # ten decodes would hold ten times one
    assert grown < 3 * one, (grown, one)


def test_a_file_swapped_for_another_is_another_image(tmp_path: Path) -> None:
    for name, side in (("a.png", 32), ("b.png", 64)):
        Image.new("RGB", (side, side)).save(tmp_path / name)
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"prompt": "q", "images": ["a.png", "./b.png"]}) + "\n")
    builder = RequestBuilder(Workload(dataset=str(dataset)), ApiKind.OPENAI_CHAT, "m",
                             DatasetPolicy(directory=tmp_path))
    assert builder.dataset_images is not None
    assert builder.dataset_images.decoded == 2


def test_decoding_stops_once_a_datasets_images_pass_the_bound(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    for k in range(8):
        Image.fromarray(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)).save(
            tmp_path / f"{k}.png", compress_level=0)
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": "q", "images": [f"{k}.png"]}) + "\n"
                               for k in range(8)))
    # each image holds about 1 MiB salted: the third passes a 2.5 MiB bound
    with pytest.raises(MediaLimitError, match=MEDIA_VARIABLE) as failed:
        RequestBuilder(Workload(dataset=str(dataset)), ApiKind.OPENAI_CHAT, "m",
                       DatasetPolicy(directory=tmp_path, media_max_bytes=5 * MiB // 2))
    held = int(str(failed.value).split("(")[1].split()[0].replace(",", ""))
    assert held < 4 * MiB  # it stopped at the third of eight


def test_the_audio_of_24_users_of_600_s_fails_the_run_naming_the_bound() -> None:
    workload = Workload(audio_s=600)
    policy = DatasetPolicy(media_max_bytes=256 * MiB)
    before = rss()
    with pytest.raises(MediaLimitError, match=MEDIA_VARIABLE) as failed:
        RequestBuilder(workload, ApiKind.OPENAI_TRANSCRIPTIONS, "m", policy.for_run(24))
    assert "24 request(s) in flight" in str(failed.value)
    assert rss() - before < 64 * MiB  # one 19 MiB clip was made, never 24 copies
    # a few users share the one clip within the bound
    builder = RequestBuilder(Workload(audio_s=60), ApiKind.OPENAI_TRANSCRIPTIONS, "m",
                             policy.for_run(24))
    assert builder.media.shared == builder.media.per_request == 44 + 60 * 16_000 * 2


async def test_a_run_beyond_the_media_bound_sends_nothing() -> None:
    # nothing listens on port 9: a run that sent a request would record a connect error
    target = Target(base_url="http://127.0.0.1:9/v1", api_kind=ApiKind.OPENAI_TRANSCRIPTIONS,
                    model="m")
    async with HttpClients() as clients:
        with pytest.raises(MediaLimitError, match=MEDIA_VARIABLE):
            await execute(clients, target, Workload(audio_s=600),
                          ConcurrencyProfile(users=24, max_requests=24),
                          datasets=DatasetPolicy(media_max_bytes=256 * MiB))


async def test_through_the_service_the_run_fails_naming_the_variable(
        api: httpx.AsyncClient) -> None:
    endpoint = await create_endpoint(api, "http://127.0.0.1:9/v1",
                                     api_kind="openai-transcriptions")
    # disabled: its schedule never starts a run beside the one asked for here
    probe = await create_probe(api, endpoint["id"], enabled=False, workload={"audio_s": 600},
                               profile={"kind": "concurrency", "users": 64,
                                        "max_requests": 64, "workers": 2})
    started = await api.post(f"/api/v1/probes/{probe['id']}/runs")
    assert started.status_code == 202, started.text
    run_id = int(started.json()["id"])
    run = await wait_for_run(api, run_id)
    assert run["status"] == "failed"
    assert MEDIA_VARIABLE in run["error"]
    assert "2 worker(s)" in run["error"]
    samples = (await api.get(f"/api/v1/runs/{run['id']}/samples")).json()
    assert samples["items"] == []
