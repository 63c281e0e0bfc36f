"""Every bound a caller can push against, in one place: per surface, who can push it, the
setting that sets it, and what happens beyond it.

A monitor that can be knocked over is not one. Each request is bounded, and so is the total
over many of them: the parts of an upload, the days its samples fall on, the names one agent
key heartbeats as, the exports one key reads at once, the bytes read from a notifier or an
endpoint, the objects of each kind. The numbers themselves are settings (sustain.service.config,
SUSTAIN_*); this table says what each one bounds, so the docs' limits table
(docs/limits.md) is made from it and a test keeps the two, and the settings, in step.

Pure data: nothing here reads a setting or enforces a bound (the surfaces do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Who = Literal["anyone", "viewer", "editor", "admin", "agent key", "an endpoint",
              "a notifier", "operator"]
"""Who can push the bound: any socket that reaches the port, a key of a role (or higher),
what a measured endpoint or a notifier's receiver answers, or only the operator's settings."""


@dataclass(frozen=True, slots=True)
class Bound:
    what: str
    """What is bounded, in the docs' words: "Request head"."""
    who: Who
    setting: str
    """The Settings field that sets it (its variable is SUSTAIN_ and the name in capitals)."""
    beyond: str
    """What happens past it: "431, connection closed"."""

    @property
    def variable(self) -> str:
        return "SUSTAIN_" + self.setting.upper()


BOUNDS: tuple[Bound, ...] = (
    # --- any socket ---
    Bound("Request head (request line and headers)", "anyone", "http_max_head_bytes",
          "431, connection closed, before the rest is read"),
    Bound("Request body", "anyone", "max_body_bytes", "413, before it is read whole"),
    Bound("Request head and body in time", "anyone", "http_header_timeout_s",
          "connection closed"),
    Bound("Open client connections", "anyone", "http_max_open_connections",
          "the oldest idle or slow connection is closed"),
    # --- readers ---
    Bound("List pages", "viewer", "max_page_size", "422 `query.limit`"),
    Bound("Sample exports in flight per key (or anonymous address)", "viewer",
          "export_max_concurrent_per_key", "429 with `Retry-After`"),
    Bound("Sample exports in flight in all", "viewer", "export_max_concurrent",
          "429 with `Retry-After`"),
    Bound("A reader that stops reading an export", "viewer", "export_write_timeout_s",
          "connection closed; its database transaction was never held across a write"),
    Bound("Database connections of the API and pages", "viewer", "database_api_pool_size",
          "503 after 5 s; measuring and storing keep `SUSTAIN_DATABASE_POOL_SIZE` of their own"),
    # --- writers ---
    Bound("Endpoints", "editor", "max_endpoints", "409 naming the variable"),
    Bound("Probes", "editor", "max_probes", "409 naming the variable"),
    Bound("SLOs", "editor", "max_slos", "409 naming the variable"),
    Bound("Notifiers", "editor", "max_notifiers", "409 naming the variable"),
    Bound("Silences pending or active (and as many expired ones kept as a record)", "editor",
          "max_silences", "409 naming the variable; older expired ones are deleted"),
    Bound("A profile's request rate", "editor", "max_rate", "422 naming the field"),
    Bound("A profile's users or requests in flight", "editor", "max_concurrency",
          "422 naming the field"),
    Bound("A run's planned length", "editor", "max_run_s", "422 naming the field"),
    Bound("A run's planned requests; the samples of one agent upload", "editor",
          "max_run_requests", "422 naming the field (`body.samples` for an upload)"),
    Bound("All enabled probes' planned rate", "editor", "max_total_rate",
          "409 naming the variable"),
    Bound("Dataset, sessions, trace and tokenizer files", "editor", "dataset_max_bytes",
          "the run fails naming the file"),
    # --- agent keys ---
    Bound("One agent upload, all its parts; and all unfinished uploads of one agent key",
          "agent key", "agent_upload_max_bytes",
          "413 for the part that crosses it; 409 for a new upload while others wait"),
    Bound("Inter-token latencies of one uploaded sample", "agent key",
          "agent_upload_max_itl_values", "422 naming the sample"),
    Bound("How old an uploaded run's tick may be (none in the future)", "agent key",
          "agent_upload_max_age_s", "422 `body.tick`"),
    Bound("Agent processes (names) heartbeating under one agent key", "agent key",
          "agent_max_names", "409 naming the variable (a live name, or one taking a stale "
          "one's place, beats on)"),
    # --- what the service reads from others ---
    Bound("A notifier receiver's answer", "a notifier", "notify_max_response_bytes",
          "the rest is discarded unread; never decompressed"),
    Bound("Embedding vectors a RAG probe's index holds", "an endpoint", "rag_max_index_bytes",
          "the run fails naming the variable"),
    Bound("Images and audio a run holds decoded", "editor", "media_max_decoded_bytes",
          "the run fails naming the variable"),
    Bound("Samples held while the database is away", "operator", "buffer_samples",
          "no new runs at 90 %; samples dropped and counted at 100 %"),
    Bound("Connections one measurement worker opens to endpoints", "operator",
          "http_max_connections", "requests wait for a connection (their wait is lag)"),
    Bound("Attempts to deliver one notification", "operator", "notify_max_attempts",
          "the delivery is `failed`"),
    Bound("Wait between delivery attempts", "operator", "notify_retry_max_s",
          "the wait stops doubling"),
)


def format_default(setting: str, value: object) -> str:
    """A default as the docs write it: 64 KiB, 1,000, 30 s."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"`{value}`"
    if setting.endswith("_bytes") and value >= 1024:
        for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
            if value % size == 0:
                return f"{int(value // size):,} {unit}"
    if setting.endswith(("_seconds", "_s")):
        return f"{value:,g} s"
    return f"{value:,}" if isinstance(value, int) else f"{value:,g}"


def markdown_table(defaults: dict[str, object]) -> str:
    """The docs' limits table: one row a bound, with its variable and default (`defaults`:
    each setting's default, by field name)."""
    rows = ["| What | Who can push it | Variable | Default | Beyond it |",
            "|---|---|---|---|---|"]
    rows += [f"| {b.what} | {b.who} | `{b.variable}` | "
             f"{format_default(b.setting, defaults[b.setting])} | {b.beyond} |"
             for b in BOUNDS]
    return "\n".join(rows) + "\n"
