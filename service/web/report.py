"""A run as a page people read (pure): the figures of a run's stored report (its summary
JSON) and its latencies laid out for report.html, which `sustain probe --html` writes as one
self-contained file and the status site serves at /runs/{id}. No script and no external
asset: inline CSS and inline SVG only, so the file opens anywhere, offline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from sustain.service.web.charts import Histogram, StepChart, histogram, step_chart

LATENCIES = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E"),
             ("corrected_e2e_ms", "E2E corrected"), ("lag_ms", "Lag"))
STATS = ("p50", "p90", "p95", "p99", "p999", "max", "mean", "count")


@dataclass(frozen=True, slots=True)
class RunPage:
    title: str
    subtitle: str
    figures: list[tuple[str, str]]
    latencies: list[tuple[str, list[str]]]
    stages: list[list[str]]
    errors: list[tuple[str, int]]
    histograms: list[tuple[str, Histogram]]
    curve: StepChart | None
    curve_title: str | None
    curve_rows: list[list[str]] = field(default_factory=list)
    curve_columns: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _num(value: Any, unit: str = "", digits: int = 2) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    return f"{value:,.{digits}f}{unit}"


def _share(value: Any) -> str:
    return "-" if not isinstance(value, int | float) else f"{value:.2%}"


def run_page(report: Mapping[str, Any], title: str, subtitle: str,
             ttfts: Sequence[float], e2es: Sequence[float]) -> RunPage:
    """The page of a run from its report (RunReport as JSON) and its successful requests'
    TTFT and E2E values (ms) for the histograms."""
    figures = [
        ("requests", str(report.get("attempts", "-"))),
        ("availability", _share(report.get("availability"))),
        ("request throughput", _num(report.get("request_throughput"), " req/s")),
        ("output tokens/s", _num(report.get("output_token_throughput"))),
        ("goodput", _num(report.get("goodput"), " req/s")),
        ("measured time", _num(report.get("duration_s"), " s")),
        ("generator saturated", "yes" if (report.get("generator") or {}).get("saturated")
         else "no"),
    ]
    if report.get("item_throughput") is not None:
        figures.append(("items/s (inputs or documents)", _num(report["item_throughput"])))
    if report.get("input_token_throughput") is not None:
        figures.append(("input tokens/s", _num(report["input_token_throughput"])))
    rtf = report.get("rtf")
    if isinstance(rtf, Mapping) and rtf.get("count"):
        figures.append(("audio transcribed", _num(report.get("audio_seconds"), " s", 1)))
        figures.append(("real-time factor p50 / p99", f"{_num(rtf.get('p50'), digits=3)} / "
                                                      f"{_num(rtf.get('p99'), digits=3)}"))
    for size, dist in (report.get("ttft_by_image_size") or {}).items():
        if isinstance(dist, Mapping) and dist.get("count"):
            figures.append((f"TTFT p50 / p99 with {size} images",
                            f"{_num(dist.get('p50'), ' ms', 1)} / "
                            f"{_num(dist.get('p99'), ' ms', 1)}"))
    if report.get("cache_hit_ratio") is not None:
        figures.append(("cache hit ratio", _share(report["cache_hit_ratio"])))
    quality = report.get("quality")
    if isinstance(quality, Mapping):
        figures.append(("canaries passed", f"{quality.get('passed')}/{quality.get('checked')}"))
    sessions = report.get("sessions")
    if isinstance(sessions, Mapping):
        figures.append(("conversations completed",
                        f"{sessions.get('completed')}/{sessions.get('conversations')}"))
    for key, value in (report.get("efficiency") or {}).items():
        if key != "currency":
            figures.append((key.replace("_", " "),
                            value if isinstance(value, str) else _num(value)))
    latencies = []
    for key, label in LATENCIES:
        dist = report.get(key) or {}
        if dist.get("count"):
            latencies.append((label, [_num(dist.get(s), digits=1) if s != "count"
                                      else str(dist.get(s)) for s in STATS]))
    stages = [[str(stage.get("label")), str(stage["summary"].get("attempts")),
               _share(stage["summary"].get("availability")),
               _num(stage["summary"].get("output_token_throughput")),
               _num((stage["summary"].get("ttft_ms") or {}).get("p99"), digits=1),
               _num((stage["summary"].get("e2e_ms") or {}).get("p99"), digits=1),
               "-" if (steady := stage["summary"].get("steady_state")) is None
               else ("steady" if steady.get("steady") else "not steady")]
              for stage in report.get("stages") or []]
    errors = sorted((report.get("errors") or {}).items(), key=lambda kv: -kv[1])
    page = RunPage(title=title, subtitle=subtitle, figures=figures, latencies=latencies,
                   stages=stages if len(stages) > 1 else [], errors=errors,
                   histograms=[("TTFT (ms)", histogram(ttfts)), ("E2E (ms)", histogram(e2es))],
                   curve=None, curve_title=None)
    return _with_curve(page, report)


def _with_curve(page: RunPage, report: Mapping[str, Any]) -> RunPage:
    capacity, pareto = report.get("capacity"), report.get("pareto")
    columns = ["level", "requests", "system tok/s", "tok/s per user", "TTFT p90",
               "TTFT p99", "TPOT p90"]
    if isinstance(capacity, Mapping):
        points = capacity.get("points") or []
        chart = step_chart([("system tok/s", [(p["level"], p.get("system_tps") or 0.0)
                                              for p in points])],
                           f"load ({capacity.get('unit')})", "output tokens/s")
        best = capacity.get("max_passing")
        found = "none" if best is None else best
        return _replace(page, curve=chart, curve_columns=[*columns, "verdict"],
                        curve_title=f"Capacity under SLO: {found} (first failing: "
                                    f"{capacity.get('first_failing') or '-'})",
                        curve_rows=[[*_row(p), "pass" if p.get("passed")
                                     else f"FAIL: {p.get('reason')}"] for p in points])
    if isinstance(pareto, list):
        chart = pareto_chart([("this run", pareto)])
        return _replace(page, curve=chart, curve_columns=[*columns, "on front"],
                        curve_title="Pareto curve: system throughput against interactivity",
                        curve_rows=[[*_row(p), "yes" if p.get("on_front") else ""]
                                    for p in pareto])
    return page


def pareto_chart(curves: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> StepChart:
    """Pareto points of one or more probes on shared axes: tokens/s per user against system
    tokens/s."""
    return step_chart([(name, [(p["tps_per_user"], p["system_tps"]) for p in points
                               if p.get("tps_per_user") and p.get("system_tps")])
                       for name, points in curves],
                      "tokens/s per user (1000 / TPOT p90)", "system output tokens/s")


def _row(point: Mapping[str, Any]) -> list[str]:
    return [str(point.get("level")), str(point.get("count")), _num(point.get("system_tps")),
            _num(point.get("tps_per_user")), _num(point.get("ttft_p90_ms"), digits=1),
            _num(point.get("ttft_p99_ms"), digits=1), _num(point.get("tpot_p90_ms"), digits=1)]


def _replace(page: RunPage, **changes: Any) -> RunPage:
    from dataclasses import replace

    return replace(page, **changes)


TEMPLATES = Path(__file__).parent / "templates"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The report's templates, autoescaped (the report shows labels and error texts)."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                              autoescape=jinja2.select_autoescape(default=True))


def render(page: RunPage) -> str:
    """The page as one self-contained HTML document."""
    return environment().get_template("report.html").render(page=page)
