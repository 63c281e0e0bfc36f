"""Prometheus exposition (docs/prometheus.md), on an app-owned registry.

Request counters and latency histograms are observed by this replica as its runs finish;
Prometheus sums them over replicas. Last-run gauges are read from the database through a
custom collector, so every replica reports the same, current values. A run's summary may
have come from an agent: the names in it that become label values (server series, RAG
stages, efficiency figures, currency) are emitted only from their closed sets
(runs.label_sets), so no stored summary can add series.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sustain.probes.measure.deployment import Deployment
from sustain.probes.measure.sample import Sample
from sustain.probes.renamed import stored_figure
from sustain.service.access.auth_failures import AuthFailure
from sustain.service.db.runs import LastRun
from sustain.service.db.slos import SloSnapshot
from sustain.service.evaluation.slo_status import window_label
from sustain.service.ingest.buffer import SampleBuffer
from sustain.service.ingest.writer import SampleWriter
from sustain.service.otlp.run_target import run_target
from sustain.service.otlp.setup import OtlpExport
from sustain.service.probe_metrics import SERIES_LABELS, ProbeMetrics
from sustain.service.runs.label_sets import (
    EFFICIENCY_FIGURES,
    RAG_STAGES,
    currency_label,
    server_series,
)
from sustain.service.runs.refusals import REASONS
from sustain.service.ticks.locations import DEFAULT_LOCATION

DB_WRITE_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Batch write buckets, seconds (a batch is up to 5,000 samples plus run results)."""

RENAMED = {
    "sustain_probe_last_run_request_throughput": "sustain_probe_last_run_requests_per_second",
    "sustain_capacity_system_tps": "sustain_capacity_output_tokens_per_second",
    "sustain_probe_last_run_item_throughput": "sustain_probe_last_run_items_per_second",
    "sustain_probe_last_run_rtf": "sustain_probe_last_run_rtf_ratio",
}
"""Old name -> new name. The old names are still exported for one release, their HELP saying
"Deprecated: use <new name>.", and go in the next; so does sustain_probe_last_run_efficiency,
split into EFFICIENCY_GAUGES."""

DEFAULT_CURRENCY: str = Deployment.model_fields["currency"].default
"""The `currency` label of a run's money gauges where its efficiency names none: a
deployment's default."""


@dataclass(frozen=True)
class EfficiencyGauge:
    """One figure of a run's `summary.efficiency`, as a gauge with its unit in its name."""

    figure: str
    name: str
    help: str
    divisor: float = 1.0
    """The figure over this is the gauge, in base units (kW to W, per million to per one)."""
    money: bool = False
    """In the deployment's currency: labelled `currency`."""


EFFICIENCY_GAUGES = (
    EfficiencyGauge(
        "output_tps_per_accelerator",
        "sustain_probe_last_run_output_tokens_per_second_per_accelerator",
        "Output tokens per second per accelerator of the endpoint's deployment, in the "
        "probe's newest run."),
    EfficiencyGauge(
        "output_tps_per_kw", "sustain_probe_last_run_output_tokens_per_joule",
        "Output tokens per joule (output tokens per second per watt; x1000: per kW) at the "
        "power sustain_probe_last_run_power_watts, in the probe's newest run.", divisor=1000.0),
    EfficiencyGauge(
        "power_w", "sustain_probe_last_run_power_watts",
        "The power the newest run's energy figures use: measured over the run by the "
        "endpoint's DCGM exporter (metrics_url), else declared by its deployment."),
    EfficiencyGauge(
        "joules_per_output_token", "sustain_probe_last_run_energy_per_output_token_joules",
        "Energy per output token of the probe's newest run: power / output tokens per "
        "second."),
    EfficiencyGauge(
        "joules_per_good_token", "sustain_probe_last_run_energy_per_good_token_joules",
        "Energy per good output token (of requests that met every SLO threshold) of the "
        "probe's newest run."),
    EfficiencyGauge(
        "cost_per_million_output_tokens", "sustain_probe_last_run_cost_per_output_token",
        "The deployment's price per output token of the probe's newest run (price_per_hour "
        "/ output tokens per hour), in `currency`, the deployment's.", divisor=1e6, money=True),
    EfficiencyGauge(
        "cost_per_million_good_tokens", "sustain_probe_last_run_cost_per_good_token",
        "The deployment's price per good output token (of requests that met every SLO "
        "threshold) of the probe's newest run, in `currency`, the deployment's.",
        divisor=1e6, money=True),
)
"""sustain_probe_last_run_efficiency{figure} split by unit (it is still exported for one
release, and goes in the next)."""


