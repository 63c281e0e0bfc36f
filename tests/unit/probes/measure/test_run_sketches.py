"""What each sample adds to its run's sketches beyond the latencies: an item kind's items, a
transcription's real-time factor, a RAG question's retrieval verdict (even when its generation
then failed) and its stages, overhead included; so windows over many runs merge them."""

from __future__ import annotations

from dataclasses import replace

from sustain.probes.measure.run_sketches import metric_values, stage_sketches
from sustain.probes.measure.sample import ErrorClass, Sample
from tests.unit.probes.samples import sample


def values(s: Sample) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for metric, value in metric_values(s):
        found.setdefault(metric, []).append(value)
    return found


def test_an_item_kinds_items_and_a_transcriptions_rtf_are_sketched() -> None:
    embed = sample(ttft=None, tokens=0)
    embed = replace(embed, measurement=replace(embed.measurement, items=8))
    assert values(embed)["items"] == [8.0]
    heard = sample(e2e=500.0)
    heard = replace(heard, measurement=replace(heard.measurement, audio_s=2.0))
    assert values(heard)["rtf"] == [0.25]
    assert "items" not in values(heard)


def test_a_rag_requests_stages_and_overhead_are_sketched_in_ms() -> None:
    rag = sample(e2e=100.0)
    rag = replace(rag, measurement=replace(rag.measurement, hit=True, stages_ms=(
        ("embed", 10.0), ("retrieve", 1.0), ("rerank", 9.0), ("generate_ttft", 30.0),
        ("generate", 79.0))))
    found = values(rag)
    assert found["rag_embed"] == [10.0]
    assert found["rag_retrieve"] == [1.0]
    assert found["rag_rerank"] == [9.0]
    assert found["rag_gen_ttft"] == [30.0]
    assert found["rag_overhead"] == [1.0]  # 100 - (10 + 1 + 9 + 79)
    assert found["retrieval"] == [1.0]


def test_a_miss_is_sketched_even_when_the_generation_then_failed() -> None:
    rag = sample(e2e=100.0, error=ErrorClass.HTTP_5XX)
    rag = replace(rag, measurement=replace(rag.measurement, hit=False,
                                           stages_ms=(("embed", 10.0),)))
    found = values(rag)
    assert found["retrieval"] == [2.0]
    assert "rag_embed" not in found  # stage times of successful requests only


def test_the_retrieval_sketch_mean_is_one_plus_the_miss_share() -> None:
    hits = [True, True, True, False]
    samples = [replace(s, measurement=replace(s.measurement, hit=h))
               for s, h in zip((sample(k) for k in range(4)), hits, strict=True)]
    sketch = stage_sketches(samples)[(0, "retrieval")]
    assert sketch.mean == 1.25
