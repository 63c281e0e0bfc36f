"""Schemathesis against a live `sustain serve` over loopback, as the admin: every operation of
the OpenAPI document, with generated valid and invalid parameters and bodies, answers without
a server error, and the valid cases of the operations that take the richest bodies are mostly
taken: the document says what the service enforces. The service may only reach loopback and
runs stay small, so generated endpoints and notifiers cannot send traffic anywhere else."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from math import comb
from pathlib import Path
from typing import Any, Literal

import httpx
import msgpack
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.core.result import Ok
from schemathesis.generation.case import Case
from schemathesis.schemas import APIOperation
from sqlalchemy.engine import make_url

from tests.conftest import _admin, run_sync
from tests.processes import ADMIN_HEADERS, SustainProcess, free_port

EXAMPLES_PER_OPERATION = 15
"""Generated cases per operation and mode: every operation of the document is still driven
with valid and invalid cases (over a thousand requests in all), in about half the time 25
took."""

MOSTLY_TAKEN = frozenset({
    "GET /api/v1/compare", "POST /api/v1/probes", "PATCH /api/v1/probes/{probe_id}",
    "POST /api/v1/notifiers", "PATCH /api/v1/notifiers/{notifier_id}",
    "PATCH /api/v1/slos/{slo_id}", "POST /api/v1/keys", "POST /api/v1/silences"})
"""Operations whose valid cases (POSITIVE, as the document describes them) must mostly be
taken: their bodies and parameters carry the rules (patterns, bounds, one field or another,
the deployment's limits and policies) that a document silent about them would leave a
client to learn from 422s."""
MIN_TAKEN_SHARE = 0.5
"""Each MOSTLY_TAKEN operation takes at least this share of its judged valid cases."""
DOUBT = 0.1
"""How unlikely the counts seen must be, were the share MIN_TAKEN_SHARE, before an operation
fails (with 15 judged cases: 4 or fewer taken; with 11: 2 or fewer). With 15 cases an
operation judges 2 to 15 of them (its others write an integer as 2.0), too few for a share
to be read exactly: measured over 20 runs of 15 cases, PATCH SLOs took 0.42 to 1.0 (median
0.78: a tier's short window below its long one is a rule across fields no schema states),
POST probes 0.38 to 1.0 (of 2 to 11 judged), the others 0.6 to 1.0, so a bare share of 0.5
would fail a run in ten; this fails one in thousands. Before the document said what the
service checks they took 0.0 to 0.34 (50 cases)."""
MIN_POOLED_SHARE = 0.75
"""The share of all MOSTLY_TAKEN operations' judged valid cases together (about 110 of
them): measured 0.9; 0.25 before."""
MISSING = ("does not exist", "no probe named")
"""A 422 every problem of which names an object that does not exist (a generated id or probe
name) says the case was valid and its reference random, as a 404 does."""
WHOLE_INTEGER = "Input should be a valid integer"


Verdict = Literal["taken", "whole_float", "refused"]


@dataclass
class Tally:
    """What the service answered one operation's valid cases."""

    verdicts: Counter[Verdict] = field(default_factory=Counter)
    refusals: list[str] = field(default_factory=list)

    def judged(self) -> int:
        return self.verdicts["taken"] + self.verdicts["refused"]

    def share(self) -> float:
        return self.verdicts["taken"] / self.judged() if self.judged() else 1.0

    def below_min_share(self) -> bool:
        """Whether the counts show a share below MIN_TAKEN_SHARE: as few taken as seen (or
        fewer) would happen with less than DOUBT chance at that share."""
        judged, taken = self.judged(), self.verdicts["taken"]
        chance = sum(comb(judged, k) * MIN_TAKEN_SHARE**k * (1 - MIN_TAKEN_SHARE)**(judged - k)
                     for k in range(taken + 1))
        return chance < DOUBT


def _whole_floats(value: object) -> bool:
    """Whether `value` holds a float with no fractional part (JSON's `2.0`) anywhere."""
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, dict):
        return any(_whole_floats(v) for v in value.values())
    if isinstance(value, list):
        return any(_whole_floats(v) for v in value)
    return False


def verdict(status: int, answer: str, body: object) -> Verdict:
    """How the service took a valid case: taken (2xx; 404 or 409, or a 422 only about
    objects that do not exist: the case named a random id or an existing name); refused only
    for writing an integer as `2.0` (JSON Schema calls that an integer, and schemathesis sends
    integers so half the time; input models are strict on purpose, probes/inputs.py, so
    such a case is not judged); or refused."""
    if status < 300 or status in (404, 409):
        return "taken"
    problems = json.loads(answer).get("errors") or [] if status == 422 else []
    messages = [str(p.get("message", "")) for p in problems]
    if messages and all(any(m in message for m in MISSING) for message in messages):
        return "taken"
    if messages and all(m == WHOLE_INTEGER for m in messages) and _whole_floats(body):
        return "whole_float"
    return "refused"


