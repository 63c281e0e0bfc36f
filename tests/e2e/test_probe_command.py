"""`sustain probe` as a user runs it: the documented JSON keys, readable tables, clear errors
for bad flags, exit status 1 for an unreachable endpoint, and --save."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from sustain.probes.measure.percentiles import distribution
from tests.conftest import SimulatorHandle
from tests.e2e.test_serve import stored_samples
from tests.processes import SustainProcess, free_port, sustain_command

TOP_KEYS = {"requests", "successes", "availability", "errors", "requests_per_second",
            "output_tokens_per_second", "goodput", "generator_saturated", "lag_ms", "ttft_ms",
            "itl_ms", "tpot_ms", "e2e_ms", "corrected_e2e_ms", "stages", "cached_tokens",
            "cache_hit_ratio"}
LATENCY_KEYS = ("lag_ms", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "corrected_e2e_ms")
STAT_KEYS = {"p50", "p90", "p95", "p99", "p999", "max", "mean", "count"}


def probe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*sustain_command(), "probe", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_json_output_has_the_documented_keys(simulator: SimulatorHandle) -> None:
    done = probe(simulator.base_url, "--model", "m", "--profile", "steps", "--levels", "5,10",
                 "--duration", "1", "--slo-ttft-ms", "500", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) >= TOP_KEYS
    for key in LATENCY_KEYS:
        assert set(report[key]) >= STAT_KEYS
    assert report["requests"] == 15
    assert report["availability"] == 1.0
    assert report["goodput"] == pytest.approx(report["requests_per_second"])
    assert [s["requests"] for s in report["stages"]] == [5, 10]
    for stage in report["stages"]:
        assert TOP_KEYS - {"stages"} <= set(stage)
    assert report["ttft_ms"]["p50"] >= 50.0, "the simulator's TTFT is 50 ms"


def test_table_output_is_readable(simulator: SimulatorHandle) -> None:
    done = probe(simulator.base_url, "--model", "m", "--profile", "concurrency",
                 "--concurrency", "2", "--max-requests", "6")
    assert done.returncode == 0, done.stderr
    for text in ("results", "availability", "100.00%", "TTFT", "E2E", "latency (ms)"):
        assert text in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--profile", "constant"], "--rate is required"),
        (["--profile", "constant", "--rate", "-3"], "--rate"),
        (["--profile", "sweep", "--levels", "8,2"], "ascending"),
        (["--profile", "warp"], "--profile"),
        (["--header", "no-colon"], "--header"),
        (["--api-key-env", "SUSTAIN_SURELY_UNSET_VAR"], "SUSTAIN_SURELY_UNSET_VAR"),
        (["--profile", "constant", "--rate", "5000"], "--rate: 5,000 requests/s; at most 1,000"),
        (["--profile", "sweep", "--levels", "1,3000"], "--levels: the highest level is 3,000"),
        (["--profile", "constant", "--rate", "1", "--duration", "7200"], "--duration: "),
    ],
)
def test_bad_flags_give_a_message_and_exit_2(simulator: SimulatorHandle, args: list[str],
                                            message: str) -> None:
    done = probe(simulator.base_url, "--model", "m", *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_unreachable_endpoint_exits_1_and_counts_its_error_in_the_json() -> None:
    """(Its words on stderr are tests/e2e/test_cli_failure_walk.py's, with a URL typed without
    its scheme.)"""
    port = free_port()
    done = probe(f"http://127.0.0.1:{port}/v1", "--model", "m", "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["errors"] == {"connect": 1}


def test_a_base_url_without_v1_exits_1_with_the_status_url_and_a_hint(
        simulator: SimulatorHandle) -> None:
    """Every request got a 404 (the endpoint answered: not 'unreachable'), which used to
    exit 0 with only "errors http_4xx 1" to go on."""
    root = simulator.base_url.removesuffix("/v1")
    done = probe(root, "--model", "m")
    assert done.returncode == 1
    stderr = " ".join(done.stderr.split())
    assert f"the first: http_4xx (HTTP 404) from POST {root}/chat/completions" in stderr
    assert f"hint: most servers serve their API under /v1: try {root}/v1" in stderr


def test_save_stores_the_run(simulator: SimulatorHandle, database_url: str) -> None:
    env = {**os.environ, "SUSTAIN_DATABASE_URL": database_url}
    done = probe(simulator.base_url, "--model", "m", "--profile", "constant", "--rate", "10",
                 "--duration", "1", "--json", "--save", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    run_id = report["run_id"]



    samples = asyncio.run(stored_samples(database_url, int(run_id)))
    assert len(samples) == report["requests"] == 10


def test_http_probe_of_a_health_endpoint(simulator: SimulatorHandle) -> None:
    root = simulator.base_url.removesuffix("/v1")
    done = probe(f"{root}/health", "--api", "http", "--expect-body", "ok", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["availability"] == 1.0
    assert report["e2e_ms"]["count"] == 1
    missing_model = probe(simulator.base_url)
    assert missing_model.returncode == 2
    assert "--model is required" in missing_model.stderr


def test_two_workers_send_what_one_sends_with_percentiles_over_all_samples(
        simulator: SimulatorHandle, database_url: str) -> None:
    env = {**os.environ, "SUSTAIN_DATABASE_URL": database_url}
    flags = ["--model", "m", "--profile", "poisson", "--rate", "40", "--duration", "2",
             "--json", "--save"]
    one = json.loads(probe(simulator.base_url, *flags, env=env).stdout)
    done = probe(simulator.base_url, *flags, "--workers", "2", env=env)
    assert done.returncode == 0, done.stderr
    two = json.loads(done.stdout)
    assert two["requests"] == one["requests"] > 0
    samples = asyncio.run(stored_samples(database_url, int(two["run_id"])))
    assert len(samples) == two["requests"]
    ttft = distribution([float(s["ttft_ms"]) for s in samples if s["ttft_ms"] is not None])
    lag = distribution([float(s["lag_ms"]) for s in samples if s["lag_ms"] is not None])
    for quantile in ("p50", "p90", "p99"):
        assert two["ttft_ms"][quantile] == pytest.approx(getattr(ttft, quantile), abs=1e-9)
        assert two["lag_ms"][quantile] == pytest.approx(getattr(lag, quantile), abs=1e-9)
    # Saturated is the verdict of the run's own lag p99 against its threshold (5 ms at this
    # rate), whatever the lag came to on this machine; how low it stays with workers is
    # benchmarks/capacity.py's figure (--workers).
    assert two["generator_saturated"] == (two["lag_ms"]["p99"] > 5.0)


def test_prompts_are_salted_unless_the_cache_is_allowed(simulator: SimulatorHandle) -> None:
    """The simulator caches prompt prefixes: the same one-shot run twice reuses nothing by
    default, and (almost) the whole prompt with --allow-cache."""
    flags = ["--model", "m", "--profile", "concurrency", "--concurrency", "1",
             "--max-requests", "3", "--input-tokens", "64", "--json"]
    for extra, expected in (([], 0.0), (["--allow-cache"], 1.0)):
        reports = [json.loads(probe(simulator.base_url, *flags, *extra).stdout)
                   for _ in range(2)]
        assert reports[1]["cache_hit_ratio"] == expected, reports[1]
        assert reports[1]["cached_tokens"] == (0 if expected == 0.0 else 3 * 64)


def test_a_trace_is_replayed_from_the_command_line(simulator: SimulatorHandle,
                                                   tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps({"timestamp": 200 * i, "input_length": 10,
                                           "output_length": 1 + i}) for i in range(6)) + "\n")
    done = probe(simulator.base_url, "--model", "m", "--trace", str(trace), "--speedup", "4",
                 "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["requests"] == 6
    assert report["output_tokens"] == sum(range(1, 7))
    assert report["stages"][0]["label"] == "trace 6 requests x4"


def test_a_sessions_file_is_played_from_the_command_line_and_stored_by_turn(
        simulator: SimulatorHandle, database_url: str) -> None:
    example = Path(__file__).parents[2] / "examples" / "sessions" / "agentic.jsonl"
    env = {**os.environ, "SUSTAIN_DATABASE_URL": database_url}
    done = probe(simulator.base_url, "--model", "m", "--sessions", str(example),
                 "--profile", "concurrency", "--concurrency", "3", "--session-header",
                 "--json", "--save", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sessions"] == {"conversations": 3, "completed": 3, "turns": 9,
                                  "failed_turns": 0}
    assert [row["turn"] for row in report["turns_by_index"]] == [0, 1, 2]
    assert report["tool_call_ms"]["count"] == 1
    assert report["e2e_interactivity"] > 0
    samples = asyncio.run(stored_samples(database_url, int(report["run_id"])))
    turns = sorted((s["conversation"], s["turn"]) for s in samples)
    assert turns == sorted((c, t) for c in ("agent", "chat", "support") for t in range(3))
    assert sum(1 for s in samples if s["tool_call_ms"] is not None) == 1
    refused = probe(simulator.base_url, "--model", "m", "--turns", "2", "--profile",
                    "constant", "--rate", "1")
    assert refused.returncode == 2
    assert "--turns: sessions run under" in refused.stderr


def test_canaries_from_the_command_line_report_quality(simulator: SimulatorHandle) -> None:
    canaries = Path(__file__).parents[2] / "examples" / "datasets" / "canaries.jsonl"
    done = probe(simulator.base_url, "--model", "m", "--dataset", str(canaries), "--profile",
                 "concurrency", "--concurrency", "1", "--max-requests", "6", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["quality"] == {"checked": 5, "passed": 2, "ratio": 0.4}
    missing = probe(simulator.base_url, "--model", "m", "--dataset", "/nonexistent/c.jsonl")
    assert missing.returncode == 2
    assert "/nonexistent/c.jsonl: cannot read" in missing.stderr + missing.stdout


def test_capacity_pareto_and_efficiency_from_the_command_line(tmp_path: Path) -> None:
    """The simulator serves 8 generations at once: a TTFT p99 SLO of 200 ms passes 8 users
    and fails 9 on any machine (tests/integration/probes/test_capacity.py explains why noise
    cannot move this knee)."""
    port = free_port()
    with SustainProcess(["simulate", "--port", str(port), "--ttft-ms", "10", "--itl-ms", "60",
                         "--output-tokens", "16", "--max-batch", "8"],
                        tmp_path / "simulator.log") as simulator:
        simulator.wait_http(f"http://127.0.0.1:{port}/v1/models")
        base = f"http://127.0.0.1:{port}/v1"
        done = probe(base, "--model", "m", "--profile", "capacity", "--slo-ttft-ms", "200",
                     "--min-concurrency", "4", "--max-concurrency", "16", "--duration", "0.2",
                     "--output-tokens", "16",
                     "--accelerators", "4", "--price-per-hour", "12", "--power-kw", "2.5",
                     "--json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        capacity = report["capacity"]
        assert (capacity["max_passing"], capacity["first_failing"]) == (8, 9)
        tps = report["output_tokens_per_second"]
        efficiency = report["efficiency"]
        assert efficiency["output_tps_per_accelerator"] == pytest.approx(tps / 4)
        assert efficiency["output_tps_per_kw"] == pytest.approx(tps / 2.5)
        assert efficiency["cost_per_million_output_tokens"] == pytest.approx(
            12 / (tps * 3600) * 1e6)
        curve = probe(base, "--model", "m", "--profile", "pareto", "--max-concurrency", "16",
                      "--points", "7", "--duration", "0.5", "--output-tokens", "16", "--json")
        assert curve.returncode == 0, curve.stderr
        points = json.loads(curve.stdout)["pareto"]
        assert len(points) >= 7
        assert any(p["on_front"] for p in points)
        text = probe(base, "--model", "m", "--profile", "capacity", "--slo-ttft-ms", "200",
                     "--min-concurrency", "8", "--max-concurrency", "9", "--duration", "0.2",
                     "--output-tokens", "16")
        assert text.returncode == 0, text.stderr
        assert "capacity under SLO: 8" in text.stdout
    missing = probe("http://127.0.0.1:9/v1", "--model", "m", "--profile", "capacity")
    assert missing.returncode == 2
    assert "--max-concurrency is required" in missing.stderr
