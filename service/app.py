"""The FastAPI app: the REST API, /metrics, health and the status page over one Replica.

Its lifespan only starts and stops the replica (sustain.service.runtime), which owns every
resource and is kept on `app.state.sustain`; routes reach it through the dependencies of
service/api/deps.py (`StateDep`, and `SessionDep`, `SchedulerDep` and `ExecutorDep` built on
it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI

from sustain.service.access.hosts import parse_allowed_hosts
from sustain.service.access.keys import Role
from sustain.service.api.audit import AuditMiddleware
from sustain.service.api.auth import Access
from sustain.service.api.body_limit import BodyLimit
from sustain.service.api.deprecation import DeprecationWarnings
from sustain.service.api.errors import install_error_handlers
from sustain.service.api.openapi import install as install_openapi
from sustain.service.api.routes import (
    agent,
    alerts,
    audit,
    compare,
    deliveries,
    drift,
    endpoints,
    health,
    history,
    keys,
    metrics,
    notifiers,
    probes,
    replicas,
    runs,
    silences,
    slos,
)
from sustain.service.config import Settings
from sustain.service.runtime import Replica
from sustain.service.strict_json import StrictJSONResponse
from sustain.service.web import routes as web_routes
from sustain.service.web import signin
from sustain.service.web.docs import install_docs
from sustain.service.web.headers import SecurityHeadersMiddleware
from sustain.service.web.hosts import AllowedHosts, PathOnlyRedirects

API_PREFIX = "/api/v1"


def runtime_of(app: FastAPI) -> Replica:
    """The replica an app's lifespan started (for tests; the server's signal handling reads
    `app.state.sustain` itself)."""
    replica: Replica = app.state.sustain
    return replica


def create_app(settings: Settings, database_url: str | None = None) -> FastAPI:
    """The app for `settings`. `database_url` overrides settings.database_url (the CLI passes
    the embedded server's URL here)."""
    url = database_url or settings.database_url
    if url is None:
        raise ValueError("create_app needs a database URL (start the embedded server first)")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        replica = Replica(settings, url)
        app.state.sustain = replica
        try:
            await replica.start()
            yield
        finally:
            await replica.stop()

    app = FastAPI(
        title="sustain",
        summary="Continuous monitoring of LLM inference endpoints.",
        version="0.1.0",
        lifespan=lifespan,
        # /docs is served from this package's own copy of Swagger UI (install_docs below)
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    web_routes.install_not_found_page(app)  # a browser's unknown page: the site's 404 page
    # the last added is outermost: security headers on every answer, then the Host check
    # (a refused Host reaches nothing else), redirects made path-only, the audit log (which
    # sees 413s too), then the body cap
    app.add_middleware(DeprecationWarnings)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(AuditMiddleware)
    app.add_middleware(PathOnlyRedirects)
    app.add_middleware(AllowedHosts, patterns=parse_allowed_hosts(settings.allowed_hosts))
    app.add_middleware(SecurityHeadersMiddleware)
    # Every API router gets a rule: reads need a viewer, writes an editor; keys and the audit
    # log need an admin for both.
    readers = [Depends(Access(read=Role.viewer, write=Role.editor))]
    admins = [Depends(Access(read=Role.admin, write=Role.admin))]
    # Every JSON answer goes through the strict encoder (a NaN or infinity fails loudly
    # instead of reaching a client); FastAPI's own fast path would write it as null.
    api = APIRouter(prefix=API_PREFIX, default_response_class=StrictJSONResponse)
    for module in (endpoints, probes, history, drift, runs, replicas, slos, alerts,
                   silences, notifiers, deliveries, compare):
        api.include_router(module.router, dependencies=readers)
    for module in (keys, audit):
        api.include_router(module.router, dependencies=admins)
    api.include_router(agent.router, dependencies=[Depends(Access(read=Role.agent,
                                                                  write=Role.agent))])
    app.include_router(api)
    app.include_router(health.router, default_response_class=StrictJSONResponse)
    app.include_router(metrics.router, dependencies=readers if settings.metrics_auth else [])
    app.include_router(signin.router)
    app.include_router(web_routes.router)
    install_docs(app)
    install_openapi(app, settings)
    return app
