"""`sustain compare`: probes side by side over a window."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from sustain.service import strict_json
from sustain.service.cli.common import (
    DataDirOpt,
    DbOpt,
    VerboseOpt,
    command_logging,
    database,
    load_settings,
    one_connection_engine,
    say,
)
from sustain.service.db.engine import session_factory
from sustain.service.db.migrate import upgrade_to_head

if TYPE_CHECKING:  # imported where used, so that `sustain --help` stays fast
    from sustain.service.schemas.compare import Comparison


def compare(
    probes: Annotated[list[str], typer.Argument(help="Probe names (2 to 8).")],
    window: Annotated[str, typer.Option(help="How far back, e.g. 24h, 7d.")] = "7d",
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON object only.")]
    = False,
    database_url: DbOpt = None, data_dir: DataDirOpt = None, verbose: VerboseOpt = False,
) -> None:
    """Probes side by side over a window: availability, latency, throughput, capacity under
    SLO, efficiency, stability and drift (what GET /api/v1/compare answers)."""
    from sustain.service.errors import ServiceError
    from sustain.service.history.windows import parse_duration

    try:
        seconds = parse_duration(window)
    except ValueError as exc:
        say(f"--window: {exc}", "red")
        raise typer.Exit(2) from None
    settings = load_settings(database_url=database_url, data_dir=data_dir)
    command_logging(settings, verbose)
    with database(settings, share=True) as url:
        upgrade_to_head(url)
        try:
            found = asyncio.run(_compare(url, probes, seconds))
        except ServiceError as exc:
            say(f"{exc}", "red")
            raise typer.Exit(2) from None
    if json_output:
        print(strict_json.dumps(found.model_dump(mode="json", by_alias=True)))
        return
    Console(width=None if sys.stdout.isatty() else 160).print(comparison_table(found))


async def _compare(url: str, names: list[str], seconds: int) -> Comparison:
    from sustain.service.db.compare import compare as compare_probes

    end = datetime.now(UTC)
    async with one_connection_engine(url) as engine, session_factory(engine)() as session:
        return await compare_probes(session, names, end - timedelta(seconds=seconds), end)


def comparison_table(found: Comparison) -> Table:
    """One column per probe, one row per figure."""
    from sustain.service.evaluation.drift_words import drift_words

    table = Table(title=f"{found.from_:%Y-%m-%d %H:%M} to {found.to:%Y-%m-%d %H:%M} UTC")
    table.add_column("")
    for probe in found.probes:
        table.add_column(f"{probe.probe}\n{probe.endpoint} · {probe.model}", justify="right")

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f} ms"

    def num(value: float | None, unit: str = "") -> str:
        return "-" if value is None else f"{value:,.2f}{unit}"

    rows: list[tuple[str, list[str]]] = [
        ("runs", [str(p.runs) for p in found.probes]),
        ("availability", ["-" if p.availability is None else f"{p.availability:.2%}"
                          for p in found.probes]),
        ("TTFT p50 / p99", [f"{ms(p.ttft_ms.p50)} / {ms(p.ttft_ms.p99)}"
                            for p in found.probes]),
        ("TPOT p50 / p99", [f"{ms(p.tpot_ms.p50)} / {ms(p.tpot_ms.p99)}"
                            for p in found.probes]),
        ("E2E p50 / p99", [f"{ms(p.e2e_ms.p50)} / {ms(p.e2e_ms.p99)}" for p in found.probes]),
        ("TTFO p50 / p99 (first answer)", [
            "-" if p.ttfo_ms is None else f"{ms(p.ttfo_ms.p50)} / {ms(p.ttfo_ms.p99)}"
            for p in found.probes]),
        ("reasoning share", ["-" if p.reasoning_share is None else f"{p.reasoning_share:.1%}"
                             for p in found.probes]),
        ("output tok/s", [num(p.output_tokens_per_second) for p in found.probes]),
        ("goodput req/s", [num(p.goodput) for p in found.probes]),
        ("items/s", [num(p.items_per_second) for p in found.probes]),
        ("RTF p50 / p99", ["-" if p.rtf_ratio is None
                               else f"{num(p.rtf_ratio.p50)} / {num(p.rtf_ratio.p99)}"
                           for p in found.probes]),
        ("retrieval hit rate", ["-" if p.retrieval_hit_ratio is None
                                else f"{p.retrieval_hit_ratio:.1%}" for p in found.probes]),
        ("capacity (newest, median)", [
            "-" if p.capacity is None else
            f"{p.capacity.latest} / {p.capacity.median:g} {p.capacity.unit or ''}"
            for p in found.probes]),
        ("cost per 1M good tokens", [
            num((p.efficiency or {}).get("cost_per_million_good_tokens"),
                f" {(p.efficiency or {}).get('currency', '')}") for p in found.probes]),
        ("J per output token", [
            "-" if not isinstance(j := (p.efficiency or {}).get("joules_per_output_token"),
                                  int | float) else f"{j:,.3g} J" for p in found.probes]),
        ("TTFT p99 stability", [
            "-" if (s := p.stability.get("ttft_p99")) is None or s.cov is None
            else f"{s.cov:.1%} ({s.band})" for p in found.probes]),
        ("drift", [drift_words(p.drift) for p in found.probes]),
    ]
    kind_rows = {"items/s", "RTF p50 / p99", "retrieval hit rate"}
    for label, cells in rows:
        if label in kind_rows and all(cell == "-" for cell in cells):
            continue  # a figure of kinds none of these probes is
        table.add_row(label, *cells)
    return table