def _deprecated(name: str) -> str:
    return f"Deprecated: use {name}. Removed in the next release. "


class LastRunCollector(Collector):
    """Gauges of each probe's newest finished run, from a snapshot refreshed before a scrape."""

    def __init__(self) -> None:
        self.snapshot: Sequence[LastRun] = ()

    def describe(self) -> Iterable[Metric]:
        return self._families(())

    def collect(self) -> Iterable[Metric]:
        return self._families(self.snapshot)

    @staticmethod
    def _families(snapshot: Sequence[LastRun]) -> list[Metric]:
        labels = list(SERIES_LABELS)
        timestamp = GaugeMetricFamily(
            "sustain_probe_last_run_timestamp_seconds",
            "Unix time when the probe's newest run finished.", labels=labels)
        success = GaugeMetricFamily(
            "sustain_probe_last_run_success",
            "1 if the probe's newest run succeeded, else 0.", labels=labels)
        availability = GaugeMetricFamily(
            "sustain_probe_last_run_availability_ratio",
            "Successes / attempts in the probe's newest run.", labels=labels)
        throughput_help = "Successful requests per second in the probe's newest run."
        throughput = GaugeMetricFamily(
            "sustain_probe_last_run_requests_per_second", throughput_help, labels=labels)
        old_throughput = GaugeMetricFamily(
            "sustain_probe_last_run_request_throughput",
            _deprecated(throughput.name) + throughput_help, labels=labels)
        latency = {
            metric: GaugeMetricFamily(
                f"sustain_probe_last_run_{metric}_seconds",
                f"{metric.upper()} percentiles of the probe's newest run.",
                labels=[*labels, "quantile"])
            for metric in ("ttft", "tpot", "e2e", "ttfo")
        }
        reasoning = GaugeMetricFamily(
            "sustain_probe_last_run_reasoning_share_ratio",
            "Reasoning tokens over output tokens in the probe's newest run (of a reasoning "
            "model; 0 for one that answers at once).", labels=labels)
        server = GaugeMetricFamily(
            "sustain_probe_last_run_server_metric",
            "The server's own series (its endpoint's metrics_url) over the probe's newest "
            "run: max, mean and last scraped value.", labels=[*labels, "series", "stat"])
        capacity = {unit: GaugeMetricFamily(
            f"sustain_capacity_{unit}",
            f"The highest {unit} that met the SLO in the capacity probe's newest run "
            "(0: not even the lowest level met it).", labels=labels)
            for unit in ("concurrency", "rate")}
        capacity_help = ("Output tokens per second, all users together, at the highest level "
                         "that met the SLO in the capacity probe's newest run.")
        capacity_tps = GaugeMetricFamily(
            "sustain_capacity_output_tokens_per_second", capacity_help, labels=labels)
        old_capacity_tps = GaugeMetricFamily(
            "sustain_capacity_system_tps", _deprecated(capacity_tps.name) + capacity_help,
            labels=labels)
        efficiency = {gauge.figure: GaugeMetricFamily(
            gauge.name, gauge.help, labels=[*labels, "currency"] if gauge.money else labels)
            for gauge in EFFICIENCY_GAUGES}
        old_efficiency = GaugeMetricFamily(
            "sustain_probe_last_run_efficiency",
            _deprecated(", ".join(gauge.name for gauge in EFFICIENCY_GAUGES))
            + "The newest run's efficiency figures by `figure`, in mixed units (the money "
            "ones in the deployment's currency, unlabelled).", labels=[*labels, "figure"])
        items_help = ("Inputs embedded or documents ranked per second in the probe's newest "
                      "run (openai-embeddings and rerank probes).")
        items = GaugeMetricFamily(
            "sustain_probe_last_run_items_per_second", items_help, labels=labels)
        old_items = GaugeMetricFamily(
            "sustain_probe_last_run_item_throughput", _deprecated(items.name) + items_help,
            labels=labels)
        rtf_help = ("Real-time factor percentiles (processing time / audio time; below 1 is "
                    "faster than real time) of the transcription probe's newest run.")
        rtf = GaugeMetricFamily(
            "sustain_probe_last_run_rtf_ratio", rtf_help, labels=[*labels, "quantile"])
        old_rtf = GaugeMetricFamily(
            "sustain_probe_last_run_rtf", _deprecated(rtf.name) + rtf_help,
            labels=[*labels, "quantile"])
        hits = GaugeMetricFamily(
            "sustain_probe_last_run_retrieval_hit_ratio",
            "Questions whose expected passage was retrieved, over those that named one, in "
            "the RAG probe's newest run.", labels=labels)
        stages = GaugeMetricFamily(
            "sustain_probe_last_run_rag_stage_seconds",
            "Stage time percentiles of the RAG probe's newest run (embed, retrieve, rerank, "
            "generate_ttft, generate, overhead).", labels=[*labels, "stage", "quantile"])
        for run in snapshot:
            values = [run.endpoint, run.probe, run.model, run.location]
            timestamp.add_metric(values, run.finished_at.timestamp())
            success.add_metric(values, 1.0 if run.status == "succeeded" else 0.0)
            summary = run.summary or {}
            if summary.get("availability") is not None:
                availability.add_metric(values, float(summary["availability"]))
            if (value := stored_figure(summary, "requests_per_second")) is not None:
                throughput.add_metric(values, float(value))
                old_throughput.add_metric(values, float(value))
            for metric, family in latency.items():
                dist = summary.get(f"{metric}_ms") or {}
                for name, q in (("p50", "0.5"), ("p99", "0.99")):
                    if dist.get(name) is not None:
                        family.add_metric([*values, q], float(dist[name]) / 1000.0)
            if isinstance(value := stored_figure(summary, "reasoning_share"), int | float):
                reasoning.add_metric(values, float(value))
            found = summary.get("capacity")
            if isinstance(found, dict) and found.get("unit") in capacity:
                best = found.get("max_passing")
                capacity[found["unit"]].add_metric(values, float(best or 0))
                tps = next((p.get("system_tps") for p in found.get("points") or []
                            if isinstance(p, dict) and p.get("level") == best), None)
                if isinstance(tps, int | float):
                    capacity_tps.add_metric(values, float(tps))
                    old_capacity_tps.add_metric(values, float(tps))
            if isinstance(value := stored_figure(summary, "items_per_second"), int | float):
                items.add_metric(values, float(value))
                old_items.add_metric(values, float(value))
            if isinstance(value := stored_figure(summary, "retrieval_hit_ratio"),
                          int | float):
                hits.add_metric(values, float(value))
            for name, q in (("p50", "0.5"), ("p99", "0.99")):
                if isinstance(value := (stored_figure(summary, "rtf_ratio") or {}).get(name),
                              int | float):
                    rtf.add_metric([*values, q], float(value))
                    old_rtf.add_metric([*values, q], float(value))
                for stage, dist in (summary.get("rag_stages_ms") or {}).items():
                    if stage in RAG_STAGES and isinstance(dist, dict) \
                            and isinstance(value := dist.get(name), int | float):
                        stages.add_metric([*values, str(stage), q], float(value) / 1000.0)
            figures = summary.get("efficiency") or {}
            currency = currency_label(figures.get("currency"))
            for figure, value in figures.items():
                if figure in EFFICIENCY_FIGURES and isinstance(value, int | float) \
                        and not isinstance(value, bool):
                    old_efficiency.add_metric([*values, figure], float(value))
            for gauge in EFFICIENCY_GAUGES:
                value = figures.get(gauge.figure)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    efficiency[gauge.figure].add_metric(
                        [*values, currency] if gauge.money else values,
                        float(value) / gauge.divisor)
            known = server_series(run.series_names)
            for series, stats in (summary.get("server_metrics") or {}).items():
                if series not in known:
                    continue
                for stat in ("max", "mean", "last"):
                    if isinstance(stats, dict) and stats.get(stat) is not None:
                        server.add_metric([*values, str(series), stat], float(stats[stat]))
        return [timestamp, success, availability, throughput, *latency.values(), reasoning,
                server,
                *capacity.values(), capacity_tps, *efficiency.values(), items, rtf, hits,
                stages, old_throughput, old_capacity_tps, old_efficiency, old_items, old_rtf]


