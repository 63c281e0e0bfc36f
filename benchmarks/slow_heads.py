"""How fast is /healthz answered while thousands of slow request heads hold `sustain serve`?
The service runs under a 1,024 file limit; 3,000 heads (re-opened when cut off) each send one
header line a second for 6 s, and GET /healthz is asked three times a second on fresh
connections. tests/e2e/test_slow_clients.py checks that every /healthz is answered and the
background work lives on (its guard only catches a starved /healthz); this prints how fast.
Target: every /healthz answered within 1 s, a kubelet probe's default timeout.

    python benchmarks/slow_heads.py [--repeats 3] [--no-record]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SERVER_URL, drop_database, fresh_database, record
from sustain.probes.measure.percentiles import quantile
from tests.processes import free_port
from tests.slow_heads import (
    KUBELET_TIMEOUT_S,
    SLOW_HEADS,
    attack,
    raised_file_limit,
    serve_with_a_low_file_limit,
)

DATABASE = "sustain_bench_slow_heads"
GUARD_S = 10.0
"""How long one /healthz is waited for before it counts as unanswered."""


def one_attack() -> tuple[int, list[float], int]:
    """Connections opened, the seconds of each answered /healthz, and how many went
    unanswered, for one attack on a fresh service."""
    url = fresh_database(SERVER_URL, DATABASE)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            service = serve_with_a_low_file_limit(port, Path(tmp) / "serve.log", url, "bench")
            with service:
                service.wait_http(f"http://127.0.0.1:{port}/readyz")
                with raised_file_limit():
                    found = attack(port, GUARD_S)
    finally:
        drop_database(SERVER_URL, DATABASE)
    answered = sorted(a.seconds for a in found.answers if a.status == 200)
    return found.connects, answered, len(found.answers) - len(answered)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    rows = []
    worst_s, lost = 0.0, 0
    for attempt in range(1, args.repeats + 1):
        connects, seconds, unanswered = one_attack()
        ok = unanswered == 0 and seconds[-1] <= KUBELET_TIMEOUT_S
        worst_s, lost = max(worst_s, seconds[-1]), lost + unanswered
        rows.append(f"| {attempt} | {connects} | {len(seconds)} | {unanswered} | "
                    f"{quantile(seconds, 0.5) * 1000:.1f} | {seconds[-1] * 1000:.1f} / "
                    f"{KUBELET_TIMEOUT_S * 1000:.0f} {'pass' if ok else 'FAIL'} |")
        print(rows[-1], flush=True)
    table = ("| attack | connections opened | /healthz answered | unanswered | median ms | "
             "max ms / target |\n|---|---|---|---|---|---|\n" + "\n".join(rows) +
             f"\n\nTarget: with {SLOW_HEADS} slow heads open, every /healthz on a fresh "
             f"connection answered whole within {KUBELET_TIMEOUT_S:g} s.")
    command = f"python benchmarks/slow_heads.py --repeats {args.repeats}"
    if args.no_record:
        print(table)
    else:
        record("slow heads: /healthz while thousands of request heads trickle in", command,
               table, headline=f"/healthz max {worst_s * 1000:.1f} ms, {lost} unanswered")


if __name__ == "__main__":
    main()
