"""GET /docs (Swagger UI) and GET /redoc (ReDoc) over /openapi.json, their scripts and
stylesheets served by this app from the fastapi-offline package (FastAPI's documented
self-hosting: docs_url=None, redoc_url=None, a StaticFiles mount and get_swagger_ui_html /
get_redoc_html), so the pages need no CDN, work offline, and their policies name no other
origin."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from sustain.service.web.headers import docs_csp

DOCS_PATH = "/docs"
REDOC_PATH = "/redoc"
ASSETS_PATH = "/docs/assets"
ASSETS_PACKAGE = ("fastapi_offline", "static")
"""swagger-ui-bundle.js, swagger-ui.css and favicon.png (Swagger UI 5), redoc.standalone.js."""

REDOC_SCRIPT_PATH = "/docs/redoc.js"
REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
"""The one other origin ReDoc's bundle names: the "API docs by Redocly" logo in its menu."""

router = APIRouter(include_in_schema=False)

BACK_LINK = ('<nav aria-label="Site" style="font: 14px system-ui, sans-serif; '
             'max-width: 1460px; margin: 0 auto; padding: 10px 20px 0">'
             '<a href="{root}/" style="color: #0969da; text-decoration: none">'
             '&larr; sustain status page</a></nav>')
"""What the API docs page shows above Swagger UI: the way back to the status page (the
site's own pages link to the docs in their navigation bar)."""


def with_back_link(html: str, root: str) -> str:
    """The docs page `html` with BACK_LINK first in its body."""
    return html.replace("<body>", "<body>\n" + BACK_LINK.format(root=root), 1)


@cache
def redoc_script() -> bytes:
    """ReDoc's bundle from the package with its logo pointed at nothing, so the page asks no
    other origin for anything (its policy would refuse it, and the browser log an error)."""
    bundle = files(ASSETS_PACKAGE[0]).joinpath(ASSETS_PACKAGE[1], "redoc.standalone.js")
    return bundle.read_bytes().replace(REDOC_LOGO, b"data:,")


@router.get(REDOC_SCRIPT_PATH)
async def redoc_bundle() -> Response:
    return Response(redoc_script(), media_type="text/javascript",
                    headers={"Cache-Control": "public, max-age=86400"})


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
    html = with_back_link(bytes(page.body).decode(), root)
    linked = HTMLResponse(html, headers={"Content-Security-Policy": docs_csp(html)})
    return linked


@router.get(REDOC_PATH, response_class=HTMLResponse)
async def redoc(request: Request) -> HTMLResponse:
    root = str(request.scope.get("root_path", ""))
    page = get_redoc_html(
        openapi_url=root + (request.app.openapi_url or "/openapi.json"),
        title=f"{request.app.title} API reference",
        redoc_js_url=f"{root}{REDOC_SCRIPT_PATH}",
        redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png", with_google_fonts=False)
    # ReDoc runs its search index in a worker it makes from a blob: URL
    page.headers["Content-Security-Policy"] = docs_csp(bytes(page.body).decode()) + \
        "; worker-src blob:"
    return page


def install_docs(app: FastAPI) -> None:
    """The pages and their assets on `app` (created with docs_url=None, redoc_url=None)."""
    app.mount(ASSETS_PATH, StaticFiles(packages=[ASSETS_PACKAGE]), name="docs-assets")
    app.include_router(router)
