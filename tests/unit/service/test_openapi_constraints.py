"""The OpenAPI document says what the API enforces: a rule a model or handler checks is in
the schema of the body or parameter it applies to (patterns, bounds, tags, one field or
another, the deployment's limits and policies), and the schema and the model agree on what
they take. A client generated from the document then sends what the service takes."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker
from pydantic import TypeAdapter, ValidationError

from sustain.probes.load.profiles import PROFILE_KINDS
from sustain.service.alerting.notifiers import NotifierCreate
from sustain.service.api.openapi import DATASET_FIELDS, FREE_FORM, LIMITED, MODEL_RULES
from sustain.service.app import create_app
from sustain.service.config import Settings
from sustain.service.history.windows import parse_duration
from sustain.service.runs import upload
from sustain.service.schemas.common import MAX_DB_ID, NAME_PATTERN
from sustain.service.schemas.keys import KeyCreate
from sustain.service.schemas.patterns import CRON_PATTERN, duration_pattern, whole_numbers
from sustain.service.schemas.probes import ProbeCreate, ProbeUpdate
from sustain.service.schemas.silences import SilenceCreate
from sustain.service.schemas.slos import Sli, SloCreate
from sustain.service.ticks.schedule import parse_cron

Document = dict[str, Any]
UNUSED_DATABASE = "postgresql://127.0.0.1:9/unused"


def document(**overrides: Any) -> Document:
    """The document a service with these settings serves."""
    return create_app(Settings(**overrides), UNUSED_DATABASE).openapi()


@pytest.fixture(scope="module")
def served() -> Document:
    return document(max_rate=20, max_concurrency=4, max_run_s=5, measure_workers=2)


def component(doc: Document, name: str) -> dict[str, Any]:
    schemas: dict[str, dict[str, Any]] = doc["components"]["schemas"]
    return schemas.get(f"{name}-Input") or schemas[name]


def body_schema(doc: Document, method: str, path: str) -> dict[str, Any]:
    schema: dict[str, Any] = \
        doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    return schema


def validator(doc: Document, schema: dict[str, Any] | bool) -> Draft202012Validator:
    """A validator of `schema`, its references resolved in `doc`."""
    return Draft202012Validator({"allOf": [schema], "components": doc["components"]},
                                format_checker=FormatChecker())


def model_takes(model: Any, body: dict[str, Any]) -> bool:
    """Whether `model` (a body model, or the notifier union) takes `body`."""
    try:
        TypeAdapter(model).validate_python(body)
    except ValidationError:
        return False
    return True


def test_a_probe_name_in_the_document_is_the_pattern_the_service_checks(
        served: Document) -> None:
    name = component(served, "ProbeCreate")["properties"]["name"]
    assert name["pattern"] == NAME_PATTERN
    assert (name["minLength"], name["maxLength"]) == (1, 100)
    pattern = re.compile(name["pattern"])
    for candidate in ("probe-1", "a.b:c_d", "-leading", "with space", "é"):
        body = {"name": candidate, "endpoint_id": 1, "interval_s": 60}
        assert bool(pattern.search(candidate)) == model_takes(ProbeCreate, body), candidate


def test_every_profile_kind_is_a_tagged_branch_that_requires_its_kind(
        served: Document) -> None:
    profile = component(served, "ProbeCreate")["properties"]["profile"]
    assert profile["discriminator"]["propertyName"] == "kind"
    mapping = profile["discriminator"]["mapping"]
    assert set(mapping) == PROFILE_KINDS
    for kind, ref in mapping.items():
        branch = served["components"]["schemas"][ref.rsplit("/", 1)[-1]]
        assert "kind" in branch["required"], kind  # pydantic refuses a profile without it
        assert branch["properties"]["kind"]["const"] == kind


def test_integer_bounds_are_exact_integers(served: Document) -> None:
    """FastAPI writes bounds as floats; 2**63 - 1 as a float is 2**63, one past the bound."""
    endpoint_id = component(served, "ProbeCreate")["properties"]["endpoint_id"]
    assert endpoint_id["maximum"] == MAX_DB_ID
    assert type(endpoint_id["maximum"]) is int


@pytest.mark.parametrize(("name", "nullable"), [
    ("ProbeUpdate", {"rag_endpoints"}), ("SloUpdate", set()),
    ("NotifierUpdate", {"url", "url_secret_ref", "signing_secret_ref"}),
    ("EndpointUpdate", {"auth_secret_ref", "metrics_url", "deployment"})])
def test_a_patch_body_admits_null_only_where_null_clears_a_field(
        served: Document, name: str, nullable: set[str]) -> None:
    properties = component(served, name)["properties"]
    takes_null = {prop for prop, schema in properties.items()
                  if validator(served, schema).is_valid(None)}
    assert takes_null == nullable


AGREEMENT: list[tuple[str, str, Any, dict[str, Any]]] = [
    ("post", "/api/v1/probes", ProbeCreate, {"name": "p", "endpoint_id": 1, "interval_s": 60}),
    ("post", "/api/v1/probes", ProbeCreate, {"name": "p", "endpoint_id": 1,
                                             "cron": "*/5 * * * *"}),
    ("post", "/api/v1/probes", ProbeCreate, {"name": "p", "endpoint_id": 1, "interval_s": 60,
                                             "cron": "*/5 * * * *"}),
    ("post", "/api/v1/probes", ProbeCreate, {"name": "p", "endpoint_id": 1}),
    ("post", "/api/v1/probes", ProbeCreate, {"name": "p", "endpoint_id": 1, "interval_s": 60,
                                             "rag_endpoints": {"embed_endpoint_id": 2}}),
    ("post", "/api/v1/probes", ProbeCreate, {"name": "p", "endpoint_id": 1, "interval_s": 60,
                                             "profile": {"constant": 1}}),
    ("post", "/api/v1/probes", ProbeCreate, {
        "name": "p", "endpoint_id": 1, "interval_s": 60,
        "profile": {"kind": "concurrency", "users": 2}}),
    ("post", "/api/v1/probes", ProbeCreate, {
        "name": "p", "endpoint_id": 1, "interval_s": 60,
        "profile": {"kind": "steps", "stages": [{"rate": 1, "concurrency": 2,
                                                 "duration_s": 1}]}}),
    ("post", "/api/v1/probes", ProbeCreate, {
        "name": "p", "endpoint_id": 1, "interval_s": 60,
        "profile": {"kind": "capacity", "maximum": 2, "duration_s": 1,
                    "slo": {"ttft_ms": 100, "percentile": 98}}}),
    ("post", "/api/v1/probes", ProbeCreate, {
        "name": "p", "endpoint_id": 1, "interval_s": 60,
        "workload": {"prompt": "hi", "turns": 2}}),
    ("post", "/api/v1/probes", ProbeCreate, {"name": "p", "endpoint_id": 1, "interval_s": 60,
                                             "locations": ["eu", "eu"]}),
    ("post", "/api/v1/probes", ProbeCreate, {"name": "p", "endpoint_id": 1, "interval_s": 60,
                                             "labels": {"9bad": "x"}}),
    ("post", "/api/v1/probes", ProbeCreate, {
        "name": "p", "endpoint_id": 1, "interval_s": 60,
        "workload": {"extra_body": {"min_tokens": 8, "x": [{"y": 1e30}]}}}),
    ("post", "/api/v1/probes", ProbeCreate, {
        "name": "p", "endpoint_id": 1, "interval_s": 60,
        "workload": {"extra_body": {"ignore_eos": True, "stop": ["\n"], "n": -5}}}),
    ("patch", "/api/v1/probes/{probe_id}", ProbeUpdate, {"interval_s": 60,
                                                         "cron": "0 * * * *"}),
    ("patch", "/api/v1/probes/{probe_id}", ProbeUpdate, {"enabled": None}),
    ("patch", "/api/v1/probes/{probe_id}", ProbeUpdate, {"rag_endpoints": None}),
    ("post", "/api/v1/keys", KeyCreate, {"name": "k", "role": "agent"}),
    ("post", "/api/v1/keys", KeyCreate, {"name": "k", "role": "agent", "location": "eu-1"}),
    ("post", "/api/v1/keys", KeyCreate, {"name": "k", "role": "viewer", "location": "eu-1"}),
    ("post", "/api/v1/keys", KeyCreate, {"name": "k", "role": "agent", "location": "EU"}),
    ("post", "/api/v1/notifiers", NotifierCreate, {"name": "n", "kind": "webhook",
                                                   "url": "http://127.0.0.1:9/hook"}),
    ("post", "/api/v1/notifiers", NotifierCreate, {"name": "n", "kind": "webhook"}),
    ("post", "/api/v1/notifiers", NotifierCreate, {
        "name": "n", "kind": "slack", "url": "http://127.0.0.1:9/hook"}),
    ("post", "/api/v1/notifiers", NotifierCreate, {"name": "n", "url": "http://127.0.0.1:9"}),
    ("post", "/api/v1/silences", SilenceCreate, {
        "matchers": [{"name": "a", "value": "b"}], "ends_at": "2999-01-01T00:00:00Z",
        "comment": "c"}),
    ("post", "/api/v1/silences", SilenceCreate, {
        "matchers": [{"name": "a", "value": "", "is_equal": True}],
        "ends_at": "2999-01-01T00:00:00Z", "comment": "c"}),
    ("post", "/api/v1/silences", SilenceCreate, {
        "matchers": [{"name": "a", "value": "(", "is_regex": True}],
        "ends_at": "2999-01-01T00:00:00Z", "comment": "c"}),
    ("post", "/api/v1/silences", SilenceCreate, {
        "matchers": [{"name": "a", "value": "b"}], "ends_at": "2999-01-01T00:00:00",
        "comment": "c"}),
    ("post", "/api/v1/slos", SloCreate, {"name": "s", "probes": ["p"], "objective": 0.99,
                                         "sli": {"kind": "latency", "metric": "ttft"}}),
    ("post", "/api/v1/slos", SloCreate, {"name": "s", "probes": ["p"], "objective": 0.99,
                                         "sli": {"kind": "availability", "metric": "ttft"}}),
    ("post", "/api/v1/slos", SloCreate, {"name": "s", "objective": 0.99,
                                         "sli": {"kind": "availability"}}),
    ("post", "/api/v1/slos", SloCreate, {"name": "s", "probes": ["p"], "objective": 0.99,
                                         "sli": {"kind": "goodput"}, "window": "28d"}),
    ("post", "/api/v1/slos", SloCreate, {"name": "s", "probes": ["p"], "objective": 0.99,
                                         "sli": {"kind": "goodput"}, "window": "91d"}),
]
"""Bodies on either side of a rule across fields or beyond a field's own type."""


