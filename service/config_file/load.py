"""Reading and validating a config file: every problem found, each with file, line and field
(`sustain.yaml:14: probes[0].schedule.every: ...`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sustain.probes.load.plan import sessions_problem
from sustain.probes.load.profiles import TraceProfile
from sustain.probes.workload.spec import Workload
from sustain.service.config_file.model import ConfigFile, ProbeSpec
from sustain.service.config_file.yaml_lines import ConfigError, Located, Problem, dotted, load
from sustain.service.evaluation.thresholds import threshold_problems
from sustain.service.policy.expansion import ExpansionPolicy
from sustain.service.policy.limits import LoadLimits, limit_violations
from sustain.service.policy.reach import (
    Reach,
    dataset_problems,
    target_problems,
    workload_files,
    workload_secret_problems,
)
from sustain.service.schemas.rag_endpoints import kind_problems, pairing_problem
from sustain.service.schemas.renamed import collecting_notes

logger = logging.getLogger(__name__)

_warned: set[tuple[str, str]] = set()
"""(file, note) of each deprecated name already logged: once per process, not per reload."""


def _data_path(data: Any, loc: tuple[int | str, ...], missing: bool
               ) -> tuple[str | int, ...]:
    """The location of a pydantic error as a path into the data, leaving out the union and
    discriminator tags pydantic inserts; a missing field is named after its parent."""
    path: list[str | int] = []
    node = data
    for part in loc:
        present = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node))
        if present:
            path.append(part)
            node = node[part]
    if missing and loc and loc[-1] not in path[-1:]:
        path.append(loc[-1])
    return tuple(path)


def _validation_problems(located: Located, error: ValidationError) -> list[Problem]:
    problems = []
    for item in error.errors():
        if item["type"] == "string_type" and isinstance(item.get("input"), dict):
            continue  # the inline branch of `name | inline workload` explains the problem
        path = _data_path(located.data, tuple(item.get("loc", ())), item["type"] == "missing")
        message = str(item.get("msg", "invalid")).removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown field"
        problems.append(Problem(located.line_of(path), dotted(path), message))
    return problems or [Problem(None, "", str(error))]


def _references(config: ConfigFile, data: Mapping[str, Any]
                ) -> list[tuple[tuple[str | int, ...], str]]:
    """Duplicate names, references to undeclared endpoints, workloads and probes
    (raw_references of the file's `data`), and sessions workloads under a profile that
    cannot play them."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    names: list[tuple[str, list[str]]] = [
        ("endpoints", [e.name for e in config.endpoints]),
        ("workloads", [w.name for w in config.workloads]),
        ("probes", [p.name for p in config.probes]),
        ("slos", [s.name for s in config.slos]),
        ("notifiers", [n.name for n in config.notifiers])]
    for kind, items in names:
        seen: set[str] = set()
        for i, name in enumerate(items):
            if name in seen:
                found.append(((kind, i, "name"), f"another {kind[:-1]} is named {name!r}"))
            seen.add(name)
    found.extend(raw_references(data))
    named = {w.name: w for w in config.workloads}
    for i, probe in enumerate(config.probes):
        workload = named.get(probe.workload) if isinstance(probe.workload, str) \
            else probe.workload
        if workload is not None and workload.in_sessions and \
                (problem := sessions_problem(probe.profile)) is not None:
            found.append((("probes", i, "profile"), problem))
        if workload is not None:
            found.extend((("probes", i, *path), message)
                         for path, message in _rag_problems(probe, workload, config))
        api_kind = next((e.api_kind for e in config.endpoints if e.name == probe.endpoint),
                        None)
        if api_kind is not None:
            found.extend((("probes", i, "slo", name), message)
                         for name, message in threshold_problems(api_kind, probe.slo))
    return found


