"""A dataset's own images: read once under the dataset policy, each request's salted (its
pixels the file's, but for a fresh 16 x 16 block in the bottom-left corner) unless the cache
is allowed (then the file's own bytes), reported by size, and refused naming the image when
it is outside the dataset directory, not an image, or too large."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from sustain.probes.client.target import ApiKind
from sustain.probes.workload.dataset import DatasetError, DatasetPolicy, load_jsonl
from sustain.probes.workload.images import SALT_SIDE
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import Workload


def picture(path: Path, width: int, height: int, kind: str = "PNG") -> np.ndarray:
    """An image file of random pixels; the pixels as written (lossless for PNG)."""
    pixels = np.random.default_rng(7).integers(0, 256, (height, width, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, format=kind)
    return pixels


def dataset(root: Path, *lines: dict[str, object]) -> Path:
    path = root / "lines.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def builder(path: Path, root: Path, cache: str = "defeat",
            kind: ApiKind = ApiKind.OPENAI_CHAT) -> RequestBuilder:
    workload = Workload(dataset=str(path), cache=cache, max_tokens=4)  # type: ignore[arg-type]
    return RequestBuilder(workload, kind, "m", DatasetPolicy(directory=root))


def sent_images(body: dict[str, object]) -> list[str]:
    messages = body["messages"]
    assert isinstance(messages, list)
    content = messages[-1]["content"]
    return [] if isinstance(content, str) else [
        part["image_url"]["url"] for part in content if part.get("type") == "image_url"]


def decoded(uri: str) -> tuple[str, np.ndarray]:
    head, _, data = uri.partition(",")
    with Image.open(io.BytesIO(base64.b64decode(data))) as image:
        return head, np.asarray(image.convert("RGB"))


def test_each_request_sends_the_files_pixels_with_a_fresh_salt_block(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    pixels = picture(tmp_path / "img" / "a.png", 40, 30)
    path = dataset(tmp_path, {"prompt": "what is this?", "images": ["img/a.png"]})
    requests = builder(path, tmp_path)
    first, second = (sent_images(requests.body(seq)) for seq in (0, 1))
    (head, one), (_, two) = decoded(first[0]), decoded(second[0])
    assert head == "data:image/png;base64"
    assert one.shape == pixels.shape
    above = 30 - SALT_SIDE
    assert (one[:above] == pixels[:above]).all()  # the file's pixels
    assert (one[above:, SALT_SIDE:] == pixels[above:, SALT_SIDE:]).all()
    assert not (one[above:, :SALT_SIDE] == two[above:, :SALT_SIDE]).all()  # fresh salt
    assert requests.image_size(0) == "40x30"


def test_with_the_cache_allowed_the_files_own_bytes_are_sent(tmp_path: Path) -> None:
    picture(tmp_path / "a.jpg", 64, 48, "JPEG")
    picture(tmp_path / "b.png", 32, 32)
    path = dataset(tmp_path, {"messages": [{"role": "user", "content": "compare"}],
                              "images": ["a.jpg", str(tmp_path / "b.png")]})
    requests = builder(path, tmp_path, cache="allow")
    uris = sent_images(requests.body(0))
    assert uris[0] == "data:image/jpeg;base64," + base64.b64encode(
        (tmp_path / "a.jpg").read_bytes()).decode()
    assert uris[1].startswith("data:image/png;base64,")
    assert requests.image_size(0) == "32x32+64x48"


def test_lines_without_images_send_none(tmp_path: Path) -> None:
    picture(tmp_path / "a.png", 20, 20)
    path = dataset(tmp_path, {"prompt": "with", "images": ["a.png"]}, {"prompt": "without"})
    requests = builder(path, tmp_path)
    by_prompt = {}
    for seq in range(2):
        body = requests.body(seq)
        by_prompt[json.dumps(body["messages"])[-40:]] = (sent_images(body),
                                                          requests.image_size(seq))
    assert sorted((len(uris), size) for uris, size in by_prompt.values()) == \
        [(0, None), (1, "20x20")]


def test_an_image_outside_the_dataset_dir_is_refused_naming_it(tmp_path: Path) -> None:
    inside = tmp_path / "data"
    inside.mkdir()
    picture(tmp_path / "secret.png", 20, 20)
    path = dataset(inside, {"prompt": "x", "images": ["../secret.png"]})
    with pytest.raises(DatasetError) as caught:
        builder(path, inside)
    assert "secret.png: not under SUSTAIN_DATASET_DIR" in str(caught.value)


@pytest.mark.parametrize(("make", "problem"), [
    (lambda p: p.write_text("not an image"), "not a readable image"),
    (lambda p: picture(p, 8, 20), "8x20; each side must be 16 to 4096 pixels"),
    (lambda p: Image.new("RGB", (20, 20)).save(p, format="BMP"), "BMP is not a PNG, JPEG"),
])
def test_a_file_that_is_no_usable_image_is_refused_naming_it(
        tmp_path: Path, make: object, problem: str) -> None:
    make(tmp_path / "x.img")  # type: ignore[operator]
    path = dataset(tmp_path, {"prompt": "x", "images": ["x.img"]})
    with pytest.raises(DatasetError) as caught:
        builder(path, tmp_path)
    assert f"image 'x.img': {problem}" in str(caught.value)


def test_a_lines_images_must_be_a_short_list_of_paths(tmp_path: Path) -> None:
    for bad in ("a.png", [1], ["a.png"] * 17):
        path = dataset(tmp_path, {"prompt": "x", "images": bad})
        with pytest.raises(DatasetError, match=r"lines.jsonl:1: 'images' must be a list"):
            load_jsonl(path)


def test_only_chat_kinds_read_a_datasets_images(tmp_path: Path) -> None:
    path = dataset(tmp_path, {"prompt": "x", "images": ["missing.png"]})
    requests = builder(path, tmp_path, kind=ApiKind.OPENAI_COMPLETIONS)
    assert requests.dataset_images is None
    assert requests.image_size(0) is None