@pytest.mark.parametrize(("method", "path", "model", "body"), AGREEMENT)
def test_the_document_and_the_model_agree_on_a_body(
        served: Document, method: str, path: str, model: Any, body: dict[str, Any]) -> None:
    in_document = validator(served, body_schema(served, method, path)).is_valid(body)
    assert in_document == model_takes(model, body)


def test_a_latency_sli_names_its_metric_and_threshold_in_the_document(
        served: Document) -> None:
    sli = validator(served, {"$ref": "#/components/schemas/Sli"})
    for body in ({"kind": "latency", "metric": "ttft", "threshold_ms": 500},
                 {"kind": "latency", "threshold_ms": 500}, {"kind": "quality"},
                 {"kind": "goodput", "threshold_ms": 1}):
        assert sli.is_valid(body) == model_takes(Sli, body), body


def test_the_deployments_load_limits_bound_the_profile_fields(served: Document) -> None:
    constant = component(served, "ConstantProfile")["properties"]
    assert constant["rate"]["maximum"] == 20
    assert constant["duration_s"]["maximum"] == 5
    assert constant["max_in_flight"]["maximum"] == 4
    assert constant["workers"]["maximum"] == 2
    assert component(served, "SweepProfile")["properties"]["levels"]["items"]["maximum"] == 4
    # max_in_flight's default (256) is beyond this service's 4: a constant profile names it
    assert "max_in_flight" in component(served, "ConstantProfile")["required"]
    assert "max_in_flight" not in component(document(), "ConstantProfile")["required"]
    assert "SUSTAIN_MAX_RATE" in component(served, "ConstantProfile")["description"]
    wide = document(max_rate=5000)
    assert component(wide, "ConstantProfile")["properties"]["rate"]["maximum"] == 5000