class SloCollector(Collector):
    """SLO gauges and event counters, from a snapshot read before a scrape. A window without
    events has no burn rate, and an SLO without events no budget: those series are absent,
    never NaN."""

    def __init__(self) -> None:
        self.snapshot: Sequence[SloSnapshot] = ()

    def describe(self) -> Iterable[Metric]:
        return self._families(())

    def collect(self) -> Iterable[Metric]:
        return self._families(self.snapshot)

    @staticmethod
    def _families(snapshot: Sequence[SloSnapshot]) -> list[Metric]:
        objective = GaugeMetricFamily(
            "sustain_slo_objective_ratio", "The SLO's objective (good / total).",
            labels=["slo"])
        budget = GaugeMetricFamily(
            "sustain_slo_error_budget_remaining_ratio",
            "Share of the compliance window's error budget left (negative: overspent).",
            labels=["slo"])
        burn = GaugeMetricFamily(
            "sustain_slo_burn_rate",
            "Bad fraction over the window / (1 - objective).", labels=["slo", "window"])
        events = CounterMetricFamily(
            "sustain_slo_events", "SLI events counted for the SLO, by outcome.",
            labels=["slo", "outcome"])
        for slo in snapshot:
            objective.add_metric([slo.name], slo.objective)
            if slo.status.budget_remaining is not None:
                budget.add_metric([slo.name], slo.status.budget_remaining)
            for window in slo.status.windows:
                if window.burn_rate is not None:
                    burn.add_metric([slo.name, window_label(window.window_s)],
                                    window.burn_rate)
            events.add_metric([slo.name, "good"], slo.good_total)
            events.add_metric([slo.name, "bad"], slo.bad_total)
        return [objective, budget, burn, events]


