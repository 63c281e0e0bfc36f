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

from sustain.probes.renamed import stored_figure
from sustain.probes.report_tables import LOW_COUNT_CAPTION
from sustain.service.db.status import FirstFailure
from sustain.service.runs.hints import (
    MAX_DETAIL_CHARS,
    after_status,
    failure_hint,
    request_target,
)
from sustain.service.web.charts import AxisChart, Verdict, histogram, xy_chart

LATENCIES = (("ttft_ms", "TTFT"), ("ttfo_ms", "TTFO (first answer)"), ("tpot_ms", "TPOT"),
             ("answer_tpot_ms", "TPOT of the answer"), ("itl_ms", "ITL"), ("e2e_ms", "E2E"),
             ("corrected_e2e_ms", "E2E corrected"), ("lag_ms", "Lag"))
EFFICIENCY_LABELS = {
    "output_tps_per_accelerator": "output tokens/s per accelerator",
    "output_tps_per_kw": "output tokens/s per kW",
    "power_w": "power (W)",
    "joules_per_output_token": "joules per output token",
    "joules_per_good_token": "joules per good token",
    "cost_per_million_output_tokens": "cost per million output tokens ({currency})",
    "cost_per_million_good_tokens": "cost per million good tokens ({currency})",
}
"""How the efficiency figures of a run's summary read on its page."""
STATS = ("p50", "p90", "p95", "p99", "p999", "max", "mean", "count")
LOW_COUNT_MARK = "*"
"""What follows a percentile computed from too few samples for a 99 % confidence bound (the
distribution's `low_count`), as `sustain probe`'s latency table marks it."""
ENDED_EARLY = frozenset({"interrupted", "cancelled", "abandoned"})
"""Run statuses that say why a run ended, not how its endpoint did."""


@dataclass(frozen=True, slots=True)
class RunPage:
    title: str
    subtitle: str
    figures: list[tuple[str, str]]
    latencies: list[tuple[str, list[str]]]
    stages: list[list[str]]
    errors: list[tuple[str, int]]
    histograms: list[AxisChart]
    curve: AxisChart | None
    curve_title: str | None
    curve_rows: list[list[str]] = field(default_factory=list)
    curve_columns: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failure: list[str] = field(default_factory=list)
    """What failed, where and why, for a run with failed requests or a failed run."""
    server: list[list[str]] = field(default_factory=list)
    """The server's own series over the run: name, min, mean, max, last, increase."""
    probe_link: tuple[str, str] | None = None
    """(href, name) of the run's probe page, on the site."""
    failure_title: str = "What failed"
    """The heading of `failure`: what failed, or why a run ended early (one its service was
    stopped during, or one cancelled, says nothing of its endpoint)."""
    stored: bool = True
    """Whether the run stored results (a summary): one interrupted or lost before it
    finished has none, and its page says so instead of a table of dashes."""
    low_count: bool = False
    """Whether a percentile of `latencies` is marked (LOW_COUNT_MARK)."""
    low_count_caption: str = LOW_COUNT_CAPTION


def _num(value: Any, unit: str = "", digits: int = 2) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    return f"{value:,.{digits}f}{unit}"


def _share(value: Any) -> str:
    return "-" if not isinstance(value, int | float) else f"{value:.2%}"


def latency_cells(dist: Mapping[str, Any]) -> list[str]:
    """A latency row's cells (STATS order): each percentile with too few samples for a 99 %
    confidence bound marked with LOW_COUNT_MARK, as the CLI's table marks it."""
    low = set(dist.get("low_count") or ())
    cells = []
    for stat in STATS:
        if stat == "count":
            cells.append(str(dist.get(stat)))
            continue
        text = _num(dist.get(stat), digits=1)
        cells.append(text + (LOW_COUNT_MARK if stat in low and text != "-" else ""))
    return cells


