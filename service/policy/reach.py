"""What probes and notifiers may read and reach: the operator's three policies, and
the check every endpoint, notifier and workload passes when it is created or changed, the same
for the REST API and the config file.

A check returns problems as (field, message) pairs, field named as the API names it
(`base_url`, `url`, `auth_secret_ref`, `http_check.body_contains`, `workload.dataset`,
`workload.tokenizer`): the API answers the first as a 422, the config file reports them all
with their lines. The same policies hold again at run and
delivery time (the settings may have changed since), where a refusal is a run error, a
failed delivery or an `egress_denied` sample. Messages name references and hosts, which are
not secret, never a secret's value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sustain.probes.client.egress import EgressPolicy
from sustain.probes.client.secret_policy import SecretPolicy
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.spec import Workload

WORKLOAD_FILES = ("dataset", "sessions", "tokenizer")
"""A workload's fields that name a file it reads: each under SUSTAIN_DATASET_DIR."""


def workload_files(workload: Workload) -> list[tuple[str, str | None]]:
    """(field, path) of every file `workload` names (None where it names none): its
    WORKLOAD_FILES and a RAG probe's corpus (`rag.corpus`)."""
    files = [(name, getattr(workload, name)) for name in WORKLOAD_FILES]
    files.append(("rag.corpus", None if workload.rag is None else workload.rag.corpus))
    return files
def workload_secret_problems(workload: Workload, reach: Reach,
                             environ: Mapping[str, str] | None = None) -> list[Problem]:
    """Problems of the secret references a workload holds (a RAG probe's pgvector URL,
    `rag.pgvector_dsn_ref`), against the secret policy, field named within the workload."""
    ref = None if workload.rag is None else workload.rag.pgvector_dsn_ref
    if ref is None:
        return []
    reason = reach.secrets.check(ref, environ)
    return [] if reason is None else [("rag.pgvector_dsn_ref", f"{ref}: {reason}")]


URL_FIELDS = frozenset({"base_url", "url", "metrics_url"})
"""Fields holding a URL sustain connects to (an endpoint's API root and metrics, a
notifier's URL)."""
EGRESS_SETTINGS = "SUSTAIN_ALLOWED_TARGETS / SUSTAIN_DENIED_TARGETS"

Problem = tuple[str, str]
"""(field, message)."""


@dataclass(frozen=True, slots=True)
class Reach:
    """The policies of one replica, built from its settings (Settings.reach). The default
    reaches anywhere but link-local and metadata addresses, and reads no secret or dataset."""

    secrets: SecretPolicy = field(default_factory=SecretPolicy)
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    datasets: DatasetPolicy = field(default_factory=DatasetPolicy)


def egress_message(reason: str) -> str:
    return f"not reachable under the egress policy ({EGRESS_SETTINGS}): {reason}"


def target_problems(values: Mapping[str, object], reach: Reach,
                    environ: Mapping[str, str] | None = None) -> list[Problem]:
    """Problems of an endpoint's or notifier's fields (all of them, or only those a PATCH
    sets): every URL field against the egress policy, every `*_secret_ref` against the secret
    policy (with `environ`, a variable holding one of sustain's own credentials too). A URL
    held behind a secret reference is judged when it is resolved, at delivery."""
    problems: list[Problem] = []
    for name, value in values.items():
        if value is None:
            continue
        if name in URL_FIELDS:
            reason = reach.egress.check_url(str(value))
            if reason is not None:
                problems.append((name, egress_message(reason)))
        elif name.endswith("_secret_ref"):
            reason = reach.secrets.check(str(value), environ)
            if reason is not None:
                problems.append((name, f"{value}: {reason}"))
        elif name == "http_check":
            problems.extend(body_check_problems(value, reach))
    return problems


def body_check_problems(check: object, reach: Reach) -> list[Problem]:
    """Problems of an `http` check (its column value, a mapping): a `body_contains` tells
    whoever reads the run whether a target's response holds a text, so it is allowed only
    where the operator listed the targets (see EgressPolicy.body_check_refusal)."""
    contains = check.get("body_contains") if isinstance(check, Mapping) else \
        getattr(check, "body_contains", None)
    if contains is None:
        return []
    reason = reach.egress.body_check_refusal()
    return [] if reason is None else [("http_check.body_contains", reason)]


def dataset_problems(dataset: str | None, reach: Reach, field_name: str = "workload.dataset"
                     ) -> list[Problem]:
    """Problems of a file a workload names (a dataset, sessions, a tokenizer, a trace: None,
    no file, no problem); `field_name` is the field it is in."""
    if dataset is None:
        return []
    reason = reach.datasets.check(dataset)
    return [] if reason is None else [(field_name, reason)]
