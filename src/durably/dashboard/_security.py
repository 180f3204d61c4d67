"""Who may read the dashboard and what may change through it.

With a token, every request carries it: ``?token=`` once (answered with a cookie and a
redirect that drops it from the address), the cookie after that, or an
``Authorization: Bearer`` header for scripts; each is compared in constant time. Actions
are POSTs carrying a CSRF value that must equal the browser's own CSRF cookie (a page of
another site can neither read that cookie nor our pages), from a page of this origin.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

TOKEN_COOKIE = "durably_dashboard_token"
CSRF_COOKIE = "durably_dashboard_csrf"
CSRF_FIELD = "csrf"
TOKEN_ENV = "DURABLY_DASHBOARD_TOKEN"


def same(given: str | None, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def bearer(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer`` header."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def admitted(request: Request, token: str | None) -> Response | None:
    """None when ``request`` may go on; else the answer: 401, or the redirect that trades
    a ``?token=`` for the cookie."""
    if token is None:
        return None
    offered = request.query_params.get("token")
    if offered is not None:
        if not same(offered, token):
            return PlainTextResponse("a valid dashboard token is needed", status_code=401)
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        answer = RedirectResponse(target, status_code=303)
        answer.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
        return answer
    if same(request.cookies.get(TOKEN_COOKIE), token) or same(bearer(request), token):
        return None
    return PlainTextResponse("a valid dashboard token is needed", status_code=401)


def csrf_of(request: Request) -> tuple[str, bool]:
    """The browser's CSRF value, and whether it is new (to be set as a cookie)."""
    existing = request.cookies.get(CSRF_COOKIE)
    if existing and len(existing) == 43:
        return existing, False
    return secrets.token_urlsafe(32), True


def keep_csrf(response: Response, value: str) -> None:
    """Set the CSRF cookie on ``response``."""
    response.set_cookie(CSRF_COOKIE, value, httponly=True, samesite="strict")


def forged(request: Request, submitted: str | None) -> bool:
    """Whether a POST fails the CSRF checks: its value is not the cookie's, or it comes
    from a page of another origin."""
    cookie = request.cookies.get(CSRF_COOKIE)
    if cookie is None or not same(submitted, cookie):
        return True
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin is None:
        return False  # the cookie match is the check (some clients send neither)
    host = request.headers.get("host", "")
    return urlsplit(origin).netloc != host


__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "TOKEN_COOKIE",
    "TOKEN_ENV",
    "admitted",
    "csrf_of",
    "forged",
    "keep_csrf",
    "same",
]