class AlertCollector(Collector):
    """sustain_alerts{alertname,severity,state}: alerts in each state (inactive left out), from
    a snapshot read before a scrape."""

    def __init__(self) -> None:
        self.snapshot: Sequence[tuple[str, str, str, int]] = ()

    def describe(self) -> Iterable[Metric]:
        return self._families(())

    def collect(self) -> Iterable[Metric]:
        return self._families(self.snapshot)

    @staticmethod
    def _families(snapshot: Sequence[tuple[str, str, str, int]]) -> list[Metric]:
        family = GaugeMetricFamily("sustain_alerts", "Alerts by name, severity and state.",
                                   labels=["alertname", "severity", "state"])
        for alertname, severity, state, count in snapshot:
            family.add_metric([alertname, severity, state], count)
        return [family]


class DriftCollector(Collector):
    """sustain_drift_ratio{probe,metric,stat}: the recent window's statistic over the
    baseline's, from the latest drift findings (absent without enough data)."""

    def __init__(self) -> None:
        self.snapshot: Sequence[tuple[str, str, str, float]] = ()

    def describe(self) -> Iterable[Metric]:
        return self._families(())

    def collect(self) -> Iterable[Metric]:
        return self._families(self.snapshot)

    @staticmethod
    def _families(snapshot: Sequence[tuple[str, str, str, float]]) -> list[Metric]:
        family = GaugeMetricFamily(
            "sustain_drift_ratio",
            "Recent window's statistic / the baseline's (1: no drift), per probe.",
            labels=["probe", "metric", "stat"])
        for probe, metric, stat, ratio in snapshot:
            family.add_metric([probe, metric, stat], ratio)
        return [family]


