"""Settings from the environment (prefix SUSTAIN_); CLI flags override them."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from sustain.probes.client.egress import EgressPolicy, parse_targets
from sustain.probes.client.secret_policy import SecretPolicy, own_credentials, parse_env_globs
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.service.access.hosts import parse_allowed_hosts
from sustain.service.access.keys import weak_key_reason
from sustain.service.evaluation.drift_watch import parse_watched
from sustain.service.history.windows import parse_duration
from sustain.service.policy.expansion import ExpansionPolicy
from sustain.service.policy.limits import LoadLimits, ObjectLimits
from sustain.service.policy.reach import Reach
from sustain.service.server_settings import ServerSettings, renamed_from


class Settings(ServerSettings):
    """Every SUSTAIN_* variable. docs/configuration.md's table is made from these fields
    (sustain.service.reference.settings_table), descriptions and defaults included."""

    alert_evaluation_s: float = Field(
        validation_alias=renamed_from("alert_evaluation_s"),
        default=15.0, ge=1, le=3600,
        description="How often each replica evaluates alerts (SLO burn-rate tiers).",
    )
    alert_repeat_s: float = Field(
        validation_alias=renamed_from("alert_repeat_s"),
        default=4 * 3600, ge=0, le=7 * 86400,
        description="How often a firing alert is notified again (0: never).",
    )
    external_url: str | None = Field(
        default=None,
        description="How users reach this service (e.g. https://sustain.example.com); the "
        "generatorURL of notifications, which link to <url>/api/v1/alerts/<fingerprint>. "
        "Default: http://<host>:<port>.",
    )
    notify_poll_s: float = Field(
        validation_alias=renamed_from("notify_poll_s"),
        default=1.0, gt=0, le=60,
        description="How often each replica looks for notifications to deliver (a replica that "
        "just moved an alert delivers at once).",
    )
    notify_max_attempts: int = Field(
        default=10, ge=1, le=100,
        description="Attempts (each with 3 quick tries) before a delivery is failed.",
    )
    notify_retry_max_s: float = Field(
        validation_alias=renamed_from("notify_retry_max_s"),
        default=600.0, ge=1, le=86400,
        description="Longest wait between delivery attempts (backoff doubles from 5 s).",
    )
    alertmanager_resend_s: float = Field(
        validation_alias=renamed_from("alertmanager_resend_s"),
        default=60.0, ge=1, le=3600,
        description="How often firing alerts are re-sent to Alertmanager notifiers; one "
        "not re-sent for 4 periods ends by itself there.",
    )
    endpoint_down_runs: int = Field(
        default=3, ge=1, le=100,
        description="Consecutive failed runs (no request succeeded) of a probe that fire "
        "SustainEndpointDown.",
    )
    drift_evaluation_s: float = Field(
        validation_alias=renamed_from("drift_evaluation_s"),
        default=300.0, ge=1, le=86400,
        description="How often drift findings (sustain_drift_ratio, SustainDrift) are "
        "recomputed (by one replica).",
    )
    drift_window: str = Field(
        default="24h", description="Recent window compared by drift findings.")
    drift_baseline: str = Field(
        default="7d", description="Baseline window before it.")
    drift_metrics: str = Field(
        default="ttft:p99,e2e:p99,output_tokens:mean,quality:mean,ttfo:p99,reasoning_share:mean",
        description="Comma-separated metric:stat pairs that drift findings watch.",
    )
    config: Path | None = Field(
        default=None,
        description="A YAML config file (endpoints, workloads, probes, SLOs, notifiers) synced "
        "to the database at start, on SIGHUP and every SUSTAIN_CONFIG_RELOAD_S (the "
        "same as `serve --config`).",
    )
    config_reload_s: float = Field(
        validation_alias=renamed_from("config_reload_s"),
        default=60.0, ge=0, le=86400,
        description="How often `serve --config FILE` re-reads the file (0: only at start and "
        "on SIGHUP).",
    )

    # --- access ---
    admin_key: SecretStr | None = Field(
        default=None,
        description="A bootstrap admin API key (sk_sustain_ followed by at least 32 "
        "characters that look random: repeated, cyclic or sequential characters are refused, "
        "at least 96 bits estimated from character and step entropy; `sustain keys generate` "
        "prints one). Checked in memory, never stored; create named keys with it.",
    )
    metrics_auth: bool = Field(
        default=False, description="Require a viewer key on /metrics (Prometheus: "
        "`authorization: {credentials_file: ...}`).")
    public_status_page: bool = Field(
        default=False, description="Serve the status page (/) without signing in.")
    anonymous_read: bool = Field(
        default=False,
        description="Let callers without a key read (viewer role). `sustain demo` sets it on "
        "loopback; never set it on a shared deployment. On a host other than loopback "
        "`serve` refuses to start with it unless the value is exactly `true`, and then warns. "
        "It applies only to requests whose Host header is a loopback name (or, when "
        "SUSTAIN_ALLOWED_HOSTS lists names, one of those); any other Host gets 401, so a page "
        "on another site whose name resolves to 127.0.0.1 (DNS rebinding) reads nothing.",
    )
    session_hours: float = Field(
        default=12.0, gt=0, le=24 * 30,
        description="How long a status-page sign-in lasts.",
    )
    # --- what probes may read and reach ---
    secret_env: str = Field(
        default="",
        description="Comma-separated environment variable names or globs (fnmatch, "
        "case-sensitive: `OPENAI_API_KEY,LLM_*`) that `env:` secret references may read. "
        "`SUSTAIN_*`, `*DATABASE_URL*`, `PG*`, `POSTGRES_*` and any variable holding the "
        "database URL, its password or the admin key are never readable.",
    )
    secret_dir: Path = Field(
        default=Path("/var/run/secrets/sustain"),
        description="`file:` secret references resolve only to files under this directory "
        "(after resolving links; never /proc, /sys or /dev), of at most 64 KiB.",
    )
    dataset_dir: Path | None = Field(
        default=None,
        description="Workload dataset, sessions and tokenizer files and trace profile paths "
        "must lie under this directory, after resolving links (unset: none may be named "
        "through the API or a config file).",
    )
    dataset_max_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024, le=4 * 1024**3,
        description="Largest dataset, sessions, trace or tokenizer file a run reads, in bytes; "
        "a larger one, a directory, a device or a FIFO fails the run naming the file.",
    )
    allowed_targets: str = Field(
        default="",
        description="Comma-separated CIDRs (10.0.0.0/8) and host globs (*.internal) that "
        "endpoints and notifiers may reach (empty: any address not denied, but no "
        "`http_check.body_contains`: a body check only on listed targets).",
    )
    denied_targets: str = Field(
        default="",
        description="Comma-separated CIDRs and host globs that are refused, in addition to "
        "link-local and cloud metadata addresses (always refused).",
    )
    # --- load and size limits ---
    max_rate: float = Field(
        default=1000.0, gt=0, le=1_000_000, description="Highest request rate any stage of a "
        "profile may ask for, in requests/s: the one limit on a rate (a closed loop is paced "
        "to it too; raise it for runs past 1,000 requests/s).")
    max_concurrency: int = Field(
        default=2000, ge=1, le=1_000_000, description="Most users of a closed-loop stage, and "
        "most requests in flight (`max_in_flight`, default 256) of an open-loop one.")
    max_run_s: float = Field(
        validation_alias=renamed_from("max_run_s"),
        default=3600.0, gt=0, le=7 * 86400, description="Longest a run may be planned to "
        "take (all stages and warmups), in seconds; a run still going 120 s past it is "
        "stopped.")
    max_run_requests: int = Field(
        default=1_000_000, ge=1, le=100_000_000, description="Most requests one run may "
        "plan to send (rate x time, or `max_requests`); a run that reaches it anyway "
        "(closed-loop users send as fast as the endpoint answers) is stopped there.")
    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1024, le=256 * 1024 * 1024,
        description="Largest request body the API accepts, in bytes (larger: 413, refused "
        "before it is read whole).",
    )

    max_total_rate: float = Field(
        default=10_000.0, gt=0, le=10_000_000,
        description="Highest request rate all enabled probes together may plan, in "
        "requests/s (a closed loop counts at SUSTAIN_MAX_RATE); beyond it a create, change "
        "or enable is a 409.")
    # --- how many objects, and how much of each ---
    max_endpoints: int = Field(
        default=1000, ge=1, le=1_000_000, description="Most endpoints (beyond: 409).")
    max_probes: int = Field(
        default=10_000, ge=1, le=1_000_000, description="Most probes (beyond: 409).")
    max_slos: int = Field(
        default=1000, ge=1, le=1_000_000, description="Most SLOs (beyond: 409).")
    max_notifiers: int = Field(
        default=100, ge=1, le=100_000, description="Most notifiers (beyond: 409).")
    page_size: int = Field(
        default=100, ge=1, le=10_000,
        description="Items a list answers when the caller names no `limit`.")
    max_page_size: int = Field(
        default=1000, ge=1, le=100_000, description="Largest `limit` a list accepts (beyond: "
        "422 `query.limit`).")
    # --- the HTTP server ---
    http_header_timeout_s: float = Field(
        validation_alias=renamed_from("http_header_timeout_s"),
        default=10.0, gt=0, le=600,
        description="Seconds a client has to send a whole request, head and body, counted "
        "from connecting (or from the first byte of the next request on a kept-alive "
        "connection); a connection that misses it is closed.")
    http_max_open_connections: int = Field(
        default=2000, ge=16, le=1_000_000,
        description="Open client connections the server keeps; a new one past it closes the "
        "connection idle or still sending the longest (never one being answered), so /healthz "
        "stays reachable. Lowered, with a warning, to fit the soft file limit (ulimit -n) less "
        "what the replica needs otherwise.")
    allowed_hosts: str = Field(
        default="",
        description="Comma-separated host names, `*.example.com` globs or IP addresses "
        "(`[::1]` for IPv6) the service answers for, checked against the Host header (empty: "
        "any); any other host gets 400. /healthz, /readyz and /metrics answer whatever the "
        "host (kubelet and Prometheus use the pod's IP).")
    # --- audit and sign-in ---
    audit_retention_days: int = Field(
        default=90, ge=1, le=36500,
        description="Days audit log rows are kept; expired sign-in sessions are purged too.")
    config_env: str = Field(
        default="",
        description="Comma-separated environment variable names or globs (case-sensitive) a "
        "config file's `${NAME}` / `${NAME:-default}` may expand (empty: none); any other name "
        "is an error at its line. `SUSTAIN_*`, `*DATABASE_URL*`, `PG*`, `POSTGRES_*`, anything "
        "SUSTAIN_SECRET_ENV allows and any variable holding the database URL, its password or "
        "the admin key are never expanded.")

    # --- bounds in total: what one credential or socket can make the service hold ---
    # (sustain.service.bounds lists each with who can push it and what happens beyond it;
    # docs/limits.md is its table)
    # -- request heads --
    http_max_head_bytes: int = Field(
        default=64 * 1024, ge=1024, le=16 * 1024 * 1024,
        description="Largest request head (request line and every header line) the server "
        "reads, in bytes; a larger one is answered 431 and its connection closed.")
    # -- agent uploads --
    agent_upload_max_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024 * 1024, le=4 * 1024**3,
        description="Bytes of one agent upload's parts together, and of all the unfinished "
        "uploads one agent key leaves waiting (beyond: 413 for the upload, 409 for a new "
        "one).")
    agent_upload_max_itl_values: int = Field(
        default=65_536, ge=16, le=10_000_000,
        description="Inter-token latencies one uploaded sample may carry (beyond: 422).")
    agent_upload_max_age_s: float = Field(
        validation_alias=renamed_from("agent_upload_max_age_s"),
        default=3 * 86400.0, ge=3600, le=365 * 86400,
        description="How old a tick an agent may still upload a run for, in seconds (an agent "
        "spools runs while the service is unreachable); older, or in the future: 422.")
    agent_max_names: int = Field(
        default=32, ge=1, le=100_000,
        description="Agent processes (names) one agent key may heartbeat as within the "
        "liveness window; one more is a 409.")
    # -- readers and exports --
    export_max_concurrent_per_key: int = Field(
        default=2, ge=1, le=1000,
        description="Sample exports (CSV, Parquet, JSON sample pages) one key or anonymous "
        "address may have in flight at once (beyond: 429).")
    export_max_concurrent: int = Field(
        default=8, ge=1, le=10_000,
        description="Sample exports in flight at once over all callers (beyond: 429).")
    export_write_timeout_s: float = Field(
        validation_alias=renamed_from("export_write_timeout_s"),
        default=30.0, gt=0, le=3600,
        description="How long a reader may take to accept the next chunk of an export "
        "before its connection is closed, in seconds.")
    database_api_pool_size: int = Field(
        default=10, ge=1, le=1000,
        description="Database connections the REST API and pages may use at once, apart "
        "from SUSTAIN_DATABASE_POOL_SIZE, which measuring, storing and alerting keep for "
        "themselves (a caller that waits past 5 s for one gets 503).")
    # -- alerting --
    notify_max_response_bytes: int = Field(
        default=64 * 1024, ge=1024, le=16 * 1024 * 1024,
        description="Bytes of a notifier's answer that are read (never decompressed); the "
        "rest is discarded.")
    max_silences: int = Field(
        default=1000, ge=1, le=1_000_000, description="Most silences not yet expired "
        "(pending or active; beyond: 409). Expired ones stay as a record and are not "
        "counted.")
    # -- what probes keep --
    rag_max_index_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024 * 1024, le=16 * 1024**3,
        description="Bytes of embedding vectors a RAG probe's index may hold (beyond: the "
        "run fails naming the limit).")
    media_max_decoded_bytes: int = Field(
        default=1024 * 1024 * 1024, ge=1024 * 1024, le=16 * 1024**3,
        description="Bytes of images and audio a run may hold decoded at once, over all its "
        "users (each file read once, however its path is spelled; beyond: the run fails "
        "naming the limit).")

    def load_limits(self) -> LoadLimits:
        """The limits every load profile is held to (see sustain.service.policy.limits)."""
        return LoadLimits(max_rate=self.max_rate, max_concurrency=self.max_concurrency,
                          max_run_s=self.max_run_s,
                          max_run_requests=self.max_run_requests,
                          max_workers=max(1, self.worker_processes()),
                          max_total_rate=self.max_total_rate,
                          objects=ObjectLimits(endpoints=self.max_endpoints,
                                               probes=self.max_probes, slos=self.max_slos,
                                               notifiers=self.max_notifiers,
                                               silences=self.max_silences))

    @field_validator("drift_window", "drift_baseline")
    @classmethod
    def _duration(cls, value: str) -> str:

        parse_duration(value.strip())
        return value.strip()

    @field_validator("drift_metrics")
    @classmethod
    def _watched(cls, value: str) -> str:

        if not parse_watched(value):
            raise ValueError("name at least one metric:stat pair, e.g. ttft:p99")
        return value

    @field_validator("external_url")
    @classmethod
    def _external(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value or None

    @field_validator("allowed_hosts")
    @classmethod
    def _allowed_hosts(cls, value: str) -> str:

        parse_allowed_hosts(value)
        return value

    @field_validator("secret_env", "config_env")
    @classmethod
    def _env_globs(cls, value: str) -> str:
        parse_env_globs(value)
        return value

    @field_validator("allowed_targets", "denied_targets")
    @classmethod
    def _targets(cls, value: str) -> str:
        parse_targets(value)
        return value

    def reach(self, database_url: str | None = None) -> Reach:
        """What this replica's probes and notifiers may read and reach. `database_url` is the
        one in use (the embedded server's, when none is configured): a secret reference
        holding it, its password or the admin key is refused whatever its name."""
        admin = None if self.admin_key is None else self.admin_key.get_secret_value()
        return Reach(
            secrets=SecretPolicy(
                env_globs=parse_env_globs(self.secret_env), secret_dir=self.secret_dir,
                forbidden_values=own_credentials(database_url or self.database_url, admin)),
            egress=EgressPolicy.parse(self.allowed_targets, self.denied_targets),
            datasets=DatasetPolicy(directory=self.dataset_dir, max_bytes=self.dataset_max_bytes,
                                   rag_max_index_bytes=self.rag_max_index_bytes,
                                   media_max_bytes=self.media_max_decoded_bytes))

    def config_expansion(self, database_url: str | None = None) -> ExpansionPolicy:
        """The variables a config file's `${NAME}` may expand: those SUSTAIN_CONFIG_ENV names,
        less those the secret policy of reach(database_url) forbids or lets `env:` read."""
        return ExpansionPolicy(parse_env_globs(self.config_env), self.reach(database_url).secrets)

    @field_validator("admin_key")
    @classmethod
    def _admin_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None

        reason = weak_key_reason(value.get_secret_value())
        if reason is not None:
            raise ValueError(reason)
        return value
