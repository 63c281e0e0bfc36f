"""RESULTS.md as a table of the latest result per benchmark: pure text in, text out.

Each benchmark owns one section, keyed by its stable name (the words before the first colon
of its heading, `## <name>: <title> — <YYYY-MM-DD HH:MM> UTC`). A run replaces its own
section and keeps the others; the summary table at the top is rebuilt from the sections (each
carries its headline figure and its ratio to the baseline on lines of their own), so it never
disagrees with them. Earlier runs live in git history, not in the file.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import datetime

NO_FIGURE = "—"
"""What the summary shows where a section gives no headline or has no baseline."""


@dataclass(frozen=True)
class Benchmark:
    """One script in benchmarks/ that records: what README.md and the summary say about it."""

    name: str
    """The stable key: the words before the colon in its heading (and in its record() title)."""
    module: str
    """The script, benchmarks/<module>.py."""
    measures: str
    target: str
    baseline: str
    """What its figures are compared with in the same run, or why nothing is."""
    command: str
    duration: str
    """Roughly how long the command takes on the 2-core machine, wall clock."""


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("accuracy", "accuracy", "client TTFT/E2E error against the server's own clock",
              "median <= 1 ms, p99 <= 3 ms at every concurrency",
              "the same measurement over httpx", "python benchmarks/accuracy.py",
              "about 2 min"),
    Benchmark("reasoning accuracy", "reasoning_accuracy",
              "a thinking model's TTFT, TTFO and E2E error against the server's own clock, "
              "and its reasoning tokens",
              "median <= 1 ms, p99 <= 3 ms at 8 users; every reasoning count right",
              "the same measurement over httpx", "python benchmarks/reasoning_accuracy.py",
              "about 1 min"),
    Benchmark("media accuracy", "media_accuracy",
              "speech, image and video figures against the server's own clock",
              "median <= 1 ms, p99 <= 3 ms (speech, images); video phases within a poll",
              "the same measurement over httpx", "python benchmarks/media_accuracy.py",
              "about 1 min"),
    Benchmark("capacity", "capacity",
              "highest constant rate one client core sustains (p99 lag <= 5 ms)",
              ">= 1,000 streamed req/s per worker core",
              "a naive httpx client (a task per request)", "python benchmarks/capacity.py",
              "2-4 min"),
    Benchmark("cpu cost", "cpu_cost", "client CPU time per 1,000 streamed requests and tokens",
              "HTTP phases and traceparent <= 5 % more CPU per request",
              "a naive httpx client; the engine without phases and traceparent; with "
              "--against, a previous commit's engine", "python benchmarks/cpu_cost.py",
              "about 2 min"),
    Benchmark("open streams", "open_streams",
              "concurrent slow streams one client holds, and its RSS",
              ">= 2,000 streams, RSS < 1 GiB, no errors", "none (target only)",
              "python benchmarks/open_streams.py", "about 20 s"),
    Benchmark("loop stall", "loop_stall",
              "a 1 s timeout's lateness while oversized responses are refused",
              "lateness <= 50 ms", "the httpx transport, same load",
              "python benchmarks/loop_stall.py", "under 1 min"),
    Benchmark("knee", "knee", "whether the capacity search finds a batch limit exactly",
              "every search finds the slot count", "none (the expected knee)",
              "python benchmarks/knee.py", "2-4 min"),
    Benchmark("RAG", "rag", "a RAG probe's stages against its end-to-end time and the server",
              "overhead <= 1 ms; stage error median <= 1 ms, p99 <= 3 ms",
              "none (each request's own E2E and the server's clock)",
              "python benchmarks/rag.py", "about 2 min"),
    Benchmark("ingest", "ingest", "samples/s from the write buffer into PostgreSQL",
              ">= 20,000 samples/s, memory bounded", "none (target only)",
              "python benchmarks/ingest.py", "about 2 min"),
    Benchmark("query", "query", "series and summary over 30 days of history, over REST",
              "< 200 ms each (median of 20)", "none (target only)",
              "python benchmarks/query.py", "minutes to seed; about 1 min with --reuse"),
    Benchmark("storage", "storage",
              "bytes PostgreSQL keeps per single-request run and per raw sample, by table",
              "<= 2 KiB per single-request run, <= 50 B per sample", "none (target only)",
              "python benchmarks/storage.py", "4-6 min"),
    Benchmark("sketch migration", "sketch_migration",
              "revision 0026 converting a week of run sketch rows into records: bytes before "
              "and after, time, longest batch, figures kept",
              "none (every run's figures the same)", "none (the rows before are the baseline)",
              "python benchmarks/sketch_migration.py", "about 2 min"),
    Benchmark("sample packing", "sample_packing",
              "the storage job packing a week of samples stored as rows into blocks: bytes "
              "before and after, samples/s, longest transaction, every sample the same",
              "none (every sample the same, bit for bit)",
              "none (the rows before are the baseline)",
              "python benchmarks/sample_packing.py", "about 2 min"),
    Benchmark("summary conversion", "summary_conversion",
              "revision 0028 and the storage job converting a week of JSONB summaries into "
              "records: bytes before and after, time, longest batch, every summary the same",
              "none (every summary the same)", "none (the JSONB before is the baseline)",
              "python benchmarks/summary_conversion.py", "about 2 min"),
    Benchmark("scheduler", "scheduler", "delay from a tick (plus jitter) to the first send",
              "p99 <= 50 ms", "none (the jitter-0 burst is a stress case beside it)",
              "python benchmarks/scheduler.py", "about 3 min"),
    Benchmark("fleet", "fleet",
              "1,000 probes on 2 replicas per location: tick-to-send, claims, DB cost",
              "tick-to-send p99 <= 50 ms",
              "--baseline REV: location b runs revision REV's code, same run",
              "python benchmarks/fleet.py", "about 14 min"),
    Benchmark("busy service", "busy_service",
              "a 100 req/s probe's lag and TTFT error while API readers load sustain",
              "lag p99 <= 5 ms, TTFT p99 within 3 ms of the server's",
              "the same probe measured in the service process (no workers)",
              "python benchmarks/busy_service.py", "about 3 min"),
    Benchmark("cancel", "cancel", "time from a cancel request to a run reading `cancelled`",
              "<= 2 s", "none (target only)", "python benchmarks/cancel.py", "under 1 min"),
    Benchmark("drift", "drift", "drift `detect` on 7 days of one-minute runs",
              "<= 200 ms per detect", "the pure-Python detect it replaced, same process",
              "python benchmarks/drift.py", "about 1 min"),
    Benchmark("demo start", "demo_start", "`sustain demo` to its first succeeded run",
              "<= 30 s", "none (target only)", "python benchmarks/demo_start.py",
              "about 1 min"),
    Benchmark("slow heads", "slow_heads",
              "/healthz latency while 3,000 slow request heads are open",
              "every /healthz within 1 s", "none (target only)",
              "python benchmarks/slow_heads.py", "about 1 min"),
    Benchmark("otlp cost", "otlp_cost",
              "CPU per request of recording a run with OpenTelemetry export on and off",
              "<= 5 % more CPU per request (measuring and recording) with export on",
              "the same samples recorded with export off, same run",
              "python benchmarks/otlp_cost.py", "about 1 min"),
    Benchmark("hostile", "hostile", "RSS and /healthz of `sustain serve` under each attack",
              "peak RSS <= baseline + 300 MB, /healthz <= 1 s, no tick missed",
              "the same service left alone (`quiet`), same run",
              "python benchmarks/hostile.py", "about 3 min"),
)
"""Every recording benchmark, in the order RESULTS.md lists them."""

HEADING = re.compile(
    r"^## (?P<name>[^:\n]+): (?P<title>.+) — (?P<when>\d{4}-\d\d-\d\d \d\d:\d\d) UTC[ \t]*$",
    re.MULTILINE)
_HEADLINE = re.compile(r"^Headline: (?P<value>.*?)[ \t]*$", re.MULTILINE)
_RATIO = re.compile(r"^Against baseline: (?P<value>.*?)[ \t]*$", re.MULTILINE)

PREAMBLE = (
    "# Benchmark results\n\n"
    "The latest run of each benchmark, written by that benchmark when it runs "
    "(`record()` in benchmarks/common.py replaces its own section and keeps the others); "
    "earlier runs are in git history. What each one measures, its target, its baseline and "
    "how to run it: [README.md](README.md).\n")


def key_of(title: str) -> str:
    """A record() title's stable key: the words before its first colon."""
    return title.split(":", 1)[0].strip()