class WriteBufferCollector(Collector):
    """The write path: samples waiting in memory, dropped, written, orphaned; write failures."""

    def __init__(self, buffer: SampleBuffer, writer: SampleWriter) -> None:
        self.buffer = buffer
        self.writer = writer

    def describe(self) -> Iterable[Metric]:
        return self._families(fill=False)

    def collect(self) -> Iterable[Metric]:
        return self._families(fill=True)

    def _families(self, fill: bool) -> list[Metric]:
        samples = GaugeMetricFamily(
            "sustain_buffer_samples", "Samples buffered in memory, not yet in the database.")
        capacity = GaugeMetricFamily(
            "sustain_buffer_capacity_samples", "Capacity of the sample buffer.")
        dropped = CounterMetricFamily(
            "sustain_samples_dropped", "Samples dropped because the buffer was full.")
        written = CounterMetricFamily(
            "sustain_samples_written", "Samples written to the database.")
        orphaned = CounterMetricFamily(
            "sustain_samples_orphaned",
            "Samples discarded because their run was deleted before they were written.")
        failures = CounterMetricFamily(
            "sustain_write_failures",
            "Failed attempts to write a batch while the database was unavailable (each is "
            "retried).")
        rejected = CounterMetricFamily(
            "sustain_storage_rejected",
            "Records the database refused (kept in dead_letters, their run failed), by reason.",
            labels=["reason"])
        if fill:
            samples.add_metric([], self.buffer.samples)
            capacity.add_metric([], self.buffer.capacity)
            dropped.add_metric([], self.buffer.dropped_total)
            written.add_metric([], self.writer.written_total)
            orphaned.add_metric([], self.writer.orphaned_total)
            failures.add_metric([], self.writer.failures_total)
            for reason in REASONS:
                rejected.add_metric([reason], self.writer.refusals.by_reason[reason])
        return [samples, capacity, dropped, written, orphaned, failures, rejected]


class Metrics:
    """Every sustain_* metric of one app instance."""

    def __init__(self, location: str = DEFAULT_LOCATION) -> None:
        self.location = location
        """This replica's location: the `location` label of what it measures."""
        self.registry = CollectorRegistry()
        self.probes = ProbeMetrics(self.registry, location)
        """Request counters and histograms, runs and skipped ticks (an agent has these too)."""
        self.ticks_skipped = self.probes.ticks_skipped
        self.db_write = Histogram(
            "sustain_db_write_seconds",
            "Time to write one batch of buffered samples and run results to the database.",
            buckets=DB_WRITE_BUCKETS_S, registry=self.registry)
        self.config_reloads = Counter(
            "sustain_config_reloads",
            "Syncs of the config file by result: ok, invalid (bad file or a name conflict; "
            "nothing applied), error (database unavailable).",
            ["result"], registry=self.registry)
        self.notifications = Counter(
            "sustain_notifications",
            "Notification attempts by notifier and result: delivered, retry, failed, "
            "silenced, skipped (a resolved whose firing never went out), resent, "
            "resend_failed (Alertmanager re-sends of firing alerts).",
            ["notifier", "result"], registry=self.registry)
        self.auth_failures = Counter(
            "sustain_auth_failures",
            "Refused authentication by reason: missing_key, unknown_key, revoked_key, "
            "forbidden_role, bad_session, login_failed, login_throttled, cross_site (each is "
            "counted; the audit log keeps a sample).",
            ["reason"], registry=self.registry)
        for reason in AuthFailure:  # every reason is a series from the start, at 0
            self.auth_failures.labels(reason.value)
        self.last_runs = LastRunCollector()
        self.registry.register(self.last_runs)
        self.slos = SloCollector()
        self.registry.register(self.slos)
        self.alerts = AlertCollector()
        self.registry.register(self.alerts)
        self.drift = DriftCollector()
        self.registry.register(self.drift)

    def watch_writes(self, buffer: SampleBuffer, writer: SampleWriter) -> None:
        self.registry.register(WriteBufferCollector(buffer, writer))

    otlp: OtlpExport | None = None
    """OpenTelemetry export of the runs this replica measures (service/otlp), set when the
    replica starts with an OTLP endpoint configured; None without one."""

    def observe_samples(self, endpoint: str, probe: str, model: str,
                        samples: Sequence[Sample]) -> None:
        self.probes.observe_samples(endpoint, probe, model, samples)
        if self.otlp is not None and (target := run_target()) is not None:
            self.otlp.observe_samples(target, probe, samples)

    def observe_notification(self, notifier: str, result: str) -> None:
        self.notifications.labels(notifier, result).inc()

    def observe_auth_failure(self, reason: AuthFailure) -> None:
        self.auth_failures.labels(reason.value).inc()

    def observe_run(self, probe: str, status: str, location: str | None = None) -> None:
        self.probes.observe_run(probe, status, location)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
