"""Reading Mooncake and Azure traces, and building each replayed request from its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sustain.probes.client.target import ApiKind
from sustain.probes.load.profiles import TraceProfile
from sustain.probes.load.stages import OpenStage
from sustain.probes.workers.shards import shard_stage
from sustain.probes.workload.dataset import DatasetError, DatasetPolicy
from sustain.probes.workload.requests import RequestBuilder
from sustain.probes.workload.spec import Workload
from sustain.probes.workload.traces import Replay, load_replay, load_trace

ANYWHERE = DatasetPolicy.unrestricted()


def mooncake(tmp_path: Path, rows: list[dict[str, object]]) -> str:
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    return str(path)


def test_a_mooncake_trace_gives_offsets_lengths_and_blocks(tmp_path: Path) -> None:
    path = mooncake(tmp_path, [
        {"timestamp": 1500, "input_length": 700, "output_length": 9, "hash_ids": [1, 2]},
        {"timestamp": 1000, "input_length": 300, "output_length": 5, "hash_ids": [1]},
        {"timestamp": 4000, "input_length": 0, "output_length": 0}])
    requests = load_trace(path, "mooncake", ANYWHERE)
    assert [r.offset_s for r in requests] == [0.0, 0.5, 3.0]
    assert [(r.input_tokens, r.output_tokens) for r in requests] == [(300, 5), (700, 9), (1, 1)]
    assert requests[1].hash_ids == (1, 2)


def test_an_azure_trace_reads_its_seven_digit_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-16 18:15:46.6805900,374,44\n"
                    "2023-11-16 18:15:50.9951690,396,109\n"
                    "2023-11-16 18:15:51,879,0\n")
    requests = load_trace(str(path), "azure", ANYWHERE)
    assert [round(r.offset_s, 6) for r in requests] == [0.0, 4.314579, 4.31941]
    assert [(r.input_tokens, r.output_tokens) for r in requests] == [(374, 44), (396, 109),
                                                                      (879, 1)]


@pytest.mark.parametrize(("fmt", "content", "message"), [
    ("mooncake", '{"timestamp": 1, "input_length": 5, "output_length": 1}\n{oops}\n',
     "trace:2: invalid JSON"),
    ("mooncake", '{"timestamp": -1, "input_length": 5, "output_length": 1}\n',
     "trace:1: 'timestamp'"),
    ("mooncake", '{"timestamp": 1, "input_length": "x", "output_length": 1}\n',
     "trace:1: 'input_length'"),
    ("azure", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,3\n", "the header needs"),
    ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,3,4\n", "trace:2: TIMESTAMP"),
    ("mooncake", "\n", "no requests"),
])
def test_a_bad_trace_names_its_line(tmp_path: Path, fmt: str, content: str,
                                    message: str) -> None:
    path = tmp_path / "trace"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        load_trace(str(path), fmt, ANYWHERE)  # type: ignore[arg-type]


def test_a_trace_outside_the_dataset_directory_is_refused(tmp_path: Path) -> None:
    path = mooncake(tmp_path, [{"timestamp": 0, "input_length": 1, "output_length": 1}])
    with pytest.raises(DatasetError, match=r"not allowed|SUSTAIN_DATASET_DIR"):
        load_trace(path, "mooncake", DatasetPolicy())


def test_the_stage_sends_at_the_sped_up_times_and_shards_keep_them(tmp_path: Path) -> None:
    path = mooncake(tmp_path, [{"timestamp": t, "input_length": 8, "output_length": 2}
                               for t in (0, 100, 250, 1000, 1010)])
    replay = load_replay(path, "mooncake", ANYWHERE, "defeat")
    (stage,) = TraceProfile(path=path, speedup=2.0).planned_stages(replay)
    assert isinstance(stage, OpenStage)
    assert list(stage.offsets()) == [0.0, 0.05, 0.125, 0.5, 0.505]
    union = sorted(o for shard in shard_stage(stage, 2) for o in shard.offsets())
    assert union == list(stage.offsets())
    capped = TraceProfile(path=path, max_requests=2).planned_stages(replay)[0]
    assert isinstance(capped, OpenStage)
    assert len(list(capped.offsets())) == 2


def test_each_request_has_its_line_s_lengths_and_shares_the_trace_s_blocks(
        tmp_path: Path) -> None:
    path = mooncake(tmp_path, [
        {"timestamp": 0, "input_length": 1024, "output_length": 7, "hash_ids": [10, 11]},
        {"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [10, 12]}])
    replay = load_replay(path, "mooncake", ANYWHERE, "defeat")
    builder = RequestBuilder(Workload(), ApiKind.OPENAI_COMPLETIONS, "m", ANYWHERE, replay)
    first, second = builder.body(0), builder.body(1)
    assert (first["max_tokens"], second["max_tokens"]) == (7, 3)
    a, b = str(first["prompt"]).split(), str(second["prompt"]).split()
    assert (len(a), len(b)) == (1024, 600)
    assert a[0] == b[0] == replay.salt  # one salt per run, first
    assert a[1:512] == b[1:512]  # block 10, shared
    assert a[512:] != b[512:600]
    other_run = RequestBuilder(Workload(), ApiKind.OPENAI_COMPLETIONS, "m", ANYWHERE,
                               load_replay(path, "mooncake", ANYWHERE, "defeat"))
    assert str(other_run.body(0)["prompt"]).split()[0] != replay.salt


def test_allowing_the_cache_replays_without_a_salt(tmp_path: Path) -> None:
    path = mooncake(tmp_path, [{"timestamp": 0, "input_length": 20, "output_length": 2}])
    replay = load_replay(path, "mooncake", ANYWHERE, "allow")
    assert replay == Replay(replay.requests, "")
