"""The closed sets a run summary's names must come from wherever a name becomes a Prometheus
label value (or a stored key a reader relies on): server series, RAG stages, efficiency
figures, currencies.

A run's summary is data an agent sends. Each distinct label value is a new time series in
every Prometheus that scrapes the service, so a name taken from a summary as it is would let
one upload add series without end (and a label value of any length). Uploads are refused
beyond these sets (sustain.service.runs.upload), and the exporter (sustain.service.
metrics) emits a label value only from them, so even a summary stored before the check, or by
an older version, cannot add series.

Pure data and pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from sustain.probes.measure.deployment import Deployment, Efficiency
from sustain.probes.measure.run_sketches import RAG_STAGE_METRICS
from sustain.probes.measure.sample import ErrorClass
from sustain.probes.telemetry.families import SERIES

RAG_STAGES: frozenset[str] = frozenset({*RAG_STAGE_METRICS, "generate"})
"""A RAG request's stages (embed, retrieve, rerank, generate_ttft, generate) and `overhead`:
the keys of a summary's `rag_stages_ms` and the `stage` label."""

SAMPLE_STAGES: frozenset[str] = RAG_STAGES - {"overhead"}
"""The stage names a RAG sample's `stages_ms` carries (its overhead is derived)."""

SERVER_SERIES: frozenset[str] = frozenset(series.name for series in SERIES)
"""The canonical server series sustain's own scraper reads (probes.telemetry.families);
an endpoint's `metrics_names` add to them, for that endpoint only."""

EFFICIENCY_FIGURES: frozenset[str] = frozenset(
    name for name, info in Efficiency.model_fields.items()
    if name not in ("currency", "power_source"))
"""The numeric figures of a summary's `efficiency`: the `figure` label."""

ERROR_CLASSES: frozenset[str] = frozenset(str(e.value) for e in ErrorClass)
"""The keys of a summary's `errors`."""

CURRENCY = re.compile(r"^[A-Z]{3}$")
"""A deployment's currency: three capital letters (ISO 4217's shape)."""

DEFAULT_CURRENCY: str = str(Deployment.model_fields["currency"].default)

IMAGE_SIZE = re.compile(r"^[0-9]{1,5}x[0-9]{1,5}$")
"""The keys of a summary's `ttft_by_image_size`: `WIDTHxHEIGHT`."""


def server_series(extra: Iterable[str] | None) -> frozenset[str]:
    """The server series names allowed for an endpoint: the canonical ones and its own
    `metrics_names`."""
    return SERVER_SERIES | frozenset(str(name) for name in extra or ())


def currency_of(deployment: object) -> str:
    """The currency an endpoint's stored `deployment` (a JSON map, or None) prices in."""
    if isinstance(deployment, dict):
        value = deployment.get("currency")
        if isinstance(value, str) and CURRENCY.match(value):
            return value
    return DEFAULT_CURRENCY


def currency_label(value: object) -> str:
    """The `currency` label of a stored summary's money figures: its currency when it has
    the shape of one, else the deployments' default (never an arbitrary string)."""
    return value if isinstance(value, str) and CURRENCY.match(value) else DEFAULT_CURRENCY
