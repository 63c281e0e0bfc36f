"""Does an operator reading dashboards make a probe's numbers wrong? A 100 req/s probe
(constant rate, 32-token streams, the simulator at 50 ms TTFT with its truth log on) runs in
`sustain serve` with and without four API readers (status page, summary, drift, series,
samples CSV, /metrics in a loop), measured in worker processes (the default) and, side by
side in the same run, in the service process itself (SUSTAIN_MEASURE_WORKERS=0: how every
run measured before measurement moved into worker processes). Target: lag p99 <= 5 ms and
reported TTFT p99 within 3 ms of the simulator's (over the same requests: the warmup's left
out of both), readers or not. These are the figures tests/e2e/test_busy_service.py does not
bound (a slow or noisy machine moves them); each row prints them next to their targets.

    python benchmarks/busy_service.py [--seconds 20] [--readers 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SERVER_URL, drop_database, fresh_database, record
from tests.busy_service import BusyFigures, busy_probe

DATABASE = "sustain_bench_busy"
MODES = {"workers": {}, "in-process": {"SUSTAIN_MEASURE_WORKERS": "0"}}
LAG_TARGET_MS = 5.0
"""p99 of the generator's lag (send time minus intended time)."""
ERROR_TARGET_MS = 3.0
"""abs(sustain's TTFT p99 - the simulator's TTFT p99)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", default=SERVER_URL)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    rows = []
    loaded: dict[str, tuple[float, float]] = {}  # mode: lag p99, TTFT error, with the readers
    for mode, env in MODES.items():
        for readers in (0, args.readers):
            url = fresh_database(args.server_url, DATABASE)
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    figures: BusyFigures = busy_probe(Path(tmp), url, readers, args.seconds,
                                                      env)
            finally:
                drop_database(args.server_url, DATABASE)
            error = figures.ttft_p99_ms - figures.truth_ttft_p99_ms
            lag_ok = figures.lag_p99_ms <= LAG_TARGET_MS
            error_ok = abs(error) <= ERROR_TARGET_MS
            loaded[mode] = (figures.lag_p99_ms, error)
            rows.append(f"| {mode} | {readers} | {figures.reads} | {figures.requests} | "
                        f"{figures.lag_p99_ms:.2f} / {LAG_TARGET_MS:g} "
                        f"{'pass' if lag_ok else 'FAIL'} | {figures.ttft_p99_ms:.2f} | "
                        f"{figures.truth_ttft_p99_ms:.2f} | {error:+.2f} | "
                        f"{abs(error):.2f} / {ERROR_TARGET_MS:g} "
                        f"{'pass' if error_ok else 'FAIL'} |")
            print(rows[-1], flush=True)
    body = ("| measured in | readers | reads done | requests | lag p99 ms / target | "
            "TTFT p99 ms (sustain) | TTFT p99 ms (simulator) | error ms | "
            "abs(error) ms / target |\n"
            "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) +
            f"\n\nTarget: lag p99 <= {LAG_TARGET_MS:g} ms and TTFT p99 within "
            f"{ERROR_TARGET_MS:g} ms of the simulator's.")
    command = f"python benchmarks/busy_service.py --seconds {args.seconds:g} " \
              f"--readers {args.readers}"
    if args.no_record:
        print(body)
    else:
        (lag, error), (base_lag, base_error) = loaded["workers"], loaded["in-process"]
        record("busy service: a 100 req/s probe while API readers keep sustain busy",
               command, body,
               headline=f"with {args.readers} readers: lag p99 {lag:.2f} ms, TTFT p99 error "
                        f"{error:+.2f} ms",
               ratio=f"in-process: lag p99 {base_lag:.2f} ms"
                     + (f" ({base_lag / lag:.1f}x)" if lag > 0 else "")
                     + f", error {base_error:+.2f} ms")


if __name__ == "__main__":
    main()