def _rag_problems(probe: ProbeSpec, workload: Workload, config: ConfigFile
                  ) -> list[tuple[tuple[str, ...], str]]:
    """A probe's RAG endpoints: paired with a rag workload, declared, of the right kinds."""
    rag = probe.rag_endpoints
    problem = pairing_problem(workload.rag is not None, rag is not None)
    if problem is not None:
        return [(("rag_endpoints",), problem)]
    if rag is None:
        return []
    kinds = {e.name: e.api_kind for e in config.endpoints}
    paths = {"endpoint": ("endpoint",), "embed": ("rag_endpoints", "embed"),
             "rerank": ("rag_endpoints", "rerank")}
    found = [(paths[part], f"no endpoint named {name!r} in this file")
             for part, name in (("embed", rag.embed), ("rerank", rag.rerank))
             if name is not None and name not in kinds]
    if found or probe.endpoint not in kinds:
        return found
    return [(paths[part], message) for part, message in kind_problems(
        kinds[probe.endpoint], kinds[rag.embed], None if rag.rerank is None
        else kinds[rag.rerank])]


def raw_references(data: Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """References to undeclared endpoints, workloads and probes (a probe names its endpoint and
    workload, an SLO its probes, of the same file), read from the file's data as written: so
    they are found whether or not the rest of the file is valid, and `sustain validate`
    reports them in the same pass as the other problems."""
    def names(kind: str) -> set[str]:
        items = data.get(kind)
        return {str(i["name"]) for i in items if isinstance(i, dict) and "name" in i} \
            if isinstance(items, list) else set()

    endpoints, workloads, probes = names("endpoints"), names("workloads"), names("probes")
    found: list[tuple[tuple[str | int, ...], str]] = []
    for i, probe in enumerate(data.get("probes") or []):
        if not isinstance(probe, dict):
            continue
        if isinstance(probe.get("endpoint"), str) and probe["endpoint"] not in endpoints:
            found.append((("probes", i, "endpoint"),
                          f"no endpoint named {probe['endpoint']!r} in this file"))
        if isinstance(probe.get("workload"), str) and probe["workload"] not in workloads:
            found.append((("probes", i, "workload"),
                          f"no workload named {probe['workload']!r} in this file"))
    for i, slo in enumerate(data.get("slos") or []):
        if isinstance(slo, dict) and isinstance(slo.get("probes"), list):
            found.extend((("slos", i, "probes", j), f"no probe named {name!r} in this file")
                         for j, name in enumerate(slo["probes"])
                         if isinstance(name, str) and name not in probes)
    return found


def _beyond_limits(config: ConfigFile, limits: LoadLimits | None
                   ) -> list[tuple[tuple[str | int, ...], str]]:
    """Probe profiles beyond the load limits, each field that breaks one."""
    if limits is None:
        return []
    return [(("probes", i, "profile", *path), message)
            for i, probe in enumerate(config.probes)
            for path, message in limit_violations(probe.profile.planned_load(), limits)]


def _reach_problems(config: ConfigFile, reach: Reach, environ: Mapping[str, str]
                    ) -> list[tuple[tuple[str | int, ...], str]]:
    """What the operator's policies refuse: endpoint and notifier URLs and secret references,
    endpoints' body checks, the files (datasets, sessions, tokenizers) of named and inline
    workloads (each at its path in the file)."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    for kind, specs in (("endpoints", config.endpoints), ("notifiers", config.notifiers)):
        for i, spec in enumerate(specs):
            values = spec.model_dump(mode="json")
            found.extend(((kind, i, *name.split(".")), message)
                         for name, message in target_problems(values, reach, environ))
    for i, workload in enumerate(config.workloads):
        for name, path in workload_files(workload):
            found.extend((("workloads", i, *name.split(".")), message)
                         for _, message in dataset_problems(path, reach))
        found.extend((("workloads", i, *name.split(".")), message)
                     for name, message in workload_secret_problems(workload, reach, environ))
    for i, probe in enumerate(config.probes):
        if not isinstance(probe.workload, str):
            for name, path in workload_files(probe.workload):
                found.extend((("probes", i, "workload", *name.split(".")), message)
                             for _, message in dataset_problems(path, reach))
            found.extend((("probes", i, "workload", *name.split(".")), message)
                         for name, message in workload_secret_problems(probe.workload, reach,
                                                                       environ))
        profile = getattr(probe, "profile", None)
        if isinstance(profile, TraceProfile):
            found.extend((("probes", i, "profile", "path"), message)
                         for _, message in dataset_problems(profile.path, reach))
    return found


def _raw_reach_problems(data: Mapping[str, Any], reach: Reach, environ: Mapping[str, str]
                        ) -> list[tuple[tuple[str | int, ...], str]]:
    """What the operator's policies refuse among the endpoints' and notifiers' fields as
    written (URLs, secret references, body checks), for a file that did not validate: so one
    pass names every problem, not the policy's only once the rest is fixed."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    for kind in ("endpoints", "notifiers"):
        specs = data.get(kind)
        for i, spec in enumerate(specs if isinstance(specs, list) else []):
            if isinstance(spec, Mapping):
                values = {str(name): value for name, value in spec.items()
                          if isinstance(value, str | Mapping) or name == "http_check"}
                found.extend(((kind, i, *name.split(".")), message)
                             for name, message in target_problems(values, reach, environ))
    return found


def parse(text: str, file: str, environ: Mapping[str, str] | None = None,
          limits: LoadLimits | None = None, reach: Reach | None = None,
          expandable: ExpansionPolicy | None = None) -> tuple[ConfigFile, Located]:
    """The validated config and where each value came from; ConfigError otherwise. `${NAME}`
    expands from `environ` only the variables `expandable` allows (None: none). With
    `limits`, every probe's profile must stay within them (as over REST); with `reach`, what
    its policies refuse is a problem too (the service and `sustain validate` pass the
    settings' limits and policies)."""
    environ = os.environ if environ is None else environ
    located = load(text, file, environ, expandable or ExpansionPolicy())
    if not isinstance(located.data, dict):
        raise ConfigError(file, [*located.problems, Problem(
            1, "", "the file must be a mapping with endpoints, workloads and probes")])
    try:
        with collecting_notes() as notes:
            config = ConfigFile.model_validate(located.data)
    except ValidationError as exc:
        invalid = _validation_problems(located, exc)
        seen = {p.field for p in invalid}
        unresolved = [Problem(located.line_of(path), dotted(path), message)
                      for path, message in raw_references(located.data)
                      if dotted(path) not in seen]
        refused = [] if reach is None else [
            Problem(located.line_of(path), dotted(path), message)
            for path, message in _raw_reach_problems(located.data, reach, environ)
            if dotted(path) not in seen]
        raise ConfigError(file, _together(located.problems, invalid + unresolved + refused)
                          ) from None
    for note in dict.fromkeys(notes):  # a deprecated name (docs/api.md), read as the new one
        if (file, note) not in _warned:
            _warned.add((file, note))
            logger.warning("%s: %s", file, note)
    found = [*_references(config, located.data), *_beyond_limits(config, limits)]
    if reach is not None:
        found += _reach_problems(config, reach, environ)
    problems = [Problem(located.line_of(path), dotted(path), message) for path, message in found]
    if located.problems or problems:
        raise ConfigError(file, _together(located.problems, problems))
    return config, located


def _together(building: list[Problem], others: list[Problem]) -> list[Problem]:
    """Every problem, the refused and unset variables first; a field whose variable was
    refused or unset is reported once, for the variable, not again for the empty value it was
    left with."""
    named = {p.field for p in building}
    return [*building, *(p for p in others if p.field not in named)]


MAX_FILE_BYTES = 4 * 1024 * 1024
"""A config file larger than this is refused unread."""


def read(path: Path, environ: Mapping[str, str] | None = None,
         limits: LoadLimits | None = None, reach: Reach | None = None,
         expandable: ExpansionPolicy | None = None) -> tuple[ConfigFile, Located]:
    """The validated file at `path` (see parse); ConfigError also when it cannot be read, is
    not UTF-8 or is larger than MAX_FILE_BYTES."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise ConfigError(str(path), [Problem(None, "", f"larger than {MAX_FILE_BYTES:,} "
                                                  "bytes")])
        text = raw.decode("utf-8")
    except OSError as exc:
        raise ConfigError(str(path), [Problem(None, "", f"cannot read: {exc.strerror}")]) \
            from None
    except UnicodeDecodeError:
        raise ConfigError(str(path), [Problem(None, "", "not UTF-8 text")]) from None
    return parse(text, str(path), environ, limits, reach, expandable)