def test_secret_references_follow_the_secret_policy(tmp_path: Any) -> None:
    doc = document(secret_env="OPENAI_*,LLM_KEY", secret_dir=str(tmp_path))
    ref = component(doc, "EndpointCreate")["properties"]["auth_secret_ref"]["anyOf"][0]
    pattern = re.compile(ref["pattern"])
    for taken in ("env:OPENAI_API_KEY", "env:LLM_KEY", f"file:{tmp_path}/key"):
        assert pattern.search(taken), taken
    for refused in ("env:LLM_KEY2", "env:SUSTAIN_ADMIN_KEY", "env:PGPASSWORD",
                    "file:/etc/passwd", f"file:{tmp_path}/../x", f"file:{tmp_path}"):
        assert not pattern.search(refused), refused


def test_without_a_dataset_directory_no_workload_file_can_be_named(
        served: Document) -> None:
    workload = validator(served, {"$ref": "#/components/schemas/Workload-Input"})
    assert workload.is_valid({"prompt": "hello"})
    assert not workload.is_valid({"dataset": "/data/prompts.jsonl"})
    assert not workload.is_valid({"rag": {"corpus": "/data/corpus.jsonl"}})


def test_a_silence_ends_in_the_documents_year_or_later(served: Document) -> None:
    ends_at = component(served, "SilenceCreate")["properties"]["ends_at"]
    pattern = re.compile(ends_at["pattern"])
    year = datetime.now(UTC).year
    assert pattern.search(f"{year}-12-31T23:00:00Z")
    assert not pattern.search(f"{year - 1}-12-31T23:00:00Z")
    assert not pattern.search(f"{year}-12-31T23:00:00")  # no offset: refused