@pytest.fixture(scope="module")
def live_service(pg_server_url: str, template_database: str,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One service for the whole module, on its own database."""
    name = f"sustain_st_{uuid.uuid4().hex[:12]}"
    run_sync(_admin(pg_server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template_database}"'))
    url = make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
    port = free_port()
    log: Path = tmp_path_factory.mktemp("schemathesis") / "serve.log"
    service = SustainProcess(["serve", "--port", str(port)], log, env={
        "SUSTAIN_DATABASE_URL": url, "SUSTAIN_ALLOWED_TARGETS": "127.0.0.0/8",
        "SUSTAIN_MAX_RATE": "20", "SUSTAIN_MAX_CONCURRENCY": "4",
        "SUSTAIN_MAX_RUN_S": "5"})
    try:
        with service:
            service.wait_http(f"http://127.0.0.1:{port}/readyz")
            yield f"http://127.0.0.1:{port}"
            assert "Traceback" not in service.output(), service.output()[-4000:]
    finally:
        run_sync(_admin(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def check_operation(operation: APIOperation[Any, Any, Any, Any], mode: GenerationMode,
                    base_url: str, headers: dict[str, str] = ADMIN_HEADERS,
                    tally: Tally | None = None) -> int:
    """Run generated cases of one operation as the caller `headers` name; how many were
    sent. With `tally`, each valid case's verdict is counted there."""
    sent = 0

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case: Case[Any]) -> None:
        nonlocal sent
        response = case.call(base_url=base_url, headers=headers, timeout=30)
        sent += 1
        where = (mode.value, case.method, case.formatted_path, case.query, case.body)
        assert response.status_code < 500, (*where, response.status_code, response.text[:500])
        if mode is GenerationMode.POSITIVE:
            # negative cases also mutate the Authorization header, which rightly gets a 401
            assert response.status_code not in (401, 403), where
            if tally is not None:
                found = verdict(response.status_code, response.text, case.body)
                tally.verdicts[found] += 1
                if found == "refused" and len(tally.refusals) < 5:
                    tally.refusals.append(f"{response.status_code} {response.text[:300]}")

    try:
        check()
    except Unsatisfiable:
        # an operation without parameters or body has no invalid form to generate
        assert mode is GenerationMode.NEGATIVE, operation.label
    return sent


@schemathesis.serializer("application/msgpack")
def msgpack_body(ctx: Any, value: Any) -> bytes:  # noqa: ARG001 - schemathesis's signature
    """An agent upload's body: the generated value, packed (mostly not a run: a 422)."""
    return bytes(msgpack.packb(packable(value), use_bin_type=True))


def packable(value: Any) -> Any:
    """`value` with every integer beyond 64 bits as a float: msgpack has no other way to
    carry it (the document bounds the upload's integers; its free-form summary does not)."""
    if isinstance(value, int) and not isinstance(value, bool) \
            and not -(2**63) <= value < 2**64:
        return float(value)
    if isinstance(value, list):
        return [packable(v) for v in value]
    if isinstance(value, dict):
        return {k: packable(v) for k, v in value.items()}
    return value


def caller(base_url: str, path: str) -> dict[str, str]:
    """The admin; for the agent's routes (which answer only an agent key, an admin gets
    403) a fresh agent key, made just before: generated DELETEs of /api/v1/keys/{id} may
    have revoked an older one."""
    if not path.startswith("/api/v1/agent/"):
        return ADMIN_HEADERS
    r = httpx.post(f"{base_url}/api/v1/keys", headers=ADMIN_HEADERS, timeout=30, json={
        "name": f"agent-{uuid.uuid4().hex[:8]}", "role": "agent", "location": "default"})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


def test_no_operation_answers_a_server_error_and_valid_cases_are_mostly_taken(
        live_service: str) -> None:
    """The pytest plugin of schemathesis does not load under this pytest; its strategies are
    driven directly, positive (valid) and negative (invalid) cases for each operation. The
    positive cases of MOSTLY_TAKEN operations are the ones counted (no case is added)."""
    schema = schemathesis.openapi.from_url(f"{live_service}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()
                  if isinstance(result, Ok)]
    assert len(operations) > 40
    assert {op.label for op in operations} >= MOSTLY_TAKEN
    tallies = {label: Tally() for label in MOSTLY_TAKEN}
    sent = sum(check_operation(op, mode, live_service, caller(live_service, op.path),
                               tallies.get(op.label) if mode is GenerationMode.POSITIVE
                               else None)
               for op in operations
               for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE))
    shares = {label: f"{t.share():.2f} of {t.judged()} ({t.verdicts['whole_float']} with "
              "2.0 integers)" for label, t in sorted(tallies.items())}
    print(f"\nschemathesis: {len(operations)} operations, {sent} requests, no 5xx; valid "
          f"cases taken: {shares}")
    assert sent > 10 * len(operations)
    judged = sum(t.judged() for t in tallies.values())
    assert judged > 4 * len(tallies)
    low = {label: (shares[label], t.refusals) for label, t in tallies.items()
           if t.below_min_share()}
    assert not low, low
    pooled = sum(t.verdicts["taken"] for t in tallies.values()) / judged
    assert pooled >= MIN_POOLED_SHARE, (pooled, {label: (shares[label], t.refusals)
                                                 for label, t in tallies.items()})
