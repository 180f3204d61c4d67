"""DSNs: which backing (and driver) a DSN names, a description of it that is safe to print,
and text with its secrets taken out.

The schemes: ``memory://``; ``sqlite:///relative.db`` or ``sqlite:////absolute.db``;
``postgresql://`` (also ``postgres://``, ``postgresql+psycopg://`` and
``postgresql+asyncpg://``, the forms SQLAlchemy-style ``DATABASE_URL``s use); ``redis://``
and ``rediss://`` (``/N`` after the host, or ``?db=N``, names database N). On PostgreSQL
and Redis, ``?durable=false`` accepts a server that may lose acknowledged writes (see
`Dsn.durable`). Nothing here does I/O, and no error raised here contains the DSN.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from durably.errors import DsnError

BACKINGS = ("memory", "sqlite", "postgresql", "redis")
DSN_ENV = "DURABLY_DSN"
"""The environment variable the CLI and `durably.App` read a DSN from when given none."""
_ALIASES = {"postgres": "postgresql", "rediss": "redis", "sqlite3": "sqlite"}
# The driver part of ``postgresql+driver://``: psycopg 3 (also under SQLAlchemy's names for
# psycopg 2, whose DSNs it reads alike) or asyncpg.
_PG_DRIVERS = {
    "psycopg": "psycopg",
    "psycopg3": "psycopg",
    "psycopg2": "psycopg",
    "asyncpg": "asyncpg",
}
# A Redis DSN's path names its database: nothing, a bare "/", or "/N" (an optional trailing
# "/"). The client would read "/11/extra" as database 11 and "/notanint" as database 0.
_REDIS_PATH = re.compile(r"/?|/([0-9]+)/?")
# The highest database index a Redis DSN may name (the server's ``databases`` is an int).
_REDIS_MAX_DB = 2**31 - 1
# A percent-escape that is not one (a password's "%" written unescaped).
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_SHAPES = (
    "a DSN looks like sqlite:///path/to/file.db, postgresql://host/db, "
    "redis://host:6379/0 or memory://"
)


@dataclass(frozen=True, slots=True)
class Dsn:
    """A parsed DSN: the backing, the driver (PostgreSQL only) and the URL that driver is
    given (the ``+driver`` part removed)."""

    backing: str
    driver: str | None
    url: str
    durable: bool = True
    """Whether the server must keep what it acknowledged across a crash (PostgreSQL:
    ``synchronous_commit`` and ``fsync`` on; Redis: persistence on), checked when the
    stores are verified. ``?durable=false`` in the DSN turns the check off, for
    development and for data that can be recreated; it is taken out of ``url``."""


def parse(dsn: str) -> Dsn:
    """The backing and driver ``dsn`` names; `DsnError` (before any I/O) when it is
    malformed or names none."""
    if not isinstance(dsn, str) or "://" not in dsn:
        raise DsnError(_SHAPES)
    scheme, rest = dsn.split("://", 1)
    base, plus, driver_name = scheme.lower().partition("+")
    backing = _ALIASES.get(base, base)
    if backing not in BACKINGS:
        raise DsnError(f"unknown DSN scheme {base!r}: use one of {', '.join(BACKINGS)}")
    driver: str | None = None
    if backing == "postgresql":
        driver = _PG_DRIVERS.get(driver_name) if plus else "psycopg"
        if driver is None:
            raise DsnError(
                f"unknown PostgreSQL driver {driver_name!r}: use postgresql://, "
                "postgresql+psycopg:// or postgresql+asyncpg://"
            )
        url = f"postgresql://{rest}"
    elif plus:
        raise DsnError(f"a {backing} DSN names no driver (got {scheme.lower()!r})")
    else:
        url = f"{base}://{rest}"
    if backing == "sqlite":
        sqlite_path(url)
    elif backing in ("postgresql", "redis"):
        if _BAD_ESCAPE.search(rest):  # the driver would refuse it only when connecting
            raise DsnError(f"malformed {backing} DSN: a '%' not followed by two hex digits")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 -- reading it checks it
        except ValueError:
            raise DsnError(f"malformed {backing} DSN: its host or port cannot be read") from None
        if backing == "redis":
            _redis_database(parts.path, parts.query)
        options = parse_qsl(parts.query, keep_blank_values=True)
        chosen = [value for name, value in options if name == "durable"]
        if chosen:
            if chosen[-1].lower() not in ("true", "false"):
                raise DsnError(f"malformed {backing} DSN: its durable= option is true or false")
            kept = urlencode([(name, value) for name, value in options if name != "durable"])
            url = urlunsplit(parts._replace(query=kept))
            return Dsn(backing, driver, url, durable=chosen[-1].lower() == "true")
    return Dsn(backing=backing, driver=driver, url=url)


def _redis_database(path: str, query: str) -> None:
    """Refuse a Redis DSN whose path or ``db=`` option is not a database index (the client
    would quietly read it as another database, or as database 0)."""
    match = _REDIS_PATH.fullmatch(unquote(path))
    if match is None or not _database_index(match[1]):
        raise DsnError(
            "malformed redis DSN: the database after the host must be a number from 0 to "
            f"{_REDIS_MAX_DB}, as in redis://host:6379/0"
        )
    for name, value in parse_qsl(query):
        if name == "db" and not _database_index(value):
            raise DsnError(
                f"malformed redis DSN: its db= option must be a number from 0 to {_REDIS_MAX_DB}"
            )


def _database_index(text: str | None) -> bool:
    """Whether ``text`` (None: no index given) is a usable database index."""
    if text is None:
        return True
    return text.isascii() and text.isdigit() and len(text) <= 10 and int(text) <= _REDIS_MAX_DB


def sqlite_path(dsn: str) -> str:
    """The file a ``sqlite:///path`` DSN names (``sqlite:////abs`` or ``sqlite:///rel``)."""
    rest = dsn.split("://", 1)[1]
    if not rest.startswith("/"):
        raise DsnError("a SQLite DSN is sqlite:///relative/path.db or sqlite:////absolute/path.db")
    path = unquote(rest[1:].split("?", 1)[0])
    if not path:
        raise DsnError("the SQLite DSN names no file: use sqlite:///path/to/file.db")
    return path