def test_the_agent_upload_describes_its_msgpack_map_and_sample_row(
        served: Document) -> None:
    body = served["paths"]["/api/v1/agent/uploads"]["post"]["requestBody"]
    assert body["required"] is True
    assert set(body["content"]) == {"application/msgpack"}
    part = body["content"]["application/msgpack"]["schema"]
    assert set(part["required"]) == {"upload_id", "part", "parts", "probe_id", "tick",
                                     "started_at", "dropped", "samples"}
    assert part["properties"]["parts"]["maximum"] == upload.MAX_PARTS
    assert part["properties"]["samples"]["maxItems"] == upload.MAX_PART_SAMPLES
    row = part["properties"]["samples"]["items"]["prefixItems"]
    assert len(row) == upload.ROW_FIELDS
    names = [item["title"] for item in row]
    for index, name in {**upload.TIMINGS, **upload.COUNTS, **upload.TEXTS,
                        **upload.FLAGS}.items():
        assert names[index] == name
    assert names[-1] == "sent_at"
    assert row[3]["title"] == "t_send_ms"
    assert row[3]["maximum"] == (5 + 120) * 1000  # ms: the run's longest, with its grace
    final = part["properties"]["final"]["anyOf"][0]
    assert final["properties"]["status"]["enum"] == sorted(upload.UPLOAD_STATUSES)


def test_compare_names_its_probes_and_window_as_the_handler_checks(
        served: Document) -> None:
    parameters = {p["name"]: p["schema"] for p in
                  served["paths"]["/api/v1/compare"]["get"]["parameters"]}
    probe = parameters["probe"]
    assert (probe["minItems"], probe["maxItems"], probe["uniqueItems"]) == (1, 8, True)
    assert probe["items"]["pattern"] == NAME_PATTERN
    window = re.compile(parameters["window"]["pattern"])
    assert [text for text in ("7d", "400d", "401d", "0d") if window.search(text)] == \
        ["7d", "400d"]


@pytest.mark.parametrize(("low", "high"), [(0, 59), (1, 31), (7, 1234), (5, 5), (1, 9_999_999)])
def test_whole_numbers_match_exactly_the_range(low: int, high: int) -> None:
    pattern = re.compile(f"^{whole_numbers(low, high)}$")
    probes = [*range(0, min(high, 3000) + 20), high - 1, high, high + 1, high * 10]
    for n in probes:
        assert bool(pattern.match(str(n))) == (low <= n <= high), n
    assert not pattern.match(f"0{max(low, 1)}")  # no leading zeros


@pytest.mark.parametrize("max_s", [90 * 86400, 400 * 86400])
def test_a_duration_pattern_takes_what_parse_duration_takes_within_its_bound(
        max_s: int) -> None:
    pattern = re.compile(duration_pattern(max_s))
    for unit in "smhdw":
        for number in (*range(0, 120), 9600, 9601, 12_000, 34_560_000, 7_776_000):
            text = f"{number}{unit}"
            try:
                taken = 0 < parse_duration(text) <= max_s
            except ValueError:
                taken = False
            assert bool(pattern.match(text)) == taken, text


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(expression=st.from_regex(re.compile(CRON_PATTERN), fullmatch=True))
def test_every_expression_the_cron_pattern_takes_is_a_schedule_or_never_fires(
        expression: str) -> None:
    """The pattern does not know the calendar: what it takes is a schedule, or a day no
    month has (the 30th of February), which the validator refuses as never firing."""
    try:
        parse_cron(expression).shortest_gap_s()
    except ValueError as exc:
        refused = str(exc)
    else:
        return
    assert "never fires" in refused, expression


def test_a_day_the_month_never_has_passes_the_pattern_and_is_refused_as_never_firing() -> None:
    assert re.fullmatch(CRON_PATTERN, "* * 30 2-2 *")
    with pytest.raises(ValueError, match="never fires"):
        parse_cron("* * 30 2-2 *").shortest_gap_s()


def test_every_field_the_document_narrows_is_in_it(served: Document) -> None:
    """The tables of service/api/openapi.py name models and fields of other packages: one
    renamed there would silently stop being narrowed here."""
    targets = [*((model, name) for fields in LIMITED.values() for model, name in fields),
               *DATASET_FIELDS, *FREE_FORM]
    missing = [(model.__name__, name) for model, name in targets
               if not any(name in c.get("properties", {}) for c in
                          (component(served, model.__name__),))]
    assert missing == []
    for model, _rule, _words in MODEL_RULES:
        assert component(served, model.__name__) is not None, model.__name__
