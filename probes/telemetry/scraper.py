"""The scraper process: `python -m sustain.probes.telemetry.scraper`, started by ServerWatch
(watch.py) for one run. It reads a server's Prometheus exposition every interval and writes
one JSON line per scrape to stdout: `{"t": unix seconds, "values": {name: value}}`, or
`{"t": ..., "error": kind}`: one at once (the run's baseline), then every interval, and a
last one when its stdin closes (the run ended), after which it exits.

Scraping runs in its own process so that reading and parsing an exposition (vLLM's is
~100 KiB) never holds the interpreter lock of a loop that times requests. Connections go
only where the run's egress policy allows (the same HttpClients as measuring), and the
parser is prometheus-client's. An error line names a kind, never the URL (it may carry
credentials) or the server's text.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import pickle
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sustain.probes.client.clients import HttpClients
from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.egress_connect import EgressDeniedError, egress_denial
from sustain.probes.telemetry.families import ParsedSample, pick

MAX_BODY_BYTES = 8 * 1024 * 1024
"""An exposition larger than this is not read (vLLM's is far smaller)."""


@dataclass(frozen=True, slots=True)
class ScrapeConfig:
    url: str
    interval_s: float
    names: tuple[str, ...]
    egress: EgressPolicy
    tls_verify: bool = True
    gpus: tuple[str, ...] = ()
    """The GPUs that serve the endpoint (a DCGM sample's `gpu` index or `UUID`); empty: all
    the exporter shows."""

    def encode(self) -> bytes:
        """The config as the one line the parent writes (the policy pickled: the parent
        started this process and is trusted by it)."""
        return json.dumps({
            "url": self.url, "interval_s": self.interval_s, "names": list(self.names),
            "tls_verify": self.tls_verify, "gpus": list(self.gpus),
            "egress": base64.b64encode(pickle.dumps(self.egress)).decode()}).encode() + b"\n"

    @classmethod
    def decode(cls, line: bytes) -> ScrapeConfig:
        raw: dict[str, Any] = json.loads(line)
        return cls(url=str(raw["url"]), interval_s=float(raw["interval_s"]),
                   names=tuple(str(n) for n in raw["names"]),
                   egress=pickle.loads(base64.b64decode(raw["egress"])),
                   tls_verify=bool(raw.get("tls_verify", True)),
                   gpus=tuple(str(g) for g in raw.get("gpus", ())))


DCGM_PREFIX = "DCGM_FI_"


def parse_exposition(text: str, gpus: tuple[str, ...] = ()
                     ) -> tuple[list[ParsedSample], float | None]:
    """Every sample of a Prometheus text exposition: (sample name, value); with `gpus`, a
    DCGM sample only when its `gpu` label or `UUID` is one of them. Also the latest sample
    timestamp the exposition gives (Unix seconds), None when it gives none."""
    kept = frozenset(gpus)
    samples = [sample for family in text_string_to_metric_families(text)
               for sample in family.samples
               if not kept or not sample.name.startswith(DCGM_PREFIX)
               or sample.labels.get("gpu") in kept or sample.labels.get("UUID") in kept]
    stamps = [float(sample.timestamp) for sample in samples if sample.timestamp is not None]
    return [(sample.name, float(sample.value)) for sample in samples], \
        max(stamps) if stamps else None


MAX_STAMP_SKEW_S = 5.0
"""An exposition's own timestamps time its values only within this of when it arrived: a
clock further off is not trusted (its values are timed by their arrival instead)."""


def values_time(arrived: float, stamped: float | None) -> float:
    """When a scrape's values were read: the exporter's own timestamp where it gives one (and
    its clock agrees with ours), else when its answer arrived. An exporter's timestamps make
    a counter's rate exact however late each answer travels; without them, a rate over a
    span of scrapes is off by the answers' delay jitter over that span."""
    if stamped is not None and abs(stamped - arrived) <= MAX_STAMP_SKEW_S:
        return stamped
    return arrived


async def scrape_once(client: httpx.AsyncClient, config: ScrapeConfig) -> dict[str, Any]:
    """One scrape as the line to write: the values found, or the kind of failure."""
    at = time.time()
    try:
        async with client.stream("GET", config.url, timeout=max(1.0, config.interval_s * 2),
                                 headers={"accept": "text/plain"}) as response:
            # the values were read when the server answered, not when it was asked (a first
            # scrape's connection setup would otherwise stretch every rate's span)
            at = time.time()
            if response.status_code != 200:
                return {"t": at, "error": f"http {response.status_code}"}
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    return {"t": at, "error": "too large"}
    except httpx.TimeoutException:
        return {"t": at, "error": "timeout"}
    except (httpx.HTTPError, EgressDeniedError) as exc:
        return {"t": at, "error": "egress denied" if egress_denial(exc) is not None
                else "unreachable"}
    except Exception as exc:  # noqa: BLE001 - anything else fails this scrape, not the scraper
        return {"t": at, "error": f"failed ({type(exc).__name__})"}
    try:
        samples, stamped = parse_exposition(body.decode("utf-8", errors="replace"),
                                            config.gpus)
    except (ValueError, TypeError, IndexError):
        return {"t": at, "error": "not a Prometheus exposition"}
    return {"t": values_time(at, stamped), "values": pick(samples, config.names)}


async def serve() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    config = ScrapeConfig.decode(await reader.readline())
    closed = asyncio.ensure_future(reader.read())  # EOF: the parent is done with us
    out = os.fdopen(sys.stdout.fileno(), "wb", buffering=0, closefd=False)
    async with HttpClients(4, egress=config.egress) as clients:
        client = clients.httpx(tls_verify=config.tls_verify)
        start = loop.time()
        beat = 0
        while True:  # a scrape at once, every interval, and a last one when told to stop
            line = await scrape_once(client, config)
            out.write(json.dumps(line).encode() + b"\n")
            if closed.done():
                return
            beat += 1
            wait = start + beat * config.interval_s - loop.time()
            if wait > 0:
                await asyncio.wait({closed}, timeout=wait)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    asyncio.run(serve())


if __name__ == "__main__":
    main()
