"""GET /docs: Swagger UI over /openapi.json, its script and stylesheet served by this app from
the fastapi-offline package (FastAPI's documented self-hosting: docs_url=None, a StaticFiles
mount and get_swagger_ui_html), so the page needs no CDN, works offline, and its policy names
no other origin. ReDoc is not served."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from sustain.service.web.headers import docs_csp

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"
ASSETS_PACKAGE = ("fastapi_offline", "static")
"""swagger-ui-bundle.js, swagger-ui.css and favicon.png (Swagger UI 5)."""

router = APIRouter(include_in_schema=False)


@router.get(DOCS_PATH, response_class=HTMLResponse)
async def swagger_ui(request: Request) -> HTMLResponse:
    root = str(request.scope.get("root_path", ""))
    page = get_swagger_ui_html(
        openapi_url=root + (request.app.openapi_url or "/openapi.json"),
        title=f"{request.app.title} API",
        swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
        # the online validator would send the spec to another site (and be blocked anyway)
        swagger_ui_parameters={"validatorUrl": None})
    page.headers["Content-Security-Policy"] = docs_csp(bytes(page.body).decode())
    return page


def install_docs(app: FastAPI) -> None:
    """The page and its assets on `app` (created with docs_url=None, redoc_url=None)."""
    app.mount(ASSETS_PATH, StaticFiles(packages=[ASSETS_PACKAGE]), name="docs-assets")
    app.include_router(router)
