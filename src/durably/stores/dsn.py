"""DSNs: which backing (and driver) a DSN names, the options durably reads from it, a
description of it that is safe to print, and text with its secrets taken out.

The schemes: ``memory://``; ``sqlite:///relative.db`` or ``sqlite:////absolute.db``;
``postgresql://`` (also ``postgres://``, ``postgresql+psycopg://`` and
``postgresql+asyncpg://``, the forms SQLAlchemy-style ``DATABASE_URL``s use); ``redis://``
and ``rediss://`` (``/N`` after the host, or ``?db=N``, names database N); a Redis Cluster
as ``redis+cluster://host1:port1,host2:port2/`` (``rediss+cluster://`` for TLS): any of
its nodes, separated by commas, the client finds the others.

On PostgreSQL and Redis durably reads these query options and takes them out of the URL
the driver is given (the others go to the driver, which refuses what it does not know):

- ``durable=false`` accepts a server that may lose acknowledged writes (see `Dsn.durable`);
- ``pool_size=N`` (1 to 1000): the most connections the stores open at once (default
  `DEFAULT_POOL_SIZE`: 10 on PostgreSQL, 50 on Redis);
- ``pool_timeout=S`` (seconds, more than 0, at most 3600): how long a call waits for a
  free connection before `PoolExhaustedError` (default `DEFAULT_POOL_TIMEOUT`, 5 s).

PostgreSQL also takes:

- ``pooler=transaction`` (or ``session``): the DSN names a connection pooler such as
  PgBouncer, not the server (see `Dsn.pooler`);
- ``listen=postgresql://...`` (percent-encoded when it has a query of its own): a direct
  connection to the server for LISTEN, which a transaction pooler cannot carry.

A memory or SQLite DSN takes no options. Nothing here does I/O, no error raised here
contains the DSN, and `Dsn.url` is a `SecretStr`, so neither a repr nor a traceback's
locals show its password.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from pydantic import SecretStr

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
    """A parsed DSN: the backing, the driver (PostgreSQL only), the URL that driver is
    given (the ``+driver`` part and durably's own options removed) and those options."""

    backing: str
    driver: str | None
    url: SecretStr
    """The URL for the driver, secret: read it with ``get_secret_value()`` in the call
    that hands it to the driver, and keep it nowhere else."""
    durable: bool = True
    """Whether the server must keep what it acknowledged across a crash (PostgreSQL:
    ``synchronous_commit`` and ``fsync`` on; Redis: persistence on), checked when the
    stores are verified. ``?durable=false`` in the DSN turns the check off, for
    development and for data that can be recreated."""
    pool_size: int | None = None
    """``?pool_size=``: the most connections the stores hold at once (None: the
    backing's `DEFAULT_POOL_SIZE`)."""
    pool_timeout: float | None = None
    """``?pool_timeout=``: seconds a call waits for a free connection before
    `PoolExhaustedError` (None: `DEFAULT_POOL_TIMEOUT`)."""
    cluster: tuple[str, ...] = ()
    """A Redis Cluster's nodes as ``host:port`` (``redis+cluster://``): `url` names the
    first, with the credentials and options every node shares; empty for one server."""
    pooler: str | None = None
    """``?pooler=``: ``transaction`` when the DSN names a pooler that hands each
    transaction its own server connection (PgBouncer's ``pool_mode = transaction``): no
    startup options, no prepared statements, LISTEN only over `listen`, no `migrate`;
    ``session`` (one server connection per client connection) changes nothing; None:
    the server itself."""
    listen: SecretStr | None = None
    """``?listen=``: a direct PostgreSQL DSN the listening connection opens instead of
    the pool's (secret: it may hold a password)."""


def parse(dsn: str | SecretStr) -> Dsn:
    """The backing, driver and options ``dsn`` names; `DsnError` (before any I/O) when it
    is malformed, names no backing or gives an option its backing does not take."""
    secret = dsn if isinstance(dsn, SecretStr) else SecretStr(dsn)
    del dsn  # held secret from here on, also in this frame's locals
    try:
        return _parse(secret.get_secret_value())
    except DsnError as error:
        refused = error
    # Raised again from here, without the parser's frames (their locals are the DSN's
    # parts) and without what it was raised from.
    refused.__cause__ = refused.__context__ = None
    raise refused.with_traceback(None)


def _parse(dsn: str) -> Dsn:
    if not isinstance(dsn, str) or "://" not in dsn:
        raise DsnError(_SHAPES)
    scheme, rest = dsn.split("://", 1)
    base, plus, driver_name = scheme.lower().partition("+")
    backing = _ALIASES.get(base, base)
    if backing not in BACKINGS:
        raise DsnError(f"unknown DSN scheme {base!r}: use one of {', '.join(BACKINGS)}")
    if backing == "redis" and driver_name == "cluster":
        return _cluster(base, rest)
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
    if backing in ("memory", "sqlite"):
        if backing == "sqlite":
            sqlite_path(url)
        if "?" in rest:
            names = sorted({name for name, _ in parse_qsl(rest.split("?", 1)[1])})
            raise DsnError(f"a {backing} DSN takes no options (got {', '.join(names) or '?'})")
        return Dsn(backing=backing, driver=driver, url=SecretStr(url))
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
    ours = {name: value for name, value in options if name in _OPTIONS}  # the last one wins
    for name in _PG_OPTIONS if backing == "redis" else ():
        if name in ours:
            raise DsnError(f"a redis DSN takes no {name}= option (PostgreSQL only)")
    for name in _REDIS_POOL_NAMES if backing == "redis" else ():
        if any(given == name for given, _ in options):
            raise DsnError(
                f"malformed redis DSN: give pool_size= and pool_timeout= rather than {name}="
            )
    if ours:
        kept = urlencode([(name, value) for name, value in options if name not in _OPTIONS])
        url = urlunsplit(parts._replace(query=kept))
    return Dsn(
        backing=backing,
        driver=driver,
        url=SecretStr(url),
        durable=_flag(ours.get("durable", "true"), backing),
        pool_size=_count(ours.get("pool_size"), backing),
        pool_timeout=_seconds(ours.get("pool_timeout"), backing),
        pooler=_pooler(ours.get("pooler")),
        listen=_listen(ours.get("listen")),
    )


def _cluster(base: str, rest: str) -> Dsn:
    """A ``redis+cluster://`` DSN: the nodes split out of its host list, `Dsn.url` the
    first node's URL (credentials, path and options as written, checked as one server's)."""
    location, slash, tail = rest.partition("/")
    if "?" in location:  # no path: the options follow the hosts
        location, tail, slash = location.split("?", 1)[0], "?" + location.split("?", 1)[1], "/"
    userinfo, at, hosts = location.rpartition("@")
    names = hosts.split(",")
    if not all(names) or "," in userinfo:
        raise DsnError("malformed redis cluster DSN: name each node as host:port, comma-separated")
    if len(names) > _MAX_CLUSTER_NODES:
        raise DsnError(f"malformed redis cluster DSN: at most {_MAX_CLUSTER_NODES} nodes")
    nodes = []
    for name in names:
        one = _parse(f"{base}://{name}/")
        parts = urlsplit(one.url.get_secret_value())
        if parts.hostname is None or parts.port is None or parts.username or parts.password:
            raise DsnError(
                "malformed redis cluster DSN: name each node as host:port, comma-separated"
            )
        nodes.append(f"{parts.hostname}:{parts.port}")
    first = _parse(f"{base}://{userinfo}{at}{names[0]}{slash}{tail}")
    path = urlsplit(first.url.get_secret_value()).path
    database = [v for k, v in parse_qsl(urlsplit(first.url.get_secret_value()).query) if k == "db"]
    if path.strip("/") not in ("", "0") or any(v != "0" for v in database):
        raise DsnError("malformed redis cluster DSN: a cluster has database 0 only")
    return Dsn(
        backing="redis",
        driver=None,
        url=first.url,
        durable=first.durable,
        pool_size=first.pool_size,
        pool_timeout=first.pool_timeout,
        cluster=tuple(nodes),
    )


def _pooler(text: str | None) -> str | None:
    if text is None:
        return None
    if text not in ("transaction", "session"):
        raise DsnError("malformed postgresql DSN: its pooler= option is transaction or session")
    return text


def _listen(text: str | None) -> SecretStr | None:
    if text is None:
        return None
    try:
        direct = _parse(text)
        query = urlsplit(text).query
    except (DsnError, ValueError):
        direct, query = None, ""
    if (
        direct is None
        or direct.backing != "postgresql"
        or any(name in _OPTIONS for name, _ in parse_qsl(query))
    ):
        raise DsnError(
            "malformed postgresql DSN: its listen= option is a postgresql:// DSN of the "
            "server itself, percent-encoded, with no options of durably's"
        )
    return direct.url


# The options durably reads from a PostgreSQL or Redis DSN (and takes out of its URL).
_OPTIONS = frozenset({"durable", "pool_size", "pool_timeout", "pooler", "listen"})
# Those only a PostgreSQL DSN takes.
_PG_OPTIONS = ("pooler", "listen")
# The most nodes a cluster DSN may name (any one of them finds the rest).
_MAX_CLUSTER_NODES = 64
# redis-py's own names for the pool's size and wait, which would quietly override ours.
_REDIS_POOL_NAMES = ("max_connections", "timeout")
MAX_POOL_SIZE = 1000
"""The largest ``?pool_size=`` a DSN may give."""
MAX_POOL_TIMEOUT = 3600.0
"""The longest ``?pool_timeout=`` a DSN may give, in seconds."""
DEFAULT_POOL_SIZE = {"postgresql": 10, "redis": 50}
"""The pool size of a DSN that gives no ``?pool_size=``: a PostgreSQL connection is a
server process, so a few; a Redis connection is cheap, and each served workflow kind holds
one while it waits for work."""
DEFAULT_POOL_TIMEOUT = 5.0
"""Seconds a call waits for a free connection when the DSN gives no ``?pool_timeout=``."""


def _flag(text: str, backing: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise DsnError(f"malformed {backing} DSN: its durable= option is true or false")
    return text.lower() == "true"


def _count(text: str | None, backing: str) -> int | None:
    if text is None:
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 4) or not (
        1 <= int(text) <= MAX_POOL_SIZE
    ):
        raise DsnError(
            f"malformed {backing} DSN: its pool_size= option is a whole number of "
            f"connections from 1 to {MAX_POOL_SIZE}"
        )
    return int(text)


def _seconds(text: str | None, backing: str) -> float | None:
    if text is None:
        return None
    try:
        seconds = float(text) if text.isascii() and len(text) <= 32 else math.nan
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_POOL_TIMEOUT:  # NaN and infinities fail this too
        raise DsnError(
            f"malformed {backing} DSN: its pool_timeout= option is a number of seconds, "
            f"more than 0 and at most {MAX_POOL_TIMEOUT:.0f}"
        )
    return seconds


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


def sqlite_file(path: str) -> str:
    """The absolute path of SQLite file ``path`` (a relative one is read from the current
    directory, so two processes started in two directories open two files);
    ``:memory:`` as it is."""
    return path if path == ":memory:" else os.path.abspath(path)


def describe(dsn: str | SecretStr) -> str:
    """What ``dsn`` names, safe to print: backing, host, port and database, or the SQLite
    file's absolute path; never a user or a password."""
    parsed = parse(dsn)
    if parsed.backing == "memory":
        return "memory (this process only)"
    if parsed.backing == "sqlite":
        return f"sqlite {sqlite_file(sqlite_path(parsed.url.get_secret_value()))}"
    if parsed.cluster:
        return f"redis cluster {','.join(parsed.cluster)}"
    parts = urlsplit(parsed.url.get_secret_value())
    port = f":{parts.port}" if parts.port else ""
    where = f"{parsed.backing} {parts.hostname or 'localhost'}{port}{parts.path or ''}"
    return f"{where} (through a {parsed.pooler} pooler)" if parsed.pooler else where


def redacted(dsn: str | SecretStr) -> str:
    """``dsn`` with its password and any ``password=`` query value masked as ``***``, the
    rest as written: safe to print, and still says which user and options it names."""
    text = dsn.get_secret_value() if isinstance(dsn, SecretStr) else dsn
    scheme, sep, rest = text.partition("://")
    if not sep:
        return scrub(text, text)
    location, question, query = rest.partition("?")
    if "@" in location:
        userinfo, host = location.rsplit("@", 1)
        user, colon, _ = userinfo.partition(":")
        location = f"{user}{colon}{'***' if colon else ''}@{host}"
    if question:
        query = "&".join(
            f"{name}=***"
            if name.lower() in _PASSWORD_OPTIONS
            else f"{name}={redacted(unquote(value))}"
            if name == "listen"
            else f"{name}={value}"
            for name, value in (pair.partition("=")[::2] for pair in query.split("&"))
        )
    return f"{scheme}://{location}{question}{query}"


# Query options whose value is a password (libpq's and redis-py's names).
_PASSWORD_OPTIONS = ("password", "pass")


def secrets(dsn: str | SecretStr) -> list[str]:
    """The secret parts of ``dsn`` as they may appear in a message: the whole DSN, the
    password (as written and decoded) and any ``password=`` query value. Read without a
    URL parser, so a DSN that does not parse still gives its password up."""
    text = dsn.get_secret_value() if isinstance(dsn, SecretStr) else dsn
    found = [text]
    rest = text.split("://", 1)[-1]
    authority = rest.split("?", 1)[0]
    if "@" in authority:
        userinfo = authority.rsplit("@", 1)[0]
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    if "?" in rest:
        query = rest.split("?", 1)[1]
        found.extend(v for k, v in parse_qsl(query) if k.lower() in _PASSWORD_OPTIONS)
        for k, v in parse_qsl(query):
            if k == "listen" and "://" in v:  # a DSN of its own, with its own password
                found.extend(secrets(v))
    found.extend([unquote(s) for s in found])
    return sorted({s for s in found if s}, key=len, reverse=True)


def scrub(message: str, dsn: str | SecretStr) -> str:
    """``message`` with the DSN and its password replaced by placeholders."""
    whole = dsn.get_secret_value() if isinstance(dsn, SecretStr) else dsn
    for secret in secrets(whole):
        message = message.replace(secret, "<dsn>" if secret == whole else "***")
    return message


__all__ = [
    "BACKINGS",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_POOL_TIMEOUT",
    "DSN_ENV",
    "MAX_POOL_SIZE",
    "MAX_POOL_TIMEOUT",
    "Dsn",
    "describe",
    "parse",
    "redacted",
    "scrub",
    "secrets",
    "sqlite_file",
    "sqlite_path",
]
