"""What a hostile caller can make `sustain serve` hold, and how fast /healthz is answered
meanwhile: one attack at a time against one service, each beside the same service left alone
(the baseline, measured in the same run).

Each attack is one of the ways tests/hostile/ refuses or bounds: request heads of 20 MB, agent
uploads whose samples carry a million inter-token latencies or fall on 900 days, unclaimed
uploads for ticks decades ahead, summaries whose names would become /metrics labels, a
thousand agent names, thirty thousand silences, and sockets that ask for a CSV export and never
read it. While it goes, the service's RSS is sampled ten times a second (psutil) and /healthz
is asked five times a second on fresh connections; a probe of the service's own location runs
every 5 s, and the ticks it missed are counted (the measuring path keeps its ticks while the
API is attacked). Target: the peak RSS stays within the baseline + 300 MB, every /healthz is
answered within 1 s, no tick is missed.

    python benchmarks/hostile.py [--attacks heads,itl,...] [--no-record]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import msgpack
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import SERVER_URL, Simulator, drop_database, fresh_database, record
from sustain.probes.measure.percentiles import quantile
from tests.processes import ADMIN_HEADERS, SustainProcess, free_port

DATABASE = "sustain_bench_hostile"
LOCATION = "edge-1"
ATTACK_S = 10.0
"""How long each attack goes on (or until it has sent all it means to)."""
GUARD_S = 5.0
"""How long one /healthz is waited for before it counts as unanswered."""
MB = 1024 * 1024


@dataclass
class Watch:
    """RSS samples (bytes) and /healthz latencies (s) taken while an attack runs."""

    rss: list[int] = field(default_factory=list)
    healthz_s: list[float] = field(default_factory=list)
    unanswered: int = 0


@contextlib.contextmanager
def watching(pid: int, port: int) -> Iterator[Watch]:
    """Sample the service's RSS at 10 Hz and ask /healthz at 5 Hz until the block ends."""
    watch = Watch()
    stop = threading.Event()
    process = psutil.Process(pid)

    def rss() -> None:
        while not stop.is_set():
            watch.rss.append(process.memory_info().rss)
            stop.wait(0.1)

    def healthz() -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                with httpx.Client(timeout=GUARD_S) as client:  # a fresh connection each time
                    ok = client.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                watch.healthz_s.append(time.monotonic() - started)
            else:
                watch.unanswered += 1
            stop.wait(0.2)

    threads = [threading.Thread(target=rss), threading.Thread(target=healthz)]
    for thread in threads:
        thread.start()
    try:
        yield watch
    finally:
        stop.set()
        for thread in threads:
            thread.join()


