"""Schemathesis against a live `sustain serve` over loopback, as the admin: every operation of
the OpenAPI document, with generated valid and invalid parameters and bodies, answers without
a server error. The service may only reach loopback and runs stay small, so generated
endpoints and notifiers cannot send traffic anywhere else."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
                    base_url: str, headers: dict[str, str] = ADMIN_HEADERS) -> int:
    """Run generated cases of one operation as the caller `headers` name; how many were
    sent."""
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

    try:
        check()
    except Unsatisfiable:
        # an operation without parameters or body has no invalid form to generate
        assert mode is GenerationMode.NEGATIVE, operation.label
    return sent


@schemathesis.serializer("application/msgpack")
def msgpack_body(ctx: Any, value: Any) -> bytes:  # noqa: ARG001 - schemathesis's signature
    """An agent upload's body: the generated value, packed (mostly not a run: a 422)."""
    return bytes(msgpack.packb(value, use_bin_type=True))


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


def test_no_operation_answers_a_server_error(live_service: str) -> None:
    """The pytest plugin of schemathesis does not load under this pytest; its strategies are
    driven directly, positive (valid) and negative (invalid) cases for each operation."""
    schema = schemathesis.openapi.from_url(f"{live_service}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()
                  if isinstance(result, Ok)]
    assert len(operations) > 40
    sent = sum(check_operation(op, mode, live_service, caller(live_service, op.path))
               for op in operations
               for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE))
    print(f"\nschemathesis: {len(operations)} operations, {sent} requests, no 5xx")
    assert sent > 10 * len(operations)
