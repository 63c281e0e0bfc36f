"""Refusing, at create and update, what the operator's policies would refuse at run or
delivery time (service/policy/reach.py): a 422 naming the field, before anything is stored."""

from __future__ import annotations

import os
from collections.abc import Mapping

from sustain.probes.load.plan import sessions_problem
from sustain.probes.load.profiles import LoadProfile, TraceProfile
from sustain.probes.workload.spec import Workload
from sustain.service.errors import FieldError
from sustain.service.policy.reach import (
    Reach,
    dataset_problems,
    target_problems,
    workload_files,
    workload_secret_problems,
)


def refuse_unreachable(values: Mapping[str, object], reach: Reach) -> None:
    """FieldError naming the first URL or secret reference among `values` (an endpoint's or
    notifier's columns, or the ones a PATCH sets) that the policies refuse."""
    for field, message in target_problems(values, reach, os.environ):
        raise FieldError(field, message)


def refuse_dataset(workload: Workload | None, reach: Reach,
                   profile: LoadProfile | None = None) -> None:
    """FieldError (`workload.dataset`, `workload.sessions`, `workload.tokenizer`,
    `workload.rag.corpus`, `profile.path`) when the workload names a dataset, sessions,
    tokenizer or corpus file, or a trace profile a trace file, that the dataset policy
    refuses."""
    for name, path in [] if workload is None else workload_files(workload):
        for field, message in dataset_problems(path, reach, f"workload.{name}"):
            raise FieldError(field, message)
    if isinstance(profile, TraceProfile):
        for field, message in dataset_problems(profile.path, reach, "profile.path"):
            raise FieldError(field, message)


def refuse_workload_secrets(workload: Workload | None, reach: Reach) -> None:
    """FieldError (`workload.rag.pgvector_dsn_ref`) for a secret reference in the workload
    that the secret policy refuses."""
    for field, message in [] if workload is None else \
            workload_secret_problems(workload, reach, os.environ):
        raise FieldError(f"workload.{field}", message)


def refuse_unplayable(workload: Workload, profile: LoadProfile) -> None:
    """FieldError (`workload.sessions` or `workload.turns`) when a sessions workload is
    paired with a profile that cannot play conversations (an open loop)."""
    if workload.in_sessions and (problem := sessions_problem(profile)) is not None:
        raise FieldError("workload.sessions" if workload.sessions else "workload.turns",
                         problem)