def run_page(report: Mapping[str, Any], title: str, subtitle: str,
             ttfts: Sequence[float], e2es: Sequence[float],
             failure: Sequence[str] = (), *, status: str | None = None) -> RunPage:
    """The page of a run from its report (RunReport as JSON; empty for a run that stored
    none), its successful requests' TTFT and E2E values (ms) for the histograms, what failed
    (lines, see failure_lines) and the run's `status` where known."""
    figures = [
        ("requests", str(report.get("attempts", "-"))),
        ("availability", _share(report.get("availability"))),
        ("request throughput", _num(stored_figure(report, "requests_per_second"), " req/s")),
        ("output tokens/s", _num(stored_figure(report, "output_tokens_per_second"))),
        ("goodput", _num(report.get("goodput"), " req/s")),
        ("measured time", _num(report.get("duration_s"), " s")),
        ("generator saturated", "yes" if (report.get("generator") or {}).get("saturated")
         else "no"),
    ]
    if (items := stored_figure(report, "items_per_second")) is not None:
        figures.append(("items/s (inputs or documents)", _num(items)))
    if (inputs := stored_figure(report, "input_tokens_per_second")) is not None:
        figures.append(("input tokens/s", _num(inputs)))
    rtf = stored_figure(report, "rtf_ratio")
    if isinstance(rtf, Mapping) and rtf.get("count"):
        figures.append(("audio transcribed", _num(stored_figure(report, "audio_s"), " s", 1)))
        figures.append(("real-time factor p50 / p99", f"{_num(rtf.get('p50'), digits=3)} / "
                                                      f"{_num(rtf.get('p99'), digits=3)}"))
    for size, dist in (report.get("ttft_by_image_size") or {}).items():
        if isinstance(dist, Mapping) and dist.get("count"):
            figures.append((f"TTFT p50 / p99 with {size} images",
                            f"{_num(dist.get('p50'), ' ms', 1)} / "
                            f"{_num(dist.get('p99'), ' ms', 1)}"))
    requested = report.get("prompt_tokens_requested")
    if isinstance(requested, int | float):
        served = report.get("prompt_tokens_served")
        figures.append(("prompt tokens requested / served",
                        f"{_num(requested, digits=1)} / {_num(served, digits=1)}"
                        + ("" if served is not None else " (no usage reported)")))
    if report.get("cache_hit_ratio") is not None:
        figures.append(("cache hit ratio", _share(report["cache_hit_ratio"])))
    if report.get("reasoning_share") is not None:
        figures.append(("reasoning share of output", _share(report["reasoning_share"])))
        figures.append(("reasoning / answer tokens",
                        f"{_num(report.get('reasoning_tokens') or 0)} / "
                        f"{_num(report.get('answer_tokens'))}"
                        + (" (reasoning estimated)" if report.get("reasoning_tokens_estimated")
                           else "")))
    if report.get("input_chars") is not None:
        figures.append(("characters spoken", _num(report["input_chars"])))
    for phase, dist in (report.get("job_phases_ms") or {}).items():
        if isinstance(dist, Mapping) and dist.get("count"):
            figures.append((f"job {phase} p50 / p99", f"{_num(dist.get('p50'), ' ms', 1)} / "
                                                      f"{_num(dist.get('p99'), ' ms', 1)}"))
    quality = report.get("quality")
    if isinstance(quality, Mapping):
        figures.append(("canaries passed", f"{quality.get('passed')}/{quality.get('checked')}"))
    sessions = report.get("sessions")
    if isinstance(sessions, Mapping):
        figures.append(("conversations completed",
                        f"{sessions.get('completed')}/{sessions.get('conversations')}"))
    efficiency = report.get("efficiency") or {}
    currency = str(efficiency.get("currency") or "")
    for key, value in efficiency.items():
        if key != "currency":
            label = EFFICIENCY_LABELS.get(key, key.replace("_", " ")).format(currency=currency)
            figures.append((label, value if isinstance(value, str) else _num(value)))
    latencies = []
    for key, label in LATENCIES:
        dist = report.get(key) or {}
        if dist.get("count"):
            latencies.append((label, latency_cells(dist)))
    stages = [[str(stage.get("label")), str(stage["summary"].get("attempts")),
               _share(stage["summary"].get("availability")),
               _num(stored_figure(stage["summary"], "output_tokens_per_second")),
               _num((stage["summary"].get("ttft_ms") or {}).get("p99"), digits=1),
               _num((stage["summary"].get("e2e_ms") or {}).get("p99"), digits=1),
               "-" if (steady := stage["summary"].get("steady_state")) is None
               else ("steady" if steady.get("steady") else "not steady")]
              for stage in report.get("stages") or []]
    errors = sorted((report.get("errors") or {}).items(), key=lambda kv: -kv[1])
    page = RunPage(title=title, subtitle=subtitle, figures=figures, latencies=latencies,
                   stages=stages if len(stages) > 1 else [], errors=errors,
                   histograms=[histogram(values, f"{label} (ms)", _no_latency(report, status))
                               for label, values in (("TTFT", ttfts), ("E2E", e2es))],
                   curve=None, curve_title=None, failure=list(failure),
                   server=server_rows(report.get("server_metrics")),
                   failure_title="Why it ended early" if status in ENDED_EARLY
                   else "What failed",
                   stored=bool(report),
                   low_count=any(cell.endswith(LOW_COUNT_MARK)
                                 for _, cells in latencies for cell in cells))
    return _with_curve(page, report)


