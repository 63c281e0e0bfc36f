"""Reading video jobs: a job's answers checked (status code, JSON, a known status, a usable
id), a failed job's reason kept short, the request's shape; and the simulator's jobs, whose
status and progress follow the clock."""

from __future__ import annotations

import json

import pytest

from sustain.probes.measure.sample import ErrorClass
from sustain.probes.protocols.base import Answer
from sustain.probes.protocols.openai_videos import (
    JOB_ID,
    MAX_DETAIL_CHARS,
    OPENAI_VIDEOS,
    Job,
    JobEnded,
    failure_detail,
    job_status,
)
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import Workload
from sustain.service.cli.probe_flags import ProbeFlags, kind_workload
from sustain.simulator.videos import VideoJobs, video_route


def answer(payload: object, status: int = 200) -> Answer:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return Answer(status, "application/json", body, len(body), 5_000_000)


def test_a_known_status_is_read() -> None:
    job = Job(t_send_ns=0)
    assert job_status(answer({"id": "video_1", "status": "queued"}), job, "x")["status"] == \
        "queued"
    assert job.status == 200


@pytest.mark.parametrize(("reply", "expected", "detail"), [
    (answer({"error": {"message": "slow down"}}, 429), ErrorClass.HTTP_429,
     "HTTP 429 polling"),
    (answer({"error": {}}, 500), ErrorClass.HTTP_5XX, "HTTP 500 polling"),
    (answer(b"<html>"), ErrorClass.PROTOCOL, "malformed JSON response polling"),
    (answer({"status": "cancelled"}), ErrorClass.PROTOCOL, "job status 'cancelled' polling"),
    (answer({"id": "v"}), ErrorClass.PROTOCOL, "job status 'None' polling"),
])
def test_an_answer_that_is_no_job_ends_the_job(reply: Answer, expected: ErrorClass,
                                               detail: str) -> None:
    with pytest.raises(JobEnded) as ended:
        job_status(reply, Job(t_send_ns=0), "polling")
    m = ended.value.measurement
    assert m.error_class is expected
    assert m.error_detail is not None
    assert m.error_detail.startswith(detail)
    assert m.e2e_ms == 5.0  # ended when that answer arrived


def test_a_failed_jobs_reason_is_its_code_kept_short() -> None:
    assert failure_detail({"error": {"code": "moderation_blocked"}}) == \
        "job failed: moderation_blocked"
    assert failure_detail({"error": {"message": "x" * 500}}) == \
        "job failed: " + "x" * MAX_DETAIL_CHARS
    assert failure_detail({}) == "job failed"


@pytest.mark.parametrize(("job_id", "usable"), [
    ("video_68d7512d07848190b3e45da0ecbebcde", True), ("a.b-c~d_e", True),
    ("../content", False), ("a/b", False), ("a b", False), ("", False), ("x" * 257, False),
    ("v?x=1", False)])
def test_only_an_id_that_can_go_in_a_path_as_it_is_is_used(job_id: str, usable: bool) -> None:
    assert bool(JOB_ID.match(job_id)) is usable


def test_a_video_request_carries_its_prompt_and_no_output_cap_or_stream() -> None:
    body = RequestBuilder(Workload(prompt="a fox", extra_body={"seconds": "8"},
                                   cache="allow"), OPENAI_VIDEOS.kind, "sora-2").body(0)
    assert body == {"model": "sora-2", "prompt": "a fox", "seconds": "8"}
    assert OPENAI_VIDEOS.exchanged
    assert not OPENAI_VIDEOS.first_token


def test_the_kinds_flags_become_the_workloads_fields() -> None:
    flags = ProbeFlags.parse({"base_url": "http://h/v1", "model": "m", "voice": "nova",
                              "audio_format": "wav", "stream_format": "sse",
                              "output_images": 3, "output_image_size": "512x512",
                              "partial_images": 2, "poll_interval": 0.25})
    workload = Workload(**kind_workload(flags))
    assert (workload.voice, workload.audio_format, workload.stream_format) == \
        ("nova", "wav", "sse")
    assert (workload.output_images, workload.output_image_size, workload.partial_images) == \
        (3, "512x512", 2)
    assert workload.poll_interval_s == 0.25
    assert Workload(**kind_workload(ProbeFlags.parse(
        {"base_url": "http://h/v1", "model": "m"}))) == Workload()


@pytest.mark.parametrize("interval_s", [0.01, 61.0])
def test_a_poll_interval_is_bounded(interval_s: float) -> None:
    with pytest.raises(ValueError, match="poll_interval_s"):
        Workload(poll_interval_s=interval_s)


def test_a_simulated_jobs_status_and_progress_follow_the_clock() -> None:
    job = VideoJobs().create("sora", "4", "720x1280", queue_s=1.0, generation_s=2.0,
                             fails=False, request_id="r")
    at = job.created
    assert [job.view(at + s)["status"] for s in (0.5, 1.5, 3.5)] == \
        ["queued", "in_progress", "completed"]
    assert [job.view(at + s)["progress"] for s in (0.5, 2.0, 3.5)] == [0, 50, 100]
    failing = VideoJobs().create("sora", "4", "720x1280", queue_s=0.0, generation_s=0.0,
                                 fails=True, request_id=None)
    assert failing.view(failing.created + 1)["status"] == "failed"


def test_the_simulator_routes_a_jobs_paths_only() -> None:
    assert video_route("/v1/videos/video_1", "/v1/videos") == ("video_1", False)
    assert video_route("/v1/videos/video_1/content", "/v1/videos") == ("video_1", True)
    for path in ("/v1/videos", "/v1/videos/", "/v1/videos/a/b", "/v1/videosx/a"):
        assert video_route(path, "/v1/videos") is None
