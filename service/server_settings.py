"""The settings of a sustain process itself: its database and data directory, what it binds,
how it logs, where it measures from, its workers, retention and timers (SUSTAIN_*). Settings
(service/config.py) adds the rest: alerting, drift, access, egress and every bound. Also the
settings' renamed variables, still read for one release."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sustain.probes.workers.pool import available_cpus
from sustain.service.ticks.locations import DEFAULT_LOCATION, location_problem

RENAMED_SETTINGS: Mapping[str, str] = {
    f"{stem}_seconds": f"{stem}_s" for stem in (
        "heartbeat", "misfire_grace", "reconcile", "shutdown_grace", "alert_evaluation",
        "alert_repeat", "notify_poll", "notify_retry_max", "alertmanager_resend",
        "drift_evaluation", "config_reload", "max_run", "http_header_timeout",
        "agent_upload_max_age", "export_write_timeout")}
"""Deprecated setting -> its name now (durations end in `_s`, as in the API: docs/api.md).
The old variable (SUSTAIN_HEARTBEAT_SECONDS) is still read for one release, the new one
first when both are set, and `serve` and `agent` log a warning naming it at start."""


def renamed_from(new: str) -> AliasChoices:
    """The variables a renamed setting is read from: its own, then its deprecated one."""
    old = next(o for o, n in RENAMED_SETTINGS.items() if n == new)
    return AliasChoices(f"SUSTAIN_{new.upper()}", f"SUSTAIN_{old.upper()}")


def deprecated_variables(environ: Mapping[str, str]) -> list[str]:
    """A warning for each deprecated variable set in `environ` (names are case-insensitive,
    as Settings reads them)."""
    given = {name.upper() for name in environ}
    return [f"SUSTAIN_{old.upper()} is deprecated and will be removed in the next release: "
            f"use SUSTAIN_{new.upper()}" for old, new in RENAMED_SETTINGS.items()
            if f"SUSTAIN_{old.upper()}" in given]


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("sustain", appauthor=False))


class ServerSettings(BaseSettings):
    """The process's own SUSTAIN_* variables (the first rows of docs/configuration.md)."""

    model_config = SettingsConfigDict(env_prefix="SUSTAIN_", extra="ignore",
                                      validate_by_name=True)

    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL (postgresql://user:pass@host:port/db). Unset: embedded "
        "PostgreSQL in DATA_DIR/postgres.",
    )
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where the embedded PostgreSQL cluster and other local state live.",
    )
    host: str = Field(default="127.0.0.1", description="Address the HTTP server binds.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port the HTTP server binds.")
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Log level."
    )
    log_format: Literal["text", "json"] = Field(
        default="text", description="Log line format: json is one JSON object per line.")
    auto_migrate: bool = Field(
        default=True, description="Upgrade the schema to head when `serve` starts."
    )
    replica_id: str | None = Field(
        default=None,
        description="This replica's name in runs.claimed_by and the replicas table (default: "
        "hostname-pid); one process at a time may use it."
    )
    location: str = Field(
        default=DEFAULT_LOCATION,
        description="Where this replica measures from (a region, a data centre; a DNS label "
        "such as eu-west-1). It runs the ticks of the probes that list this location, and "
        "its runs, series and metrics carry it (docs/operations.md, Locations).",
    )
    database_pool_size: int = Field(
        default=10, ge=1, le=1000,
        description="Database connections a replica keeps for measuring, storing samples and "
        "its background loops; it may open as many again under load. The REST API and pages "
        "have their own SUSTAIN_DATABASE_API_POOL_SIZE. Size both against PostgreSQL's "
        "max_connections over every replica (2 x this pool + the API pool each).",
    )
    http_max_connections: int = Field(
        default=1000, ge=1, le=100_000,
        description="Connection pool size of the probe HTTP client (per measurement worker).",
    )
    measure_workers: int | None = Field(
        default=None, ge=0, le=256,
        description="Measurement worker processes: runs send and time their requests there, "
        "never in the process that serves the API. Default: the CPUs available to the "
        "process. A profile's `workers` may not exceed it. 0 measures in the service "
        "process itself (for debugging; an API reader can then delay requests).",
    )

    sample_retention_days: int = Field(
        default=14, ge=1, le=3650,
        description="Days raw samples are kept; older daily partitions are dropped whole.",
    )
    sample_pack_after_s: float = Field(
        default=3600.0, ge=0, le=30 * 86_400,
        description="Seconds after a run finishes that its raw samples are packed: moved by "
        "the hourly storage job from rows (over 300 B a sample) into compressed blocks of up "
        "to 4,096 samples (about 43 B a sample). Reads and exports answer the same either "
        "way.",
    )
    run_retention_days: int = Field(
        default=400, ge=1, le=36500,
        description="Days runs, their summaries, sketches and the hourly and daily rollups are "
        "kept (deleted in batches).",
    )
    buffer_samples: int = Field(
        default=1_000_000, ge=1000, le=100_000_000,
        description="Samples held in memory while the database is slow or down (about 0.7 KiB "
        "each, so the default bounds the buffer near 700 MiB; lower it for small pods). At 90 % "
        "full no new runs start (and /readyz says so); at 100 % samples are dropped, counted "
        "and recorded on their run.",
    )
    heartbeat_s: float = Field(
        validation_alias=renamed_from("heartbeat_s"),
        default=5.0, ge=0.2, le=300,
        description="Heartbeat interval; a replica silent for 3 intervals is dead and its "
        "runs are marked abandoned by the others.",
    )
    misfire_grace_s: float = Field(
        validation_alias=renamed_from("misfire_grace_s"),
        default=15.0, ge=0.1, le=86400,
        description="How late a tick may still start (capped at half the probe's interval); "
        "later ones are recorded as missed runs.",
    )
    reconcile_s: float = Field(
        validation_alias=renamed_from("reconcile_s"),
        default=30.0, ge=1, le=3600,
        description="How often each replica re-reads every probe (a safety net behind "
        "LISTEN/NOTIFY) and records missed ticks.",
    )
    shutdown_grace_s: float = Field(
        validation_alias=renamed_from("shutdown_grace_s"),
        default=30.0, ge=0, le=3600,
        description="On SIGTERM, how long runs in flight may take to finish before they are "
        "marked interrupted.",
    )

    def worker_processes(self) -> int:
        """Measurement worker processes of a replica (0: it measures in-process)."""
        return available_cpus() if self.measure_workers is None else self.measure_workers

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("location")
    @classmethod
    def _location(cls, value: str) -> str:
        if (problem := location_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @field_validator("database_url")
    @classmethod
    def _scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql", "postgres://")):
            raise ValueError("must be a postgresql:// URL")
        return value or None