def _with_curve(page: RunPage, report: Mapping[str, Any]) -> RunPage:
    capacity, pareto = report.get("capacity"), report.get("pareto")
    columns = ["level", "requests", "system tok/s", "tok/s per user", "TTFT p90",
               "TTFT p99", "TPOT p90"]
    if isinstance(capacity, Mapping):
        points = capacity.get("points") or []
        unit = "users" if capacity.get("unit") == "concurrency" else "requests/s"
        chart = xy_chart([("system output tokens/s", [
            (float(p["level"]), float(p.get("system_tps") or 0.0),
             "pass" if p.get("passed") else "fail",
             f"{p['level']} {unit}: {p.get('system_tps') or 0:,.1f} output tokens/s, "
             + ("met the SLO" if p.get("passed") else f"failed: {p.get('reason')}"))
            for p in points])], f"load ({unit})", "system output tokens/s",
            "The capacity search measured no level.", x_from_zero=True)
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


def pareto_chart(curves: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> AxisChart:
    """Pareto points of one or more probes on shared axes: system output tokens/s against
    tokens/s per user, each axis spanning the points (not from 0), each curve a step
    function."""
    series: list[tuple[str, list[Verdict]]] = [
        (name, [(float(p["tps_per_user"]), float(p["system_tps"]), "",
                 f"{name}: {p['tps_per_user']:,.1f} tokens/s per user, "
                 f"{p['system_tps']:,.1f} system tokens/s at {p.get('level')}")
                for p in points if p.get("tps_per_user") and p.get("system_tps")])
        for name, points in curves]
    return xy_chart([(name, points) for name, points in series if points],
                    "tokens/s per user (1000 / TPOT p90)", "system output tokens/s",
                    "No Pareto run yet.", step=True, y_from_zero=False)


def server_rows(series: Any) -> list[list[str]]:
    """The server telemetry table's rows, by series name."""
    if not isinstance(series, Mapping):
        return []
    return [[str(name), *(_num(metric.get(stat), digits=2) for stat in
                          ("min", "mean", "max", "last", "increase"))]
            for name, metric in sorted(series.items()) if isinstance(metric, Mapping)]


def _no_latency(report: Mapping[str, Any], status: str | None = None) -> str:
    """Why a run's latency histogram is empty."""
    if not report and status in ENDED_EARLY:
        return f"The run was {status} before it stored results."
    if not report:
        return "The run has no results yet (it has not finished)."
    if not report.get("attempts"):
        return "The run sent no request."
    return "No request succeeded, so there is no latency to draw."


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


def render(page: RunPage, nav: Mapping[str, Any] | None = None) -> str:
    """The page as one self-contained HTML document; on the site (`nav`: who is signed in),
    with the navigation bar."""
    return environment().get_template("report.html").render(
        page=page, nav=nav is not None, **(nav or {}))


def failure_lines(status: str, error: str | None, report: Mapping[str, Any],
                  first: FirstFailure | None, base_url: str | None, api_kind: str | None,
                  model: str | None = None, *, detail: str | None = None,
                  request: str | None = None) -> list[str]:
    """What failed, where and why, in sentences: the run's own error (a run that could not
    measure), then its failed requests (how many of how many, by class), the first one's
    class and HTTP status, the request it was (`request`, else the base URL and the API's
    path: hints.request_target) and, where known, its error detail (`detail`: the server's
    words, as `sustain probe --html` has them), and a hint for the usual mistakes."""
    lines = []
    if error:
        lines.append(f"The run {status if status == 'failed' else 'was ' + status}: {error}")
    if first is not None:
        errors = report.get("errors") if isinstance(report.get("errors"), Mapping) else {}
        classes = ", ".join(f"{k} {v}" for k, v in sorted(
            (errors or {}).items(), key=lambda kv: -kv[1]))
        attempts = report.get("attempts")
        failed = sum(v for v in (errors or {}).values() if isinstance(v, int)) or first.failed
        http = f"HTTP {first.http_status}" if first.http_status is not None \
            else "no HTTP answer"
        target = request or request_target(base_url, api_kind)
        words = after_status(detail, first.http_status)[:MAX_DETAIL_CHARS]
        lines.append(
            f"{failed} of {attempts if isinstance(attempts, int) else '?'} requests failed"
            + (f" ({classes})" if classes else "")
            + f"; the first: {first.error_class} ({http})"
            + (f" from {target}" if target else "") + (f": {words}" if words else "")
            + ("" if words.endswith((".", "…", "!", "?")) else "."))
        hint = failure_hint(first.error_class, first.http_status, base_url or "", model,
                            flags=False, detail=detail) if base_url else None
        if hint:
            lines.append(f"Hint: {hint}.")
    return lines


def with_probe_link(page: RunPage, probe_id: int, probe_name: str) -> RunPage:
    """The page as the site serves it: its title links back to its probe's page."""
    return _replace(page, probe_link=(f"/probes/{probe_id}", probe_name))
