"""A DSN's password never reaches a traceback's locals (what error reporters capture), a
repr, an error or a log line, on every path that opens stores: the App, `open_stores`,
refused logins, unreachable servers, missing databases and options nobody takes."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import pytest
from pydantic import SecretStr

import durably
from durably.stores.dsn import parse, redacted
from tests.pg_service import postgres_dsn
from tests.redis_service import durable_server

__all__ = ["postgres_dsn"]

PASSWORD = "Pl41n-T3xt-pw"


def _pg(postgres_dsn: str, *, database: str, scheme: str = "postgresql", query: str = "") -> str:
    parts = urlsplit(postgres_dsn)
    host = f"{parts.hostname}:{parts.port or 5432}"
    return f"{scheme}://root:{PASSWORD}@{host}/{database}{query}"


def _redis(*, query: str = "", port: int | None = None, user: str = "default") -> str:
    port = durable_server().port if port is None else port
    return f"redis://{user}:{PASSWORD}@127.0.0.1:{port}/0{query}"


CASES: dict[str, Callable[[str], str]] = {
    "pg database missing": lambda pg: _pg(pg, database="durably_no_such_db"),
    "pg+asyncpg database missing": lambda pg: _pg(
        pg, database="durably_no_such_db", scheme="postgresql+asyncpg"
    ),
    "pg unreachable": lambda _: f"postgresql://root:{PASSWORD}@127.0.0.1:1/app",
    "pg option nobody takes": lambda pg: _pg(pg, database="postgres", query="?bogus=1"),
    "pg pool size not a number": lambda pg: _pg(pg, database="x", query="?pool_size=ten"),
    "redis login refused": lambda _: _redis(user="durably_no_such_user"),
    "redis unreachable": lambda _: _redis(port=1),
    "redis option nobody takes": lambda _: _redis(query="?bogus=1"),
    "redis pool timeout negative": lambda _: _redis(query="?pool_timeout=-1"),
}


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and every exception it carries, suppressed contexts included (some
    reporters walk those too)."""
    seen: list[BaseException] = []
    todo = [error]
    while todo:
        current = todo.pop()
        if any(current is s for s in seen):
            continue
        seen.append(current)
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return seen


def _shown(error: BaseException) -> str:
    """Everything a reporter capturing locals would ship: each exception of the chain, its
    message, and every frame of its traceback with its locals, but the frames of this
    test module (whose own locals hold the DSN it was given, as a caller's would)."""
    parts = []
    for each in _chain(error):
        parts += [repr(each), str(each)]
        summary = traceback.TracebackException(
            type(each), each, each.__traceback__, capture_locals=True, compact=True
        )
        frames = [frame for frame in summary.stack if frame.filename != __file__]
        summary.stack = traceback.StackSummary.from_list(frames)
        parts.extend(summary.format())
    return "\n".join(parts)


async def _failure(open_them: Callable[[], Awaitable[object]]) -> BaseException:
    try:
        await open_them()
    except Exception as error:
        return error
    raise AssertionError("opening succeeded")


@pytest.mark.parametrize("case", sorted(CASES))
async def test_opening_through_the_app_leaves_the_password_in_no_frame_error_or_log(
    case: str, postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    dsn = CASES[case](postgres_dsn)

    async def open_app() -> None:
        app = durably.App(dsn)  # a malformed DSN fails here; the rest at first use
        assert PASSWORD not in repr(app) + app.dsn
        try:
            await app.stores()
        finally:
            await app.close()

    error = await _failure(open_app)
    assert isinstance(error, durably.DurablyError), _shown(error)
    shown = _shown(error)
    assert "Traceback" in shown or "Error" in shown  # the frames were formatted
    assert PASSWORD not in shown
    logged = "\n".join(
        caplog.handler.format(record) for record in caplog.records
    )  # messages and any exc_info
    assert PASSWORD not in logged


@pytest.mark.parametrize("case", ["pg database missing", "redis login refused", "pg unreachable"])
async def test_open_stores_given_a_secret_leaves_the_password_in_no_frame(
    case: str, postgres_dsn: str
) -> None:
    secret = SecretStr(CASES[case](postgres_dsn))
    error = await _failure(lambda: durably.open_stores(secret))
    assert PASSWORD not in _shown(error)


def test_a_parsed_dsn_and_an_apps_dsn_show_no_password_yet_keep_the_rest() -> None:
    dsn = f"postgresql://root:{PASSWORD}@db.example:5433/app?sslmode=require&pool_size=3"
    parsed = parse(dsn)
    assert PASSWORD not in repr(parsed) + str(parsed)
    assert parsed.url.get_secret_value().startswith(f"postgresql://root:{PASSWORD}@")
    app = durably.App(dsn)
    assert app.dsn == "postgresql://root:***@db.example:5433/app?sslmode=require&pool_size=3"
    assert PASSWORD not in repr(app) + repr(vars(app))
    query_password = f"redis://127.0.0.1:6379/0?password={PASSWORD}&db=2"
    assert redacted(query_password) == "redis://127.0.0.1:6379/0?password=***&db=2"
    assert redacted("sqlite:///app.db") == "sqlite:///app.db"
