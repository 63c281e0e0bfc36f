"""Settings from the environment (prefix SUSTAIN_); CLI flags override them."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("sustain", appauthor=False))


class Settings(BaseSettings):
    """Every SUSTAIN_* variable. The README's configuration table lists the same fields."""

    model_config = SettingsConfigDict(env_prefix="SUSTAIN_", extra="ignore")

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
    log_format: Literal["text", "json"] = Field(default="text", description="Log line format.")
    auto_migrate: bool = Field(
        default=True, description="Upgrade the schema to head when `serve` starts."
    )
    replica_id: str | None = Field(
        default=None, description="This replica's id in runs.claimed_by (default: hostname-pid)."
    )
    http_max_connections: int = Field(
        default=1000, ge=1, le=100_000,
        description="Connection pool size of the probe HTTP client.",
    )

    sample_retention_days: int = Field(
        default=14, ge=1, le=3650,
        description="Days raw samples are kept; older daily partitions are dropped whole.",
    )
    run_retention_days: int = Field(
        default=400, ge=1, le=36500,
        description="Days run summaries, sketches and rollups are kept.",
    )
    buffer_samples: int = Field(
        default=1_000_000, ge=1000, le=100_000_000,
        description="Samples held in memory while the database is slow or down. At 90 % full "
        "no new runs start (and /readyz says so); at 100 % samples are dropped and counted.",
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("database_url")
    @classmethod
    def _scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql", "postgres://")):
            raise ValueError("must be a postgresql:// URL")
        return value or None