@dataclass
class Target:
    """The service under attack and what the attacks need of it."""

    port: int
    agent_key: str
    edge_probe: int
    """A probe of the agent's location (every 10 s), for uploads."""
    own_probe: int
    """A probe of the service's own location (every 5 s): its ticks must not be missed."""
    big_run: int
    """A run with 20,000 samples, for exports."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def agent(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30,
                            headers={"Authorization": f"Bearer {self.agent_key}"})


def sample_row(seq: int, sent_at: float, itl: list[float] | None = None) -> list[Any]:
    """One sample as an agent uploads it (the worker wire's row, its wall time last)."""
    gaps = [10.0] * 8 if itl is None else itl
    return [seq, 0, seq * 50.0, seq * 50.0, 50.0, gaps, 50.0 + sum(gaps[:8]), len(gaps) + 1,
            True, 12, 200, None, None, None, None, None, None, None, None, None, None, None,
            None, None, None, sent_at]


def final(samples: int, summary: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"status": "succeeded", "error": None, "summary": summary,
            "counts": {"attempts": samples, "successes": samples, "output_tokens": 9 * samples,
                       "measured_s": 1.0},
            "sketches": [], "server_series": {}}


def part(probe_id: int, tick: float, upload: uuid.UUID, number: int, parts: int,
         rows: list[list[Any]], last: dict[str, Any] | None) -> bytes:
    return msgpack.packb({
        "upload_id": str(upload), "part": number, "parts": parts, "probe_id": probe_id,
        "tick": tick, "run_id": None, "started_at": tick, "dropped": 0, "samples": rows,
        "final": last}, use_bin_type=True)


def upload(client: httpx.Client, body: bytes, agent: str = "bench") -> int:
    r = client.post("/api/v1/agent/uploads", params={"agent": agent}, content=body,
                    headers={"content-type": "application/msgpack"})
    return r.status_code


def recent_tick(interval_s: int = 10, ago: int = 3) -> float:
    now = time.time()
    return now - now % interval_s - ago * interval_s


# --- the attacks: each returns what the service answered, in words ---

def heads(t: Target) -> str:
    """Ten sockets at once, each sending a 20 MB request head of 1 KB header lines to
    /healthz."""
    line = b"X-Pad: " + b"a" * 1016 + b"\r\n"
    sent: list[int] = []
    answers: list[bytes] = []

    def one() -> None:
        total = 0
        with socket.create_connection(("127.0.0.1", t.port), timeout=5) as sock:
            try:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                total += 30
                for _ in range(20 * 1024):
                    sock.sendall(line)
                    total += len(line)
                sock.sendall(b"\r\n")
            except OSError:
                pass
            with contextlib.suppress(OSError):
                answers.append(sock.recv(64))
        sent.append(total)

    threads = [threading.Thread(target=one) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    codes = sorted({a.split(b" ")[1].decode() if a.count(b" ") else "closed"
                    for a in answers} or {"closed"})
    return (f"{'/'.join(codes)}; at most {max(sent) / MB:.1f} MB of each 20 MB head "
            "written before the server closed")


def itl(t: Target) -> str:
    """Thirty parts of just under 1 MiB, each one sample carrying a million small
    inter-token latencies (~43 MB decoded per part before any cap)."""
    codes: list[int] = []
    rows_per_part = 1
    gaps: list[float] = [1] * 1_000_000  # one byte each in msgpack: a part just under 1 MiB
    tick = recent_tick()
    with t.agent() as client:
        upload_id = uuid.uuid4()
        for number in range(30):
            rows = [sample_row(number * rows_per_part + i, tick + 1, gaps)
                    for i in range(rows_per_part)]
            codes.append(upload(client, part(t.edge_probe, tick, upload_id, number, 31, rows,
                                             None)))
    return answered(codes)


def days(t: Target) -> str:
    """One upload whose 900 samples fall on 900 different days (each a partition before)."""
    tick = recent_tick()
    rows = [sample_row(i, tick - i * 86400.0) for i in range(900)]
    with t.agent() as client:
        code = upload(client, part(t.edge_probe, tick, uuid.uuid4(), 0, 1, rows, final(900)))
    return answered([code])


def future(t: Target) -> str:
    """Two hundred unclaimed uploads, each for a tick decades ahead or off the schedule."""
    codes = []
    ahead = datetime(2149, 1, 1, tzinfo=UTC).timestamp()
    with t.agent() as client:
        for i in range(200):
            tick = ahead + 10 * i if i % 2 else recent_tick() + 3.0
            codes.append(upload(client, part(t.edge_probe, tick, uuid.uuid4(), 0, 1,
                                             [sample_row(0, tick + 1)], final(1))))
    return answered(codes)


def labels(t: Target) -> str:
    """Uploads whose summaries name 2,000 server metrics and a 100 KB currency each (all of
    them /metrics labels before)."""
    codes = []
    with t.agent() as client:
        for i in range(20):
            tick = recent_tick(ago=3 + i)
            summary = {"server_metrics": {f"m{i}_{n}": {"mean": 1.0} for n in range(2000)},
                       "efficiency": {"currency": "X" * 100_000}}
            codes.append(upload(client, part(t.edge_probe, tick, uuid.uuid4(), 0, 1,
                                             [sample_row(0, tick + 1)], final(1, summary))))
    series = len([line for line in httpx.get(f"{t.url}/metrics", timeout=30).text.splitlines()
                  if line and not line.startswith("#")])
    return f"{answered(codes)}; /metrics then held {series:,} series"


def names(t: Target) -> str:
    """A thousand agent names heartbeating under one agent key."""
    codes = []
    with t.agent() as client:
        for i in range(1000):
            codes.append(client.post("/api/v1/agent/heartbeat", json={
                "agent": f"fake-{i}", "in_flight": 0, "spooled_runs": 0}).status_code)
    return answered(codes)


def silences(t: Target) -> str:
    """Thirty thousand silences, created as fast as they are answered."""
    codes = []
    now = datetime.now(UTC)
    with httpx.Client(base_url=t.url, timeout=30, headers=ADMIN_HEADERS) as client:
        for i in range(30_000):
            r = client.post("/api/v1/silences", json={
                "matchers": [{"name": "probe", "value": f"p{i}"}],
                "starts_at": now.isoformat(), "ends_at": (now.replace(year=now.year + 1)
                                                          ).isoformat(),
                "comment": "hostile"})
            codes.append(r.status_code)
            if r.status_code == 409 and codes.count(409) > 100:
                break
    return answered(codes)


def readers(t: Target) -> str:
    """Twenty sockets that each ask for the CSV export of a 20,000-sample run and never
    read a byte of it, held for the whole attack."""
    held = []
    for _ in range(20):
        sock = socket.create_connection(("127.0.0.1", t.port), timeout=5)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(f"GET /api/v1/runs/{t.big_run}/samples?format=csv HTTP/1.1\r\n"
                     "Host: x\r\n"
                     f"Authorization: Bearer {ADMIN_HEADERS['Authorization'][7:]}\r\n\r\n"
                     .encode())
        held.append(sock)
    time.sleep(ATTACK_S)
    with httpx.Client(base_url=t.url, timeout=30, headers=ADMIN_HEADERS) as client:
        read = client.get("/api/v1/probes").status_code
        ready = client.get("/readyz").status_code
    for sock in held:
        sock.close()
    return f"20 silent readers held; meanwhile an API read answered {read}, /readyz {ready}"


def answered(codes: list[int]) -> str:
    counts: dict[int, int] = {}
    for code in codes:
        counts[code] = counts.get(code, 0) + 1
    return ", ".join(f"{n:,} x {code}" for code, n in sorted(counts.items()))


def quiet(t: Target) -> str:  # noqa: ARG001 - the baseline does nothing
    """Nothing: the service left alone (the baseline)."""
    time.sleep(ATTACK_S)
    return "—"


ATTACKS: dict[str, Callable[[Target], str]] = {
    "quiet": quiet, "heads": heads, "itl": itl, "days": days, "future": future,
    "labels": labels, "names": names, "silences": silences, "readers": readers}


def prepare(port: int, simulator_url: str) -> Target:
    """An endpoint on the simulator, a probe of the service's location and one of the
    agent's, an agent key, and a run of 20,000 samples uploaded by that agent."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60,
                      headers=ADMIN_HEADERS) as client:
        endpoint = client.post("/api/v1/endpoints", json={
            "name": "sim", "base_url": simulator_url, "model": "sim-model"}).json()["id"]
        own = client.post("/api/v1/probes", json={
            "name": "own", "endpoint_id": endpoint, "interval_s": 5,
            "profile": {"kind": "constant", "rate": 2, "duration_s": 1}}).json()["id"]
        edge = client.post("/api/v1/probes", json={
            "name": "edge", "endpoint_id": endpoint, "interval_s": 10,
            "locations": [LOCATION]}).json()["id"]
        key = client.post("/api/v1/keys", json={"name": "bench-agent", "role": "agent",
                                                "location": LOCATION}).json()["key"]
    target = Target(port, key, edge, own, 0)
    tick = recent_tick(ago=100)
    upload_id = uuid.uuid4()
    with target.agent() as client:
        for number in range(4):
            rows = [sample_row(number * 5000 + i, tick + 1 + i * 0.01) for i in range(5000)]
            code = upload(client, part(edge, tick, upload_id, number, 4, rows,
                                       final(20_000) if number == 3 else None))
            if code != 200:
                raise RuntimeError(f"the big run's upload answered {code}")
    with httpx.Client(base_url=target.url, timeout=30, headers=ADMIN_HEADERS) as client:
        runs = client.get("/api/v1/runs", params={"probe_id": edge}).json()["items"]
    target.big_run = max(r["id"] for r in runs)
    return target


def missed(t: Target) -> int:
    with httpx.Client(base_url=t.url, timeout=30, headers=ADMIN_HEADERS) as client:
        runs = client.get("/api/v1/runs", params={"probe_id": t.own_probe,
                                                   "limit": 1000}).json()["items"]
    return sum(1 for r in runs if r["status"] == "missed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attacks", default=",".join(ATTACKS))
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    chosen = ["quiet", *[a for a in args.attacks.split(",") if a and a != "quiet"]]
    url = fresh_database(SERVER_URL, DATABASE)
    rows = []
    try:
        with Simulator(["--ttft-ms", "20"]) as simulator, \
                tempfile.TemporaryDirectory() as tmp, \
                SustainProcess(["serve", "--port", str(port := free_port()), "--log-level",
                                "warning"], Path(tmp) / "serve.log",
                               env={"SUSTAIN_DATABASE_URL": url,
                                    "SUSTAIN_DATABASE_POOL_SIZE": "10"}) as service:
            service.wait_http(f"http://127.0.0.1:{port}/readyz", 60)
            target = prepare(port, simulator.base_url)
            for name in chosen:
                before_missed = missed(target)
                with watching(service.pid, port) as watch:
                    started = time.monotonic()
                    what = ATTACKS[name](target)
                    time.sleep(max(0.0, 2.0 - (time.monotonic() - started)))
                after = psutil.Process(service.pid).memory_info().rss
                rows.append((name, what, watch, after, missed(target) - before_missed))
                print(name, what, flush=True)
    finally:
        drop_database(SERVER_URL, DATABASE)
    baseline = max(rows[0][2].rss)
    peak = max(max(watch.rss) for _, _, watch, _, _ in rows)
    slowest = max(max(watch.healthz_s) for _, _, watch, _, _ in rows)
    unanswered = sum(watch.unanswered for _, _, watch, _, _ in rows)
    ticks_lost = sum(lost for *_, lost in rows)
    table = ["| attack | the service answered | RSS peak MB | peak / baseline | RSS after MB | "
             "/healthz p50 ms | /healthz max ms | unanswered | ticks missed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, what, watch, after, lost in rows:
        times = sorted(watch.healthz_s)
        table.append(
            f"| {name} | {what} | {max(watch.rss) / MB:,.0f} | "
            f"{max(watch.rss) / baseline:.2f} | {after / MB:,.0f} | "
            f"{quantile(times, 0.5) * 1000:.1f} | {times[-1] * 1000:.1f} | "
            f"{watch.unanswered} | {lost} |")
    body = ("One `sustain serve` (2 measurement workers, database pool 10), each attack in "
            f"turn for up to {ATTACK_S:.0f} s; the baseline (`quiet`) is the same service left "
            "alone in the same run.\n\n" + "\n".join(table) +
            "\n\nTarget: peak RSS within the baseline + 300 MB, every /healthz within 1 s, "
            "no tick missed.")
    if args.no_record:
        print(body)
    else:
        record("hostile: RSS and /healthz under each attack",
               "python benchmarks/hostile.py", body,
               headline=f"/healthz max {slowest * 1000:.1f} ms, {unanswered} unanswered, "
                        f"{ticks_lost} ticks missed",
               ratio=f"peak RSS {peak / baseline:.2f}x the quiet service's "
                     f"({peak / MB:,.0f} against {baseline / MB:,.0f} MB)")


if __name__ == "__main__":
    main()
