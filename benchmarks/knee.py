"""Does the capacity search find the knee? The simulator serves `batch` generations at once and
queues the rest; a TTFT p99 SLO between the unqueued TTFT and a queued request's must put the
capacity exactly at the batch limit. The search (doubling from --minimum, then bisection, as
`capacity` profiles do) runs --runs times per setting, in one client process, and prints the
knee it found each time against the expected one.

Two settings, each at 8 slots and at 4 (a noisy neighbour halving the batch):

- `tight` is what the tests used before: 20 ms TTFT, 16 tokens 5 ms apart, a 60 ms SLO and
  0.6 s a level. A queued request waits up to a generation (95 ms), so past the knee TTFT is
  ~115 ms, and below it a stall of 40 ms on the client or the simulator fails a level: on a
  busy machine the knee moves (one clean CI run found [8, 7, 8]).
- `tests` is what tests/integration/probes/test_capacity.py, tests/e2e/test_capacity_drop.py
  and tests/e2e/test_probe_command.py use now: 10 ms TTFT, 16 tokens 60 ms apart, a 200 ms
  SLO, 0.2 s a level (one request per user). Below the knee a level fails only on a stall of
  190 ms; past it a queued request's TTFT is at least ~920 ms by the simulator's deadlines,
  so noise can only make the verdict more certain.

For each setting the table shows the knees found, how many were exact, and the margins: the
highest TTFT p99 of a level at or below the knee (must stay under the SLO) and the lowest of a
level above it (must stay over).

    python benchmarks/knee.py [--runs 5] [--settings tight,tests] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Simulator, record
from sustain.probes.client.clients import HttpClients
from sustain.probes.client.target import ApiKind, Target
from sustain.probes.load.profiles import CapacityProfile
from sustain.probes.measure.capacity import CapacityResult
from sustain.probes.measure.capacity_slo import CapacitySlo
from sustain.probes.runner import execute
from sustain.probes.workload.spec import Workload

TOKENS = 16


@dataclass(frozen=True, slots=True)
class Setting:
    ttft_ms: float
    itl_ms: float
    slo_ms: float
    level_s: float
    minimum: int
    maximum: int


SETTINGS = {
    "tight": Setting(ttft_ms=20, itl_ms=5, slo_ms=60, level_s=0.6, minimum=2, maximum=16),
    "tests": Setting(ttft_ms=10, itl_ms=60, slo_ms=200, level_s=0.2, minimum=4, maximum=9),
}
BATCHES = (8, 4)


async def search(base_url: str, setting: Setting) -> CapacityResult:
    target = Target(base_url=base_url, api_kind=ApiKind.OPENAI_CHAT, model="m")
    profile = CapacityProfile(slo=CapacitySlo(ttft_ms=setting.slo_ms), minimum=setting.minimum,
                              maximum=setting.maximum, duration_s=setting.level_s)
    async with HttpClients() as clients:
        result = await execute(clients, target, Workload(max_tokens=TOKENS), profile)
    assert result.capacity is not None
    return result.capacity


def row(name: str, setting: Setting, batch: int, found: list[CapacityResult]) -> str:
    knees = [c.max_passing for c in found]
    exact = sum(k == batch for k in knees)
    below = [p.ttft_p99_ms for c in found for p in c.points
             if p.level <= batch and p.ttft_p99_ms is not None]
    above = [p.ttft_p99_ms for c in found for p in c.points
             if p.level > batch and p.ttft_p99_ms is not None]
    worst_below = f"{max(below):.1f}" if below else "-"
    best_above = f"{min(above):.1f}" if above else "-"
    return (f"| {name} | {setting.ttft_ms:g} / {setting.itl_ms:g} | {setting.slo_ms:g} | "
            f"{batch} | {batch} | {knees} | {exact}/{len(knees)} | {worst_below} | "
            f"{best_above} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="searches per setting and batch")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args()
    rows = []
    exact = searches = 0
    for name in args.settings.split(","):
        setting = SETTINGS[name]
        for batch in BATCHES:
            with Simulator(["--ttft-ms", f"{setting.ttft_ms:g}", "--itl-ms",
                            f"{setting.itl_ms:g}", "--output-tokens", str(TOKENS),
                            "--max-batch", str(batch)]) as sim:
                found = [asyncio.run(search(sim.base_url, setting)) for _ in range(args.runs)]
            rows.append(row(name, setting, batch, found))
            exact += sum(c.max_passing == batch for c in found)
            searches += len(found)
            print(rows[-1], flush=True)
    table = ("| setting | TTFT / ITL ms | SLO TTFT p99 ms | slots | expected knee | knees found "
             "| exact | highest p99 at or below the knee, ms | lowest p99 above it, ms |\n"
             "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows))
    command = f"python benchmarks/knee.py --runs {args.runs} --settings {args.settings}"
    target = "\n\nTarget: every search finds exactly the slot count (the expected knee)."
    if args.no_record:
        print(table + target)
    else:
        record("knee: the capacity search against a batch limit", command, table + target,
               headline=f"{exact}/{searches} searches found the knee exactly")


if __name__ == "__main__":
    main()
