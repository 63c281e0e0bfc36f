"""Does a RAG probe's time add up? Each request's stages (embed and rerank until their answer
was read, retrieve, generate) against its end-to-end time from the question: the difference is
the pipeline's own work between stages (choosing passages, building the next request), which a
user's wait includes but no stage shows. Target: at most 1 ms per request, at
concurrency 1 and 16. Also printed: each stage's median and the retrieval hit rate.

The simulator runs in its own process on the other core: embeddings (hashed words, 256
dimensions), rerank (shared words) and a streamed chat (50 ms TTFT, 64 tokens at 10 ms) over a
corpus of 500 passages; every request retrieves 8 and keeps 3 after reranking.

    python benchmarks/rag.py [--requests 100,320] [--no-record]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Simulator, pin_to, record
from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, RagEndpoints, Target
from sustain.probes.load.profiles import ConcurrencyProfile
from sustain.probes.measure.percentiles import quantile
from sustain.probes.runner import RunResult, execute
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload

LEVELS = (1, 16)
PASSAGES = 500


def corpus(path: Path) -> None:
    path.write_text("".join(json.dumps({"id": f"p{k}", "text": " ".join(
        f"w{k}x{j}" for j in range(60))}) + "\n" for k in range(PASSAGES)))


async def run(base_url: str, concurrency: int, requests: int, corpus_path: Path
              ) -> RunResult:
    def at(kind: ApiKind) -> Target:
        return Target(base_url=base_url, api_kind=kind, model="sim")

    target = Target(base_url=base_url, api_kind=ApiKind.OPENAI_CHAT, model="sim",
                    rag=RagEndpoints(embed=at(ApiKind.OPENAI_EMBEDDINGS),
                                     rerank=at(ApiKind.RERANK)))
    workload = Workload.model_validate({"max_tokens": 64, "rag": {
        "corpus": str(corpus_path), "top_k": 8, "rerank_top_n": 3}})
    async with HttpClients(concurrency * 3) as clients:
        await execute(clients, target, workload, ConcurrencyProfile(
            users=concurrency, max_requests=concurrency), datasets=DatasetPolicy.unrestricted())
        return await execute(clients, target, workload, ConcurrencyProfile(
            users=concurrency, max_requests=requests), datasets=DatasetPolicy.unrestricted())


def row(concurrency: int, result: RunResult) -> str:
    overheads: list[float] = []
    stages: dict[str, list[float]] = {}
    for sample in result.samples:
        m = sample.measurement
        if m.error_class is not None or m.stages_ms is None:
            continue
        timed = dict(m.stages_ms)
        for name, ms in timed.items():
            stages.setdefault(name, []).append(ms)
        overheads.append(m.e2e_ms - sum(ms for name, ms in timed.items()
                                        if name != "generate_ttft"))
    overheads.sort()
    medians = " | ".join(f"{quantile(sorted(stages[name]), 0.5):.2f}" for name in (
        "embed", "retrieve", "rerank", "generate_ttft", "generate"))
    e2e = sorted(s.e2e_ms for s in result.samples if s.measurement.error_class is None)
    return (f"| {concurrency} | {len(overheads)} | {quantile(overheads, 0.5):.3f} | "
            f"{quantile(overheads, 0.99):.3f} | {overheads[-1]:.3f} | {medians} | "
            f"{quantile(e2e, 0.5):.2f} | {result.summary.retrieval_hit_rate:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", default="100,320",
                        help="requests at concurrency 1 and 16")
    parser.add_argument("--no-record", action="store_true", help="do not append RESULTS.md")
    args = parser.parse_args()
    counts = [int(n) for n in args.requests.split(",")]
    pin_to(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.jsonl"
        corpus(path)
        with Simulator(["--ttft-ms", "50", "--itl-ms", "10", "--output-tokens", "64",
                        "--item-ms", "0.5", "--embedding-dimensions", "256"], cpu=1) as sim:
            for concurrency, count in zip(LEVELS, counts, strict=True):
                result = uvloop.run(run(sim.base_url, concurrency, count, path))
                rows.append(row(concurrency, result))
    table = ("Per request, E2E from the question minus its stages (embed + retrieve + rerank "
             "+ generate), ms: median | p99 | max; then each stage's median (ms), the "
             "pipeline's E2E median and the retrieval hit rate:\n\n"
             "| concurrency | requests | overhead median | overhead p99 | overhead max | "
             "embed | retrieve | rerank | generate TTFT | generate | E2E | hit rate |\n"
             "|---|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows))
    command = f"python benchmarks/rag.py --requests {args.requests}"
    if args.no_record:
        print(table)
    else:
        record("RAG: stages against end to end", command,
               table + "\n\nTarget: overhead at most 1 ms per request. No baseline runs "
               "beside it: the figure compares each request's stages with its own end-to-end "
               "time.")


if __name__ == "__main__":
    main()
