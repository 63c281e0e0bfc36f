"""Who looks at a page, and signing in: a person signs in at /login with a key through a form
and gets an HttpOnly, SameSite=Strict session cookie (Secure over HTTPS); the key never
appears in a URL. The form is refused when posted from another site, and a source's failed
keys are throttled; while no key can sign in at all (no SUSTAIN_ADMIN_KEY, no stored key a
person can use), the form says how to get in. Scripts' bearer keys work on every page too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from sustain.service.access.auth_failures import AuthFailure, LoginThrottle
from sustain.service.access.keys import SHOWN_PREFIX_CHARS, Role, allows, key_hash
from sustain.service.access.origin import is_cross_site
from sustain.service.api.auth import (
    ANONYMOUS_VIEWER,
    BOOTSTRAP_ACTOR,
    PRINCIPAL_SCOPE_KEY,
    SESSION_COOKIE,
    Principal,
    anonymous_reads,
    authenticate_cookie,
    authenticate_header,
    client_source,
    principal_for_key,
    refuse,
)
from sustain.service.api.deps import StateDep
from sustain.service.config import Settings
from sustain.service.db import keys as key_queries
from sustain.service.db.first_key import NO_KEY_REMEDIES, person_key_exists
from sustain.service.runtime import Replica
from sustain.service.web.jinja import templates, with_code

router = APIRouter(include_in_schema=False)

MAX_FORM_BYTES = 4096


async def page_viewer(request: Request) -> Principal | None:
    """Who is looking at the page: a bearer key or a sign-in (a bad one is counted as a
    failed authentication; no cookie at all is just a visitor), or anyone when the pages are
    public (where a sign-in still shows who is signed in, and a stale one is ignored)."""
    replica = request.app.state.sustain
    public = replica.settings.public_status_page or anonymous_reads(request.scope,
                                                                   replica.settings)
    header = request.headers.get("authorization")
    cookie = request.cookies.get(SESSION_COOKIE)
    if header is None and cookie is None:
        return ANONYMOUS_VIEWER if public else None
    found = await (authenticate_header(replica, header) if header is not None
                   else authenticate_cookie(replica, cookie))
    if isinstance(found, AuthFailure) or not allows(found.role, Role.viewer):
        if public:
            return ANONYMOUS_VIEWER
        # an agent key reads no page
        refuse(request, found if isinstance(found, AuthFailure) else AuthFailure.forbidden_role)
        return None
    return found


def signed_in(viewer: Principal, settings: Settings | None = None) -> str | None:
    """The key the navigation bar names, None for an anonymous visitor: a stored key by its
    name; the bootstrap key (SUSTAIN_ADMIN_KEY, which has no name) as the admin key with the
    first characters that tell keys apart, as key lists show them."""
    if viewer is ANONYMOUS_VIEWER:
        return None
    if viewer.key_id is None and viewer.name == BOOTSTRAP_ACTOR:
        key = None if settings is None or settings.admin_key is None \
            else settings.admin_key.get_secret_value()
        return "the admin key" + (f" {key[:SHOWN_PREFIX_CHARS]}…" if key else "")
    return viewer.name


def who(request: Request, viewer: Principal) -> str | None:
    return signed_in(viewer, request.app.state.sustain.settings)


def _login_form(request: Request, error: str | None, status_code: int,
                no_key_remedies: str | None = None) -> HTMLResponse:
    return templates().TemplateResponse(
        request, "login.html",
        {"error": error,
         "no_key_remedies": None if no_key_remedies is None else with_code(no_key_remedies)},
        status_code=status_code)


async def _no_key_remedies(state: Replica) -> str | None:
    """The ways in when nobody can sign in yet (no SUSTAIN_ADMIN_KEY, no key a person can
    use), for the form to say so; None otherwise, and when the database cannot tell (the form
    is still served)."""
    if state.settings.admin_key is not None:
        return None
    try:
        async with state.api_sessions() as session:
            found = await person_key_exists(session)
    except Exception:  # noqa: BLE001 - a note on the form never takes the form down
        return None
    return None if found else NO_KEY_REMEDIES


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, state: StateDep) -> HTMLResponse:
    return _login_form(request, None, 200, await _no_key_remedies(state))


def login_throttle(request: Request) -> LoginThrottle:
    """This app's failed sign-ins per source (in memory, per replica, bounded)."""
    throttle: LoginThrottle | None = getattr(request.app.state, "login_throttle", None)
    if throttle is None:
        throttle = request.app.state.login_throttle = LoginThrottle()
    return throttle


def _from_another_site(request: Request, settings: Settings) -> bool:
    """Whether a browser posted this form from another site's page (login CSRF: signing the
    victim in as the attacker)."""
    own = [request.headers.get("host", ""), *filter(None, [settings.external_url])]
    return is_cross_site(request.headers.get("sec-fetch-site"), request.headers.get("origin"),
                         own)


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request, state: StateDep) -> Response:
    """Check the key from the form; on success a session cookie and a redirect to the page.
    A form from another site is a 403; a source with too many failed keys is a 429 (with
    Retry-After) until its window ends, its key not even checked."""
    if _from_another_site(request, state.settings):
        refuse(request, AuthFailure.cross_site)
        return _login_form(request, "Sign in from this site's own form.", 403)
    throttle, source = login_throttle(request), client_source(request.scope)
    wait_s = throttle.retry_after(source)
    if wait_s is not None:
        refuse(request, AuthFailure.login_throttled)
        refused = _login_form(request, "Too many keys were not accepted; try again later.",
                              429)
        refused.headers["Retry-After"] = str(wait_s)
        return refused
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return _login_form(request, "The form is too large.", 413)
    keys = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4).get("key") or [""]
    key = keys[0].strip()
    principal = await principal_for_key(state, key) if key else None
    if principal is not None and not allows(principal.role, Role.viewer):
        principal = None  # an agent key signs no one in
    if principal is None:
        throttle.failed(source)
        refuse(request, AuthFailure.login_failed)
        return _login_form(request, "That key was not accepted.", 401,
                           await _no_key_remedies(state))
    # a success clears no failures: they were guesses at other keys (LoginThrottle)
    request.scope[PRINCIPAL_SCOPE_KEY] = principal
    async with state.api_sessions() as session:
        lifetime = timedelta(hours=state.settings.session_hours)
        token = await key_queries.open_session(session, key_hash(key), datetime.now(UTC),
                                               lifetime)
        await session.commit()
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(SESSION_COOKIE, token, max_age=int(lifetime.total_seconds()),
                        path="/", httponly=True, samesite="strict",
                        secure=_secure(request, state.settings))
    return response


def _secure(request: Request, settings: Settings) -> bool:
    """Whether the cookie is Secure: the request came over TLS (uvicorn sets the scheme from
    X-Forwarded-Proto when the proxy is trusted: FORWARDED_ALLOW_IPS), or users reach the
    service at an https SUSTAIN_EXTERNAL_URL."""
    return request.url.scheme == "https" or (settings.external_url or "").startswith("https://")


@router.post("/logout")
async def logout(request: Request, state: StateDep) -> Response:
    token = request.cookies.get(SESSION_COOKIE)
    if token and len(token) <= 128:
        async with state.api_sessions() as session:
            await key_queries.close_session(session, token)
            await session.commit()
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict",
                           secure=_secure(request, state.settings))
    return response