def describe(dsn: str) -> str:
    """What ``dsn`` names, safe to print: backing, host, port and database, or the SQLite
    path; never a user or a password."""
    parsed = parse(dsn)
    if parsed.backing == "memory":
        return "memory (this process only)"
    if parsed.backing == "sqlite":
        return f"sqlite {sqlite_path(parsed.url)}"
    parts = urlsplit(parsed.url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parsed.backing} {parts.hostname or 'localhost'}{port}{parts.path or ''}"


def secrets(dsn: str) -> list[str]:
    """The secret parts of ``dsn`` as they may appear in a message: the whole DSN, the
    password (as written and decoded) and any ``password=`` query value. Read without a
    URL parser, so a DSN that does not parse still gives its password up."""
    found = [dsn]
    rest = dsn.split("://", 1)[-1]
    authority = rest.split("?", 1)[0]
    if "@" in authority:
        userinfo = authority.rsplit("@", 1)[0]
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    if "?" in rest:
        query = rest.split("?", 1)[1]
        found.extend(v for k, v in parse_qsl(query) if k.lower() in ("password", "pass"))
    found.extend([unquote(s) for s in found])
    return sorted({s for s in found if s}, key=len, reverse=True)


def scrub(message: str, dsn: str) -> str:
    """``message`` with the DSN and its password replaced by placeholders."""
    for secret in secrets(dsn):
        message = message.replace(secret, "<dsn>" if secret == dsn else "***")
    return message


__all__ = ["BACKINGS", "DSN_ENV", "Dsn", "describe", "parse", "scrub", "secrets", "sqlite_path"]
