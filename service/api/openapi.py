"""The OpenAPI document /openapi.json serves: FastAPI's, made to say what this service
enforces, so that a client generated from it (or a property-based tester) sends what passes.

Two kinds of change, both to the document only (every check stays where it is, and still
answers a 422 naming the field):

- what JSON Schema can say but FastAPI's rendering loses: integer bounds written back as
  integers (FastAPI writes them as floats, and 2**63 - 1 as 2**63), the tag of each
  discriminated union required in its branches (a profile or notifier without `kind` is
  refused), and no NUL in any string a body carries (PostgreSQL cannot store it; see
  probes/inputs.py), nor a number beyond 64 bits in free-form JSON;
- what the probes' own models check across their fields (MODEL_RULES: a capacity SLO's
  threshold, one of a step's rate and concurrency, one source of prompts), where JSON Schema
  can state it;
- what this deployment's settings enforce: the load limits on a probe's profile
  (SUSTAIN_MAX_RATE, _CONCURRENCY, _RUN_S, _RUN_REQUESTS, _MEASURE_WORKERS) and on the
  times of an agent's upload (SUSTAIN_MAX_RUN_S plus the budget's grace), the secret
  policy on every `*_secret_ref` (SUSTAIN_SECRET_ENV, SUSTAIN_SECRET_DIR), the dataset policy
  on every file a workload or profile names (SUSTAIN_DATASET_DIR), and the largest page
  (SUSTAIN_MAX_PAGE_SIZE).

What no schema can say (a sum of a profile's stage lengths, one field below another, a name
that must exist) stays in the fields' descriptions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from copy import deepcopy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from sustain.probes.client.secret_policy import FORBIDDEN_ENV, SecretPolicy
from sustain.probes.client.secrets import SECRET_REF_PATTERN
from sustain.probes.inputs import MAX_JSON_DEPTH, MAX_JSON_NUMBER
from sustain.probes.load.profiles import (
    MAX_USERS,
    CapacityProfile,
    ConcurrencyProfile,
    ConstantProfile,
    ParetoProfile,
    PoissonProfile,
    SingleProfile,
    Step,
    StepsProfile,
    SweepProfile,
    TraceProfile,
)
from sustain.probes.measure.capacity_slo import PERCENTILE_FIELDS, CapacitySlo
from sustain.probes.workload.corpus import RagSpec
from sustain.probes.workload.dataset import DatasetPolicy
from sustain.probes.workload.lengths import UniformLength
from sustain.probes.workload.spec import Workload
from sustain.service.config import Settings
from sustain.service.policy.limits import BUDGET_GRACE_S, LoadLimits
from sustain.service.policy.reach import WORKLOAD_FILES
from sustain.service.schemas.agent import RUN_MS
from sustain.service.schemas.common import LATEST, NO_NUL
from sustain.service.schemas.patterns import literal, zoned_time
from sustain.service.schemas.silences import FUTURE

Schema = dict[str, Any]
NEVER: Schema = {"not": {}}
"""A schema no value meets: a field this deployment refuses whatever it holds."""
MAX_DB_ID = 2**63 - 1
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
EXACT_FLOAT_LIMIT = 2**53

LIMITED: dict[str, list[tuple[type[BaseModel], str]]] = {
    "max_rate": [(ConstantProfile, "rate"), (PoissonProfile, "rate"), (Step, "rate")],
    "max_concurrency": [
        (ConcurrencyProfile, "users"), (Step, "concurrency"), (SweepProfile, "levels"),
        (ParetoProfile, "max_concurrency"), (ConstantProfile, "max_in_flight"),
        (PoissonProfile, "max_in_flight"), (TraceProfile, "max_in_flight")],
    "max_run_s": [
        *((kind, "duration_s") for kind in (ConstantProfile, PoissonProfile,
                                            ConcurrencyProfile, SweepProfile,
                                            CapacityProfile, ParetoProfile, Step)),
        *((kind, "warmup_s") for kind in (ConstantProfile, PoissonProfile, StepsProfile,
                                          SweepProfile, CapacityProfile, ParetoProfile))],
    "max_run_requests": [(ConcurrencyProfile, "max_requests"), (TraceProfile, "max_requests"),
                         (SweepProfile, "max_requests"), (ParetoProfile, "max_requests")],
    "max_workers": [(kind, "workers") for kind in (
        SingleProfile, ConstantProfile, PoissonProfile, ConcurrencyProfile, StepsProfile,
        SweepProfile, TraceProfile, CapacityProfile, ParetoProfile)],
}
"""Each field whose value alone a load limit (a LoadLimits attribute) bounds, wherever it is
planned (policy/limits.py, Profile.planned_load). A field planned only with others (a
closed-loop profile's max_in_flight, an open loop's capped max_requests) is not bounded
here: its bound would refuse what the service takes."""
LIMITS_RULE = (
    "This service's limits: at most {max_rate:g} requests/s (SUSTAIN_MAX_RATE), "
    "{max_concurrency:,} users or requests in flight (SUSTAIN_MAX_CONCURRENCY), a run planned "
    "to last at most {max_run_s:g} s with every stage and warmup (SUSTAIN_MAX_RUN_S) and to "
    "send at most {max_run_requests:,} requests (SUSTAIN_MAX_RUN_REQUESTS), {max_workers} "
    "worker processes (SUSTAIN_MEASURE_WORKERS).")
DATASET_FIELDS: list[tuple[type[BaseModel], str]] = [
    *((Workload, name) for name in WORKLOAD_FILES), (RagSpec, "corpus"), (TraceProfile, "path")]
"""Every file a probe names (service/api/reach.py refuse_dataset)."""


def _given(*names: str) -> Schema:
    """A schema holding when each of `names` is given and not null."""
    return {"required": list(names),
            "properties": {name: {"not": {"type": "null"}} for name in names}}


THRESHOLDS = ("ttft_ms", "tpot_ms", "ttfo_ms", "e2e_ms")
MODEL_RULES: list[tuple[type[BaseModel], Schema, str]] = [
    (CapacitySlo, {"anyOf": [_given(name) for name in THRESHOLDS],
                   "properties": {"percentile": {"enum": sorted(PERCENTILE_FIELDS)}}},
     "At least one of ttft_ms, tpot_ms, ttfo_ms and e2e_ms."),
    (ConcurrencyProfile, {"anyOf": [_given("duration_s"), _given("max_requests")]},
     "Bounded by duration_s, max_requests or both."),
    (Step, {"oneOf": [_given("rate"), _given("concurrency")]},
     "Exactly one of rate and concurrency."),
    (SweepProfile, {"properties": {"levels": {"uniqueItems": True, "items": {
        "minimum": 1, "maximum": MAX_USERS}}}}, "levels are strictly ascending."),
    (UniformLength, {}, "min is at most max."),
    (Workload, {"allOf": [{"not": _given(a, b)} for a, b in (
        ("prompt", "dataset"), ("sessions", "turns"), ("sessions", "prompt"),
        ("sessions", "dataset"), ("turns", "prompt"), ("turns", "dataset"))]},
     "One source of prompts: prompt, dataset, sessions or turns (or none: synthetic). "
     "Synthetic prompts: shared_prefix_tokens below input_tokens. batch_size and documents, "
     "when given, times the longest input length stay within 1,000,000 tokens."),
]
"""What the probes' own models check across their fields, as JSON Schema where it can be
said (and always in the model's description). Their validators stay the judges."""
WORKERS_RULE = "workers is at most max_in_flight."


STORABLE_JSON = "StorableJson"
FREE_FORM: list[tuple[type[BaseModel], str]] = [(Workload, "extra_body")]
"""Free-form JSON a body may carry: any JSON that an input model stores (storable_problem)."""


def _storable_json(document: dict[str, Any]) -> None:
    """A component for the JSON an input model stores as it is (probes/inputs.py), and every
    free-form field's values held to it."""
    ref = {"$ref": f"#/components/schemas/{STORABLE_JSON}"}
    _components(document)[STORABLE_JSON] = {
        "description": "JSON that PostgreSQL stores and every JSON parser reads alike: no NUL "
        f"in a string or key, numbers within +-{MAX_JSON_NUMBER}, nested at most "
        f"{MAX_JSON_DEPTH} deep.",
        "anyOf": [{"type": "null"}, {"type": "boolean"}, {"type": "string", **deepcopy(NO_NUL)},
                  {"type": "number", "minimum": -MAX_JSON_NUMBER, "maximum": MAX_JSON_NUMBER},
                  {"type": "array", "items": ref},
                  {"type": "object", "propertyNames": deepcopy(NO_NUL),
                   "additionalProperties": ref}]}
    for model, name in FREE_FORM:
        for schema in _property(document, model, name):
            schema.update({"propertyNames": deepcopy(NO_NUL), "additionalProperties": ref})


def _field_pattern(model: type[BaseModel], name: str) -> str | None:
    for item in model.model_fields[name].metadata:
        if (pattern := getattr(item, "pattern", None)) is not None:
            return str(pattern)
    return None


SECRET_PATTERNS = frozenset(p for p in (SECRET_REF_PATTERN,
                                        _field_pattern(RagSpec, "pgvector_dsn_ref")) if p)
"""The patterns of every secret reference a body may hold."""


def install(app: FastAPI, settings: Settings) -> None:
    """Serve `published` as the app's OpenAPI document (built once, on first request)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = published(build(), settings)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def published(document: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """`document` (FastAPI's) changed in place as the module says, and returned."""
    _integral_bounds(document)
    _tags_required(document)
    _model_rules(document)
    _storable_json(document)
    _no_nul(document)
    _load_limits(document, settings.load_limits())
    _run_ms(document, (settings.max_run_s + BUDGET_GRACE_S) * 1000)
    reach = settings.reach()
    _secret_refs(document, reach.secrets)
    _dataset_files(document, reach.datasets)
    _page_limit(document, settings.max_page_size)
    _future(document, datetime.now(UTC).year)
    return document


def _nodes(value: Any) -> Iterator[Schema]:
    """Every mapping inside `value`, depth first (schemas, and the objects around them)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _integral_bounds(document: dict[str, Any]) -> None:
    for node in _nodes(document):
        for key in BOUNDS:
            value = node.get(key)
            if not isinstance(value, float) or not value.is_integer():
                continue
            if value == float(MAX_DB_ID):
                node[key] = MAX_DB_ID  # the float rounded it up to 2**63
            elif abs(value) <= EXACT_FLOAT_LIMIT:
                node[key] = int(value)


def _components(document: dict[str, Any]) -> dict[str, Schema]:
    components: dict[str, Schema] = document.get("components", {}).get("schemas", {})
    return components


def _component(document: dict[str, Any], model: type[BaseModel]) -> list[Schema]:
    """The component schemas of `model` (its input form, and the one shared with output)."""
    return [schema for name, schema in _components(document).items()
            if name in (model.__name__, f"{model.__name__}-Input")]


def _tags_required(document: dict[str, Any]) -> None:
    """A discriminated union's tag is required in every branch: pydantic refuses a member
    without it, though the tag has a default."""
    components = _components(document)
    for node in list(_nodes(document)):
        discriminator = node.get("discriminator")
        if not isinstance(discriminator, dict):
            continue
        tag = discriminator["propertyName"]
        for ref in discriminator.get("mapping", {}).values():
            branch = components.get(str(ref).rsplit("/", 1)[-1])
            if branch is not None and tag not in branch.setdefault("required", []):
                branch["required"].append(tag)


def _merge(target: Schema, rule: Schema) -> None:
    """`rule`'s keywords into `target`: properties merged one level down, the rest set."""
    for key, value in rule.items():
        if key == "properties":
            for name, extra in value.items():
                prop = target.setdefault("properties", {}).get(name)
                if isinstance(prop, dict):
                    branch = next((b for b in prop.get("anyOf", []) if b.get("type") != "null"),
                                  prop)
                    for inner, setting in extra.items():
                        if inner == "items" and isinstance(branch.get("items"), dict):
                            branch["items"].update(setting)
                        else:
                            branch[inner] = setting
        else:
            target[key] = value


def _describe(component: Schema, rule: str) -> None:
    component["description"] = f"{component.get('description', '')}\n\n{rule}".strip()


def _model_rules(document: dict[str, Any]) -> None:
    for model, rule, words in MODEL_RULES:
        for component in _component(document, model):
            _merge(component, rule)
            _describe(component, words)


def _request_schemas(document: dict[str, Any]) -> list[Schema]:
    """The schemas of every JSON request body, with every component they reach."""
    components = _components(document)
    found: dict[str, Schema] = {}
    stack: list[Any] = []
    for path in document.get("paths", {}).values():
        for operation in path.values():
            if isinstance(operation, dict):
                content = operation.get("requestBody", {}).get("content", {})
                stack += [media.get("schema") for kind, media in content.items()
                          if kind == "application/json"]
    bodies = [s for s in stack if isinstance(s, dict)]
    while stack:
        for node in _nodes(stack.pop()):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                name = ref.rsplit("/", 1)[-1]
                if name not in found and name in components:
                    found[name] = components[name]
                    stack.append(components[name])
    return bodies + list(found.values())


def _no_nul(document: dict[str, Any]) -> None:
    """Every free string of a JSON body holds no NUL (NO_NUL; strings with a pattern,
    format or fixed values say what they hold already)."""
    for schema in _request_schemas(document):
        for node in _nodes(schema):
            if node.get("type") == "string" and not {"pattern", "format", "enum", "const",
                                                     "contentEncoding", "not"} & node.keys():
                node.update(deepcopy(NO_NUL))


def _property(document: dict[str, Any], model: type[BaseModel], name: str) -> list[Schema]:
    """The schema of `model`'s field `name` in the document (each non-null branch of it)."""
    found = []
    for component in _component(document, model):
        prop = component.get("properties", {}).get(name)
        if isinstance(prop, dict):
            branches = prop.get("anyOf", [prop])
            found += [b for b in branches if isinstance(b, dict) and b.get("type") != "null"]
    return found


def _at_most(schema: Schema, limit: float) -> None:
    """Lower `schema`'s maximum (its items', for an array) to `limit`."""
    target = schema.get("items", schema) if schema.get("type") == "array" else schema
    if target.get("type") == "integer" or float(limit).is_integer():
        limit = int(limit)
    for key in ("maximum", "exclusiveMaximum"):
        if key in target and target[key] <= limit:
            return
    target.pop("exclusiveMaximum", None)
    target["maximum"] = limit


def _load_limits(document: dict[str, Any], limits: LoadLimits) -> None:
    values = {"max_rate": limits.max_rate, "max_concurrency": limits.max_concurrency,
              "max_run_s": limits.max_run_s, "max_run_requests": limits.max_run_requests,
              "max_workers": limits.max_workers if limits.max_workers is not None else 64}
    for setting, fields in LIMITED.items():
        for model, name in fields:
            for schema in _property(document, model, name):
                _at_most(schema, values[setting])
            for component in _component(document, model):
                default = component.get("properties", {}).get(name, {}).get("default")
                if isinstance(default, int | float) and default > values[setting]:
                    # its default is beyond this service's limit: it must be given
                    required = component.setdefault("required", [])
                    if name not in required:
                        required.append(name)
    rule = f"{LIMITS_RULE.format(**values)} {WORKERS_RULE}"
    for component in _component(document, CapacityProfile):
        component["anyOf"] = [
            {"required": ["unit"], "properties": {
                "unit": {"const": "rate"}, "minimum": {"maximum": int(limits.max_rate)},
                "maximum": {"maximum": int(limits.max_rate)},
                "max_in_flight": {"maximum": limits.max_concurrency}}},
            {"properties": {
                "unit": {"const": "concurrency"},
                "minimum": {"maximum": limits.max_concurrency},
                "maximum": {"maximum": limits.max_concurrency}}}]
    for model in (SingleProfile, ConstantProfile, PoissonProfile, ConcurrencyProfile,
                  StepsProfile, SweepProfile, TraceProfile, CapacityProfile, ParetoProfile):
        for component in _component(document, model):
            _describe(component, rule)


def _run_ms(document: dict[str, Any], run_ms: float) -> None:
    """A time of an agent's upload is at most the run's longest length (the upload's
    UploadLimits)."""
    for node in _nodes(document):
        if node.pop(RUN_MS, False):
            node["maximum"] = int(run_ms) if float(run_ms).is_integer() else run_ms


def _future(document: dict[str, Any], year: int) -> None:
    """A time that must be in the future (a silence's end) is in `year` (now's) or later:
    one in an earlier year is always refused."""
    for node in _nodes(document):
        if node.pop(FUTURE, False):
            node["pattern"] = zoned_time(year, LATEST.year)


def _glob(glob: str) -> str:
    """An fnmatch glob of variable-name characters as a regex (ECMA and Python alike)."""
    out = []
    index = 0
    while index < len(glob):
        char = glob[index]
        if char == "*":
            out.append("[A-Za-z0-9_]*")
        elif char == "?":
            out.append("[A-Za-z0-9_]")
        elif char == "[" and (end := glob.find("]", index + 1)) > index:
            inner = glob[index + 1:end]
            out.append("[^" + inner[1:] + "]" if inner.startswith("!") else f"[{inner}]")
            index = end
        else:
            out.append(literal(char))
        index += 1
    return "".join(out)


def _under(directory: Path) -> str:
    """A path under `directory` as written: its segments neither `.` nor `..`, no whitespace
    or NUL, not under /proc, /sys or /dev (the directory itself is not one of those)."""
    root = literal(str(directory).rstrip("/"))
    segment = r"(?!\.\.?(?:/|$))[^/\s\x00]+"
    return f"{root}/{segment}(?:/{segment})*"


def secret_ref_pattern(policy: SecretPolicy) -> str | None:
    """What a secret reference may be under `policy`, or None: none may."""
    choices = []
    if policy.env_globs:
        forbidden = "|".join(_glob(g) for g in FORBIDDEN_ENV)
        allowed = "|".join(_glob(g) for g in policy.env_globs)
        choices.append(f"env:(?!(?:{forbidden})$)(?=(?:{allowed})$)[A-Za-z_][A-Za-z0-9_]*")
    if policy.secret_dir is not None:
        choices.append(f"file:{_under(policy.secret_dir)}")
    return f"^(?:{'|'.join(choices)})$" if choices else None


def _replace(document: dict[str, Any], matches: Callable[[Schema], bool],
             pattern: str | None) -> None:
    """Every schema `matches` takes gets `pattern` instead of its own, or becomes NEVER."""
    for node in list(_nodes(document)):
        for key, value in list(node.items()):
            if isinstance(value, dict) and matches(value):
                node[key] = NEVER if pattern is None else {**value, "pattern": pattern}
            elif isinstance(value, list):
                node[key] = [NEVER if pattern is None and isinstance(v, dict) and matches(v)
                             else {**v, "pattern": pattern}
                             if isinstance(v, dict) and matches(v) else v for v in value]


def _secret_refs(document: dict[str, Any], policy: SecretPolicy) -> None:
    pattern = secret_ref_pattern(policy)
    _replace(document, lambda s: s.get("pattern") in SECRET_PATTERNS, pattern)


def _dataset_files(document: dict[str, Any], policy: DatasetPolicy) -> None:
    """A file a probe names lies under SUSTAIN_DATASET_DIR; none may be named without it."""
    pattern = None if policy.directory is None else f"^{_under(policy.directory)}$"
    for model, name in DATASET_FIELDS:
        for component in _component(document, model):
            prop = component.get("properties", {}).get(name)
            if not isinstance(prop, dict):
                continue
            if "anyOf" in prop:
                prop["anyOf"] = [b if b.get("type") == "null" else
                                 (NEVER if pattern is None else {**b, "pattern": pattern})
                                 for b in prop["anyOf"]]
            else:
                component["properties"][name] = NEVER if pattern is None else \
                    {**prop, "pattern": pattern}


def _page_limit(document: dict[str, Any], max_page_size: int) -> None:
    """Every list's `limit` is at most SUSTAIN_MAX_PAGE_SIZE."""
    for path in document.get("paths", {}).values():
        for operation in path.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "query" and parameter.get("name") == "limit":
                    for schema in parameter.get("schema", {}).get("anyOf", []):
                        if schema.get("type") == "integer":
                            schema["maximum"] = max_page_size

