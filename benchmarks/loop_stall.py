"""Can an endpoint stall the loop that times every other request? While two clients
keep reading oversized responses back to back (a never-ending server-sent event line and a
100 MB one, each refused at the 1 MiB cap), another request waits on a server that never
answers, with a 1 s first-token timeout. The timeout's lateness (when it fired minus 1 s) is
how long the loop was kept from its timers; the oversized requests' E2E is how long each took
to be refused. Both transports (the lean HTTP/1.1 one and httpx), --repeats times each.

tests/integration/probes/client/test_oversized_responses.py checks that the timeout fires
(never early) and that every oversized request ends at the cap; these are its figures.
Target: lateness <= 50 ms.

    python benchmarks/loop_stall.py [--repeats 10] [--no-record]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import record
from sustain.probes.client.clients import HttpClients
from sustain.probes.client.sse import MIB
from sustain.probes.measure.percentiles import quantile
from tests.integration.probes.client.raw_http import SSE_HEAD, Handler
from tests.integration.probes.client.test_oversized_responses import (
    FILLER,
    FINISH,
    KIB_64,
    never_answers,
    send,
    streaming,
)

TARGET_MS = 50.0
TRANSPORTS = {False: "lean HTTP/1.1", True: "httpx"}


async def once(via_httpx: bool) -> tuple[float, list[float]]:
    """Lateness of the 1 s timeout (ms) and the oversized requests' E2E (ms)."""
    servers: list[asyncio.Server] = []

    async def serve(handler: Handler) -> str:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"

    try:
        async with HttpClients() as clients:
            endless = await serve(streaming(SSE_HEAD, b"data: ", FILLER, None))
            huge = await serve(streaming(SSE_HEAD, b"data: ", FILLER, 100 * MIB // KIB_64,
                                         b"\n\n" + FINISH))
            silent = await serve(never_answers)
            stop = asyncio.Event()
            e2e: list[float] = []

            async def keep_reading(url: str) -> None:
                while not stop.is_set():
                    e2e.append((await send(clients, via_httpx, url,
                                           timeout_total_s=10.0)).e2e_ms)

            readers = [asyncio.create_task(keep_reading(url)) for url in (endless, huge)]
            await asyncio.sleep(0.2)
            started = time.monotonic()
            await send(clients, via_httpx, silent, timeout_first_token_s=1.0)
            late_ms = (time.monotonic() - started - 1.0) * 1000.0
            stop.set()
            await asyncio.gather(*readers)
    finally:
        for server in servers:
            server.close()
    return late_ms, e2e


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--no-record", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args()
    rows = []
    worst: dict[bool, float] = {}
    for via_httpx, name in TRANSPORTS.items():
        late: list[float] = []
        e2e: list[float] = []
        for _ in range(args.repeats):
            one_late, one_e2e = asyncio.run(once(via_httpx))
            late.append(one_late)
            e2e.extend(one_e2e)
        late.sort()
        e2e.sort()
        ok = late[-1] <= TARGET_MS
        worst[via_httpx] = late[-1]
        rows.append(f"| {name} | {len(late)} | {quantile(late, 0.5):.1f} | {late[-1]:.1f} / "
                    f"{TARGET_MS:g} {'pass' if ok else 'FAIL'} | {len(e2e)} | "
                    f"{quantile(e2e, 0.5):.1f} | {e2e[-1]:.1f} |")
        print(rows[-1], flush=True)
    table = ("| transport | timeouts | lateness median ms | lateness max ms / target | "
             "oversized requests | their E2E median ms | their E2E max ms |\n"
             "|---|---|---|---|---|---|---|\n" + "\n".join(rows) +
             f"\n\nTarget: the 1 s timeout fires within {TARGET_MS:g} ms of its setting.")
    command = f"python benchmarks/loop_stall.py --repeats {args.repeats}"
    if args.no_record:
        print(table)
    else:
        ours, base = worst[False], worst[True]
        record("loop stall: a timeout's lateness while oversized responses are refused",
               command, table, headline=f"lateness max {ours:.1f} ms (lean HTTP/1.1)",
               ratio=f"httpx: max {base:.1f} ms"
                     + (f", {base / ours:.1f}x" if ours > 0 else ""))


if __name__ == "__main__":
    main()
