"""A web dashboard over an App's stores: queues, workflows and agent runs, served as
server-rendered HTML with a small vendored script for live refresh (extra
``durably[dashboard]``).

Mount `dashboard` in an ASGI application, or run ``durably dashboard --dsn ...``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from durably.errors import InvalidInputError
from durably.validation import identifier

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from durably.app import App

DEFAULT_QUEUES: tuple[str, ...] = ("default",)


def dashboard(
    app: App,
    *,
    token: str | None = None,
    allow_actions: bool = False,
    queues: Sequence[str] = DEFAULT_QUEUES,
    refresh_seconds: float = 2.0,
) -> Starlette:
    """Return the dashboard of ``app``'s stores as an ASGI application.

    Args:
        app: The App whose stores it shows (its DSN is never shown).
        token: When set, every request must carry it (``?token=`` once, then a cookie; or
            an ``Authorization: Bearer`` header).
        allow_actions: Whether its buttons act (requeue, send, cancel, resume, fork).
            Off: every action is refused with 403.
        queues: The work queues it shows.
        refresh_seconds: How often an open page refreshes its figures, 0.5 to 3600.

    Raises:
        InvalidInputError: An empty token, no queue or a bad queue name, or a refresh
            period out of range.
        ImportError: The ``dashboard`` extra is not installed.
    """
    if token is not None and not token.strip():
        raise InvalidInputError("token: empty (leave it out to serve without one)")
    names = tuple(identifier(name, "queues") for name in queues)
    if not names:
        raise InvalidInputError("queues: name at least one queue")
    if not 0.5 <= refresh_seconds <= 3600:
        raise InvalidInputError("refresh_seconds: must be between 0.5 and 3600")
    from durably.dashboard._site import Site

    site = Site(
        app,
        token=token,
        allow_actions=allow_actions,
        queues=names,
        refresh_seconds=refresh_seconds,
    )
    return site.asgi()


__all__ = ["DEFAULT_QUEUES", "dashboard"]
