"""`sustain probe` runs the RAG example of docs/protocols.md as written (its URLs pointed at
a simulator, its corpus at a file of the test's): the report has every stage, the overhead and
the hit rate; a bad corpus line is refused naming it, before anything is sent."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sustain.service.cli import app
from sustain.simulator.config import SimulatorConfig
from sustain.simulator.server import BackgroundSimulator

PROTOCOLS = Path(__file__).resolve().parents[3] / "docs" / "protocols.md"


@pytest.fixture(scope="module")
def simulator() -> Iterator[BackgroundSimulator]:
    config = SimulatorConfig(ttft_ms=5, itl_ms=1, output_tokens=8, item_ms=0.2,
                             embedding_dimensions=128)
    with BackgroundSimulator(config) as server:
        yield server


def documented_example() -> list[str]:
    text = PROTOCOLS.read_text()
    start = text.index("## RAG pipelines")
    block = re.search(r"```\n(sustain probe .*?)```", text[start:], flags=re.DOTALL)
    assert block is not None
    return shlex.split(block.group(1).replace("\\\n", " "))[1:]


def run(args: list[str], base_url: str, corpus: Path, datasets: Path) -> Any:
    """The example with its URLs at `base_url` and its corpus at `corpus`, datasets readable
    under `datasets` only."""
    args = [base_url if a == "http://127.0.0.1:8001/v1" else
            str(corpus) if a == "corpus.jsonl" else a for a in args]
    return CliRunner().invoke(app, [*args, "--max-requests", "6", "--json"],
                              env={"SUSTAIN_DATASET_DIR": str(datasets)})


def test_the_documented_example_measures_every_stage(simulator: BackgroundSimulator,
                                                 tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(
        {"id": f"doc-{k}", "text": " ".join(f"t{k}y{j}" for j in range(25))}) + "\n"
        for k in range(40)))
    args = documented_example()
    assert args[0] == "probe"
    result = run(args, simulator.base_url, tmp_path / "corpus.jsonl", tmp_path)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["successes"] == 6
    assert set(report["rag_stages_ms"]) == {"embed", "retrieve", "rerank", "generate_ttft",
                                            "generate", "overhead"}
    assert report["retrieval_checked"] == 6
    assert report["retrieval_hit_ratio"] is not None
    assert report["ttft_ms"]["count"] == 6


def test_a_corpus_line_without_text_is_refused_naming_it(simulator: BackgroundSimulator,
                                                         tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "a", "text": "words"}\n{"id": "b"}\n')
    result = run(documented_example(), simulator.base_url, corpus, tmp_path)
    assert result.exit_code == 2
    assert f"{corpus}:2: needs a non-empty 'text'" in result.output


def test_a_corpus_needs_its_embeddings_endpoint(simulator: BackgroundSimulator) -> None:
    result = CliRunner().invoke(app, ["probe", simulator.base_url, "--model", "m",
                                      "--rag-corpus", "c.jsonl"])
    assert result.exit_code == 2
    assert "--rag-embed-url is required with --rag-corpus" in result.output
