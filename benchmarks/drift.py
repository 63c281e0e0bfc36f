"""Drift detection: time of `detect` on a week of one-minute runs, against the pure-Python
implementation it replaced, in the same run.

Generated p99 TTFT values (ms, lognormal run-to-run noise of 5 % around 250 ms): 10,080
baseline runs (7 days) and 1,440 recent runs (24 h), the API's and the alert findings'
default windows for a probe that runs every minute. Two series: one whose last 18 h are 20 %
slower, one flat. The baseline implementation is `service/evaluation/drift.py` as of
--baseline-rev, read with `git show` and loaded as a module of its own; both must give the
same verdict on both series.

Target: <= 200 ms per `detect`.

A whole report also reduces every run's stored sketches to its statistic before `detect` sees
it. The second table times that step (`run_window` over 11,520 one-stage runs of 100 samples
each) against the same step done with `probes/measure/sketch.py` as of --baseline-rev (its
SketchMerger rebuilt each run's sketch through ddsketch's decoder); both must give identical
run values.

    python benchmarks/drift.py [--repeat 7] [--baseline-repeat 3] [--no-record]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import record
from sustain.probes.measure.sketch import MetricSketch
from sustain.service.evaluation.drift import detect
from sustain.service.evaluation.drift_runs import SketchRow, run_window

ROOT = Path(__file__).resolve().parent.parent
BASELINE_REV = "66569bda49010eba68a27265df6880d488a1f5ce"
"""The last commit whose service/evaluation/drift.py is the pure-Python one."""
BASELINE_RUNS = 7 * 24 * 60
RECENT_RUNS = 24 * 60
STEP_AT = BASELINE_RUNS + 6 * 60
"""The shifted series: 20 % slower from 6 h into the recent day on."""
TARGET_MS = 200.0


def series(step: float, seed: int) -> list[float]:
    """Run-level p99 TTFT in ms, oldest first; from STEP_AT on multiplied by `step`."""
    rng = random.Random(seed)
    return [250.0 * (step if i >= STEP_AT else 1.0) * rng.lognormvariate(0, 0.05)
            for i in range(BASELINE_RUNS + RECENT_RUNS)]


def load_baseline(rev: str, path: str = "service/evaluation/drift.py",
                  name: str = "drift_baseline") -> types.ModuleType:
    """`path` at `rev`, executed as module `name`."""
    source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType(name)
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev[:10]}:{path}", "exec"), module.__dict__)
    return module


def timed(run: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    """`repeat` wall times of run() in ms, and its last result."""
    times = []
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = run()
        times.append((time.perf_counter() - t0) * 1000)
    return times, result


def sketch_rows(runs: int, seed: int) -> list[SketchRow]:
    """One stored TTFT sketch (100 samples, ms) per run, one run a minute, oldest first."""
    rng = random.Random(seed)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    return [(i + 1, start + timedelta(minutes=i),
             MetricSketch.of(250.0 * rng.lognormvariate(0, 0.3) for _ in range(100)).to_bytes())
            for i in range(runs)]


def baseline_run_values(sketch_module: types.ModuleType, rows: list[SketchRow]) -> list[float]:
    """Each run's p99 the way the baseline's sketches computed it (one run per row)."""
    values = []
    for _, _, data in rows:
        merger = sketch_module.SketchMerger()
        merger.add(data)
        values.append(float(merger.result().quantile(0.99)))
    return values


def reduction(rev: str, repeat: int) -> str:
    """The table of run values from sketches: this code against `rev`'s sketch module."""
    old_sketch = load_baseline(rev, "probes/measure/sketch.py", "sketch_baseline")
    rows = sketch_rows(BASELINE_RUNS + RECENT_RUNS, seed=3)
    new_ms, window = timed(partial(run_window, rows, "p99"), repeat)
    old_ms, old_values = timed(partial(baseline_run_values, old_sketch, rows), repeat)
    same = [v.value for v in window.values] == old_values
    print(f"run values from sketches: {statistics.median(new_ms):,.0f} ms, baseline "
          f"{statistics.median(old_ms):,.0f} ms, same values: {same}", flush=True)
    assert same, "run values differ from the baseline's"
    return (
        f"Run values from sketches: {len(rows):,} one-stage runs of 100 samples, "
        f"{repeat} calls each.\n\n"
        f"| step | median ms | max ms | baseline median ms | baseline max ms | "
        f"baseline / new | same run values |\n|---|---|---|---|---|---|---|\n"
        f"| run_window (p99) | **{statistics.median(new_ms):,.0f}** | {max(new_ms):,.0f} | "
        f"{statistics.median(old_ms):,.0f} | {max(old_ms):,.0f} | "
        f"{statistics.median(old_ms) / statistics.median(new_ms):.1f}x | "
        f"{'yes' if same else 'NO'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-rev", default=BASELINE_REV,
                        help="commit whose service/evaluation/drift.py is the baseline")
    parser.add_argument("--repeat", type=int, default=7, help="timed calls of detect")
    parser.add_argument("--baseline-repeat", type=int, default=3,
                        help="timed calls of the baseline (seconds each)")
    parser.add_argument("--reduction-repeat", type=int, default=3,
                        help="timed calls of the run-value reduction (about a second each)")
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args()

    baseline = load_baseline(args.baseline_rev)
    old_detect: Callable[..., Any] = baseline.detect
    cases = {"20 % slower from run 10,440": series(1.2, seed=1), "flat": series(1.0, seed=2)}
    rows = []
    verdicts = []
    new_all: list[float] = []
    old_all: list[float] = []
    for name, values in cases.items():
        before, recent = values[:BASELINE_RUNS], values[BASELINE_RUNS:]
        detect(before, recent)  # warm-up (imports, first allocations)
        new_ms, new = timed(partial(detect, before, recent), args.repeat)
        old_ms, old = timed(partial(old_detect, before, recent), args.baseline_repeat)
        new_all += new_ms
        old_all += old_ms
        same = new.verdict == old.verdict
        verdicts.append(same)
        rows.append(
            f"| {name} | **{statistics.median(new_ms):.1f}** | {max(new_ms):.1f} | "
            f"{statistics.median(old_ms):,.0f} | {max(old_ms):,.0f} | "
            f"{statistics.median(old_ms) / statistics.median(new_ms):,.0f}x | "
            f"{new.verdict} / {old.verdict} | {new.change_index} / {old.change_index} | "
            f"{new.ci_low:.4f}-{new.ci_high:.4f} / {old.ci_low:.4f}-{old.ci_high:.4f} |")
        print(f"{name}: detect {statistics.median(new_ms):.1f} ms, baseline "
              f"{statistics.median(old_ms):,.0f} ms", flush=True)

    median_new, median_old = statistics.median(new_all), statistics.median(old_all)
    body = (
        f"`detect` on {BASELINE_RUNS:,} baseline + {RECENT_RUNS:,} recent run-level values "
        f"(7 d / 24 h of one-minute runs, generated p99 TTFT), {args.repeat} calls per series "
        f"after a warm-up; baseline: the pure-Python `service/evaluation/drift.py` of "
        f"{args.baseline_rev[:10]} (`git show`), {args.baseline_repeat} calls per series, "
        f"same process. Times in ms; this machine's 2 cores are shared.\n\n"
        f"| series | detect median | detect max | baseline median | baseline max | "
        f"baseline / detect | verdict (new / baseline) | change index | 95 % CI of ratio |\n"
        f"|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        f"All calls: detect median **{median_new:.1f} ms**, max {max(new_all):.1f} ms; "
        f"baseline median {median_old:,.0f} ms; ratio to baseline "
        f"**{median_old / median_new:,.0f}x** faster. Same verdicts: "
        f"{'yes' if all(verdicts) else 'NO'}.\n\n"
        f"Target: <= {TARGET_MS:.0f} ms per detect (max {max(new_all):.1f} ms: "
        f"{'met' if max(new_all) <= TARGET_MS else 'missed'}).\n\n"
        + reduction(args.baseline_rev, args.reduction_repeat))
    if args.no_record:
        print(body)
    else:
        record("drift: detect on 7 days of one-minute runs", "python " + " ".join(sys.argv),
               body, headline=f"detect median {median_new:.1f} ms, max {max(new_all):.1f} ms",
               ratio=f"{median_old / median_new:,.0f}x faster than the pure-Python detect")
    assert all(verdicts), "the new detect and the baseline disagree on a verdict"


if __name__ == "__main__":
    main()