def section(title: str, when: datetime, machine: str, command: str, body: str,
            headline: str | None = None, ratio: str | None = None) -> str:
    """One benchmark's section. `when` is rendered to the minute as UTC (pass an aware UTC
    datetime); `headline` and `ratio` are what the summary table shows for it."""
    lines = [f"Machine: {machine}", f"Command: `{command}`"]
    if headline:
        lines.append(f"Headline: {headline}")
    if ratio:
        lines.append(f"Against baseline: {ratio}")
    return (f"## {title} — {when:%Y-%m-%d %H:%M} UTC\n\n" + "  \n".join(lines) + "\n\n"
            f"{body.strip()}\n")


def split_sections(text: str) -> list[tuple[str, str]]:
    """(key, section text) for every section of `text`, in file order; text before the first
    heading (the preamble and summary) is left out. A section runs to the next heading."""
    starts = [match.start() for match in HEADING.finditer(text)] + [len(text)]
    found = []
    for begin, end in itertools.pairwise(starts):
        chunk = text[begin:end].strip() + "\n"
        match = HEADING.match(chunk)
        assert match is not None
        found.append((match["name"].strip(), chunk))
    return found


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def summary(sections: dict[str, str]) -> str:
    """The table at the top: one row per registered benchmark (then any unregistered one
    found in the file), with the headline, ratio and date its section carries."""
    known = {benchmark.name: benchmark for benchmark in BENCHMARKS}
    rows = ["| benchmark | what it measures | target | latest headline figure | "
            "ratio to its baseline | date (UTC) |", "|---|---|---|---|---|---|"]
    for name in [b.name for b in BENCHMARKS] + [k for k in sections if k not in known]:
        benchmark = known.get(name)
        text = sections.get(name)
        measures = benchmark.measures if benchmark else NO_FIGURE
        target = benchmark.target if benchmark else NO_FIGURE
        if text is None:
            headline, ratio, when = "not run yet", NO_FIGURE, NO_FIGURE
        else:
            heading = HEADING.match(text)
            when = heading["when"] if heading else NO_FIGURE
            found = _HEADLINE.search(text)
            headline = found["value"] if found else "see its section"
            found = _RATIO.search(text)
            ratio = found["value"] if found else NO_FIGURE
        rows.append("| " + " | ".join(_cell(v) for v in (
            name, measures, target, headline, ratio, when)) + " |")
    return "\n".join(rows) + "\n"


def rewrite(text: str, new: str) -> str:
    """RESULTS.md `text` with `new` (a section from `section()`) in place of the section of
    the same key, every other benchmark's newest section kept; sections in BENCHMARKS order,
    unregistered ones after them in file order, the summary rebuilt. Where `text` holds a key
    more than once (the old appended file), the last one (the newest) is kept."""
    sections: dict[str, str] = {}
    for key, chunk in split_sections(text):
        sections.pop(key, None)
        sections[key] = chunk
    for key, chunk in split_sections(new):
        sections[key] = chunk
    order = [b.name for b in BENCHMARKS if b.name in sections]
    order += [key for key in sections if key not in order]
    ordered = {key: sections[key] for key in order}
    return (PREAMBLE + "\n" + summary(ordered) + "\n"
            + "\n".join(ordered[key] for key in order))
