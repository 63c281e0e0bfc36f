"""The simulator's media routes: speech cut into chunks of whole samples, image and video
requests checked, a video job's content refused before it is completed and gone once deleted,
and each route's other methods refused."""

from __future__ import annotations

import httpx
import pytest

from sustain.simulator.config import SimulatorConfig
from sustain.simulator.image_generation import read_images
from sustain.simulator.server import BackgroundSimulator
from sustain.simulator.speech import BYTES_PER_MS, chunk_sizes, read_speech


def test_speech_is_cut_into_chunks_of_whole_samples() -> None:
    sizes = chunk_sizes(30, 10.0, 100.0)  # 300 ms in chunks of 100 ms
    assert sizes == [100 * BYTES_PER_MS] * 3
    assert sum(chunk_sizes(7, 10.0, 30.0)) == 70 * BYTES_PER_MS
    assert chunk_sizes(7, 10.0, 30.0)[-1] == 10 * BYTES_PER_MS
    assert chunk_sizes(0, 10.0, 30.0) == [2]  # at least one sample
    assert all(size % 2 == 0 for size in chunk_sizes(13, 3.3, 7.7))


@pytest.mark.parametrize("body", [
    {"voice": "alloy"}, {"input": "", "voice": "alloy"}, {"input": "hi"},
    {"input": "hi", "voice": "alloy", "response_format": "mp3"},
    {"input": "hi", "voice": "alloy", "stream_format": "ws"}])
def test_a_speech_request_it_cannot_speak_is_refused(body: dict[str, object]) -> None:
    assert isinstance(read_speech(body), str)


@pytest.mark.parametrize("body", [
    {}, {"prompt": "x", "n": 0}, {"prompt": "x", "n": 11}, {"prompt": "x", "n": True},
    {"prompt": "x", "response_format": "png"}, {"prompt": "x", "partial_images": 4}])
def test_an_images_request_out_of_bounds_is_refused(body: dict[str, object]) -> None:
    assert isinstance(read_images(body), str)


def test_a_video_jobs_content_waits_for_it_and_a_deleted_job_is_gone() -> None:
    config = SimulatorConfig(video_queue_ms=0, video_generation_ms=60_000, video_bytes=10)
    with BackgroundSimulator(config) as sim, httpx.Client(base_url=sim.base_url) as client:
        job = client.post("/videos", json={"model": "sora", "prompt": "a boat"}).json()
        assert job["status"] in ("queued", "in_progress")
        assert client.get(f"/videos/{job['id']}").json()["status"] == "in_progress"
        assert client.get(f"/videos/{job['id']}/content").status_code == 409
        assert client.delete(f"/videos/{job['id']}").json()["deleted"] is True
        assert client.get(f"/videos/{job['id']}").status_code == 404
        assert client.delete(f"/videos/{job['id']}/content").status_code == 404
        assert client.post("/videos", json={"model": "sora"}).status_code == 400


def test_a_completed_video_is_served_whole() -> None:
    config = SimulatorConfig(video_queue_ms=0, video_generation_ms=0, video_bytes=3_000_001)
    with BackgroundSimulator(config) as sim, httpx.Client(base_url=sim.base_url) as client:
        job = client.post("/videos", json={"model": "sora", "prompt": "a boat"}).json()
        content = client.get(f"/videos/{job['id']}/content")
        assert (content.status_code, len(content.content)) == (200, 3_000_001)
        assert content.headers["content-type"] == "video/mp4"


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/audio/speech"), ("GET", "/images/generations"), ("GET", "/videos"),
    ("PUT", "/videos/video_1")])
def test_a_media_routes_other_methods_are_refused(method: str, path: str) -> None:
    with BackgroundSimulator() as sim:
        assert httpx.request(method, sim.base_url + path).status_code == 405
