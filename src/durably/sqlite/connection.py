"""One SQLite connection on its own thread, and the transactions that run on it.

Every transaction is ONE job on the connection's thread: BEGIN, the caller's synchronous
function, COMMIT (or ROLLBACK) all run there without returning to the event loop. A caller
cancelled while it awaits cannot stop the job midway, so the connection is never handed to
the next caller with a transaction open; `Database.close` queues behind such a job.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from durably.clock import Clock, SystemClock
from durably.errors import ConfigurationError, DurablyError, StatePersistenceError
from durably.sqlite.settings import SqliteStoreSettings
from durably.sqlite.statements import load_script, load_statements
from durably.stores.backoff import pause_seconds
from durably.stores.runs import RUN_STATES

T = TypeVar("T")

SCHEMA_VERSION = 8
"""The schema version this code writes and understands (`durably_schema_version`)."""

_SQL = load_statements("connection.sql")
_SCHEMA = load_script("schema.sql")
# 'subsec' arrived in SQLite 3.42; before that julianday('now') carries the milliseconds.
_NOW = _SQL["now_subsec"] if sqlite3.sqlite_version_info >= (3, 42, 0) else _SQL["now_julianday"]
_BUSY = frozenset({"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_RECOVERY"})
Params = tuple[Any, ...] | dict[str, Any]


class DatabaseClosedError(DurablyError):
    """The database was closed; open a new one with `connect`."""


class TransactionEndedError(DurablyError):
    """A callback ended the transaction itself (COMMIT or ROLLBACK on the cursor it was
    given); nothing after that point was written, and the callback's work may be lost."""


class _LockBusy(Exception):
    """BEGIN IMMEDIATE did not get the write lock within the busy timeout."""


def _is_busy(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "")
    return name in _BUSY or "locked" in str(exc)


_UNDECODABLE = "Could not decode to UTF-8"
"""How the sqlite3 module says a text cell is not valid UTF-8."""


class Transaction:
    """The open transaction a bound store works through, on the database's thread.

    Valid only inside the function given to `Database.transaction`; do not keep it.
    """

    __slots__ = ("_connection", "_now", "database", "work_added")

    def __init__(self, database: Database, connection: sqlite3.Connection) -> None:
        self.database = database
        self._connection = connection
        self._now: float | None = None
        self.work_added = False
        """Set by a bound queue that made an item claimable: the commit wakes idle waiters."""

    @property
    def store_now(self) -> float:
        """SQLite's own clock (seconds since the epoch), read once per transaction."""
        if self._now is None:
            self._now = float(self.row(_NOW)[0])
        return self._now

    def cursor(self) -> sqlite3.Cursor:
        """A cursor in this transaction, for callbacks that run their own statements."""
        return self._connection.cursor()

    def execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        """Run one of durably's statements; a SQLite failure becomes `StatePersistenceError`."""
        try:
            return self._connection.execute(sql, params)
        except sqlite3.Error as exc:
            raise self.database.persistence_error(exc) from exc

    def one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        """The first row of a query, or None."""
        row: sqlite3.Row | None = self.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """Every row of a query."""
        rows: list[sqlite3.Row] = self.execute(sql, params).fetchall()
        return rows

    def texts(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """Every row of a query over text that something else may have written: as `all`,
        but when a text cell is not valid UTF-8 (which SQLite keeps, and cannot give
        back as text), the query runs again with every text cell as bytes, for the caller
        to decode where it can (`durably.stores.codec.decoded_records`)."""
        try:
            rows: list[sqlite3.Row] = self._connection.execute(sql, params).fetchall()
            return rows
        except sqlite3.Error as exc:
            if _UNDECODABLE not in str(exc):
                raise self.database.persistence_error(exc) from exc
        factory = self._connection.text_factory
        self._connection.text_factory = bytes
        try:
            return self.all(sql, params)
        finally:
            self._connection.text_factory = factory

    def row(self, sql: str, params: Params = ()) -> sqlite3.Row:
        """The first row of a query that always returns one."""
        found = self.one(sql, params)
        assert found is not None, "the statement returns a row"
        return found

    def ensure_open(self) -> None:
        """Raise `TransactionEndedError` if a callback committed or rolled back on its own."""
        if not self._connection.in_transaction:
            raise TransactionEndedError(
                f"the transaction on {self.database.path} was ended inside a callback "
                "(COMMIT or ROLLBACK); durably's own writes were not made"
            )


@dataclass(frozen=True, slots=True)
class WriteMark:
    """Where a SQLite file stood when a waiter last looked (see `Database.written_by_others`)."""

    watched: int
    commits: int
    own: int


class Database:
    """A SQLite file opened by `connect`: one connection, one thread, serial transactions.

    Share one `Database` between the stores that must commit together (`SqliteDurable`,
    `Database.transaction` with bound stores). Several processes may open the same file.
    """

    def __init__(
        self,
        path: str,
        settings: SqliteStoreSettings,
        executor: ThreadPoolExecutor,
        connection: sqlite3.Connection,
        clock: Clock | None = None,
    ) -> None:
        self._path = path
        self._settings = settings
        self._clock: Clock = clock or SystemClock()
        self._executor = executor
        self._connection: sqlite3.Connection | None = connection
        self._closed = False
        self._pulse: asyncio.Event | None = None
        self._work_pulse: asyncio.Event | None = None
        self._watcher: sqlite3.Connection | None = None  # read on the event loop only
        self._busy_reads = 0
        self._commits = 0  # write transactions this Database committed
        self._closing: asyncio.Future[None] | None = None

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    @property
    def settings(self) -> SqliteStoreSettings:
        """The settings it was opened with."""
        return self._settings

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    def __repr__(self) -> str:
        return f"Database({self._path!r})"

    # --- transactions --------------------------------------------------------------------

    async def transaction(self, fn: Callable[[Transaction], T], *, write: bool = True) -> T:
        """Run ``fn(tx)`` in one transaction on the database thread and return its result.

        ``write=True`` takes the write lock first (`BEGIN IMMEDIATE`), so a read-check-write
        in ``fn`` is atomic across processes. If ``fn`` raises, everything it wrote is
        rolled back and its exception is re-raised as itself. ``fn`` runs on another thread:
        it must not touch the event loop. A busy lock is retried ``max_attempts`` times
        before `StatePersistenceError(reason="contended")`.
        """
        attempt = 1
        while True:
            try:
                result, work_added = await self._submit(functools.partial(self._run, fn, write))
            except _LockBusy as busy:
                if attempt >= self._settings.max_attempts:
                    raise StatePersistenceError(
                        self.label, "contended", f"write lock busy after {attempt} tries"
                    ) from busy.__cause__
                settings = self._settings
                await self._clock.sleep(
                    pause_seconds(settings.backoff_seconds, attempt, settings.jitter)
                )
                attempt += 1
                continue
            if write:
                self._commits += 1
            if work_added:
                self._notify_work()
            return result

    async def _submit(self, job: Callable[[], T]) -> T:
        if self._closed:
            raise DatabaseClosedError(f"SQLite database {self._path} is closed")
        return await asyncio.wrap_future(self._executor.submit(job))

    def _run(self, fn: Callable[[Transaction], T], write: bool) -> tuple[T, bool]:
        # Runs on the database thread, start to finish: nothing here awaits.
        connection = self._connection
        if connection is None:
            raise DatabaseClosedError(f"SQLite database {self._path} is closed")
        try:
            connection.execute(_SQL["begin_write" if write else "begin_read"])
        except sqlite3.Error as exc:
            if _is_busy(exc):
                raise _LockBusy() from exc
            raise self.persistence_error(exc) from exc
        try:
            tx = Transaction(self, connection)
            result = fn(tx)
            tx.ensure_open()
            try:
                connection.commit()
            except sqlite3.Error as exc:
                raise self.persistence_error(exc) from exc
            return result, tx.work_added
        except BaseException:
            # Report the failure as itself: a rollback of a transaction that is already
            # gone (ended by a callback, or by SQLite after an I/O error) must not mask it.
            if connection.in_transaction:
                try:
                    connection.rollback()
                except sqlite3.Error:
                    pass
            raise

    def persistence_error(self, exc: sqlite3.Error) -> StatePersistenceError:
        """The `StatePersistenceError` a SQLite failure stands for."""
        name = getattr(exc, "sqlite_errorname", "")
        if _is_busy(exc):
            return StatePersistenceError(self.label, "contended", str(exc))
        if name == "SQLITE_TOOBIG":
            return StatePersistenceError(self.label, "too_large", str(exc))
        return StatePersistenceError(self.label, "unavailable", f"{name or 'error'}: {exc}")

    @property
    def label(self) -> str:
        """How errors name this store."""
        return f"sqlite {self._path}"

    # --- wakeups between schedulers of this process --------------------------------------

    def notify_ready(self) -> None:
        """Wake every `next_ready` of this process waiting on this database."""
        if self._pulse is not None:
            self._pulse.set()
            self._pulse = None

    def ready_pulse(self) -> asyncio.Event:
        """An event set by the next `notify_ready` (take it before looking for work)."""
        if self._pulse is None:
            self._pulse = asyncio.Event()
        return self._pulse

    # --- wakeups for idle work queues ----------------------------------------------------

    def work_pulse(self) -> asyncio.Event:
        """An event set when a transaction of this `Database` that made work claimable
        commits (take it before looking for work)."""
        if self._work_pulse is None:
            self._work_pulse = asyncio.Event()
        return self._work_pulse

    def _notify_work(self) -> None:
        if self._work_pulse is not None:
            self._work_pulse.set()
            self._work_pulse = None

    async def write_mark(self) -> WriteMark:
        """Where the file stands now, for `written_by_others` to compare against."""
        return WriteMark(self._watched_version(), self._commits, await self._own_version())

    async def written_by_others(
        self, mark: WriteMark, *, certain: bool = False
    ) -> tuple[bool, WriteMark]:
        """Whether another process or connection committed to the file since ``mark``,
        and the mark to compare against next.

        Cheap enough to poll from the event loop while idle: SQLite's ``PRAGMA
        data_version`` read on a watching connection of this `Database` reads shared
        memory and never waits for a lock (a busy file counts as a change). Only when
        this `Database` committed meanwhile too does it ask its own connection, whose
        counter ignores its own commits, on the database thread. A busy file counts as a
        change unless ``certain``, which asks the own connection then too.
        """
        watched = self._watched_version()
        if watched == mark.watched:
            return False, mark
        if self._commits == mark.commits and not (certain and watched < 0):
            return True, WriteMark(watched, mark.commits, mark.own)
        own = await self._own_version()
        return own != mark.own, WriteMark(watched, self._commits, own)

    def _watched_version(self) -> int:
        if self._closed:
            raise DatabaseClosedError(f"SQLite database {self._path} is closed")
        if self._path == ":memory:":
            return 0  # a private database: no other connection can write it
        try:
            if self._watcher is None:
                self._watcher = sqlite3.connect(self._path, timeout=0, check_same_thread=False)
            return int(self._watcher.execute(_SQL["data_version"]).fetchone()[0])
        except sqlite3.Error as exc:
            if _is_busy(exc):
                self._busy_reads += 1
                return -self._busy_reads  # never equal to a real version: look again
            raise self.persistence_error(exc) from exc

    async def _own_version(self) -> int:
        return await self._submit(self._read_own_version)

    def _read_own_version(self) -> int:
        connection = self._connection
        if connection is None:
            raise DatabaseClosedError(f"SQLite database {self._path} is closed")
        try:
            return int(connection.execute(_SQL["data_version"]).fetchone()[0])
        except sqlite3.Error as exc:
            raise self.persistence_error(exc) from exc

    # --- closing -------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the connection after every job already queued, including one a cancelled
        caller left running, has finished. Idempotent: every call waits for that close."""
        if self._closing is None:
            self._closed = True
            self._closing = asyncio.wrap_future(self._executor.submit(self._close_connection))
            self._executor.shutdown(wait=False)  # the jobs already queued still run
        # Shielded: a cancelled closer must not cancel the close itself, which would leave
        # the connection open for good (a later close would find nothing to do).
        if not self._closing.done():
            await asyncio.shield(self._closing)

    def _close_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.close()

    async def __aenter__(self) -> Database:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def connect(
    path: str | os.PathLike[str] | None = None,
    *,
    settings: SqliteStoreSettings | None = None,
    clock: Clock | None = None,
) -> Database:
    """Open (creating if needed) the durably database at ``path`` and migrate it.

    A write lock still busy after the busy timeout is tried again ``max_attempts`` times
    in all, pausing between tries on ``clock`` (`SystemClock` by default).

    The file is put in WAL mode with ``synchronous=FULL``, the settings' busy timeout and
    page cache; the schema is created idempotently under the write lock. Raises
    `ConfigurationError` naming the file when it cannot be opened or written, is not a
    SQLite database, or has a schema version newer than this code understands;
    `StatePersistenceError(reason="contended")` when another connection keeps the file
    locked past the busy timeout.
    """
    if settings is None:
        if path is None:
            raise ConfigurationError("connect() needs a path or SqliteStoreSettings")
        settings = SqliteStoreSettings(path=os.fspath(path))
    elif path is not None:
        settings = settings.model_copy(update={"path": os.fspath(path)})
    resolved = settings.path
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="durably-sqlite")
    try:
        connection = await asyncio.wrap_future(executor.submit(_open, resolved, settings))
    except BaseException:
        executor.shutdown(wait=False)
        raise
    return Database(resolved, settings, executor, connection, clock)


def _open(path: str, settings: SqliteStoreSettings) -> sqlite3.Connection:
    if path != ":memory:":
        target = Path(path)
        if target.is_dir():
            raise ConfigurationError(f"cannot use {path} as a SQLite database: it is a directory")
        if not target.parent.is_dir():
            raise ConfigurationError(
                f"cannot create SQLite database {path}: directory {target.parent} does not exist"
            )
        _create_owner_only(path)
    try:
        connection = sqlite3.connect(
            path,
            timeout=settings.busy_timeout_seconds,
            isolation_level=None,  # durably issues BEGIN/COMMIT itself
        )
    except sqlite3.Error as exc:
        raise ConfigurationError(f"cannot open SQLite database {path}: {exc}") from exc
    connection.row_factory = sqlite3.Row
    try:
        _journal_wal(connection, settings)
        connection.execute(_SQL["synchronous_full"])
        connection.execute(_SQL["page_cache"].format(kib=int(settings.page_cache_mib) * 1024))
        _migrate(connection, path)
    except ConfigurationError:
        connection.close()
        raise
    except sqlite3.Error as exc:
        connection.close()
        if _is_busy(exc):  # another connection kept the lock past the busy timeout
            raise StatePersistenceError(f"sqlite {path}", "contended", str(exc)) from exc
        raise ConfigurationError(f"cannot use {path} as a durably SQLite database: {exc}") from exc
    return connection


def _create_owner_only(path: str) -> None:
    # SQLite gives the -wal and -shm files the mode of the database file, so creating the
    # file 0600 (an empty file is a new database) keeps all three from other users. A file
    # that exists keeps its mode: that is its owner's choice.
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise ConfigurationError(f"cannot create SQLite database {path}: {exc}") from exc


def _journal_wal(connection: sqlite3.Connection, settings: SqliteStoreSettings) -> None:
    # While other connections open a fresh file, switching it to WAL fails with SQLITE_BUSY
    # at once, without calling the busy handler: wait it out here, up to the busy timeout.
    deadline = time.monotonic() + settings.busy_timeout_seconds
    delay = 0.001
    while True:
        try:
            connection.execute(_SQL["journal_wal"]).fetchall()
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay * random.uniform(0.5, 1.0))  # on the database thread, not the loop
        delay = min(delay * 2, 0.1)


def _add_tenant_seq(connection: sqlite3.Connection) -> None:
    # Version 3 lists runs by their place within the tenant: a file made earlier gains the
    # column (SQLite's ALTER has no IF NOT EXISTS), set to `seq`, which orders alike.
    columns = {row[0] for row in connection.execute(_SQL["runs_columns"])}
    if columns and "tenant_seq" not in columns:
        connection.execute(_SQL["add_tenant_seq"])
        connection.execute(_SQL["fill_tenant_seq"])


def _add_workflow_tenant(connection: sqlite3.Connection) -> None:
    # Version 5 serves ready workflows by tenant: entries made earlier gain the column, set
    # to the default tenant, before the schema indexes it.
    columns = {row[0] for row in connection.execute(_SQL["workflow_queue_columns"])}
    if columns and "tenant" not in columns:
        connection.execute(_SQL["add_workflow_tenant"])
    # Version 8 serves a tenant's line by priority, and a gate's line too: entries and
    # gated workflows made earlier are NORMAL.
    if columns and "priority" not in columns:
        connection.execute(_SQL["add_workflow_priority"])
    gated = {row[0] for row in connection.execute(_SQL["gated_columns"])}
    if gated and "priority" not in gated:
        connection.execute(_SQL["add_gated_priority"])


def _add_work_flow(connection: sqlite3.Connection) -> None:
    # Version 6 gates items by concurrency and throttle keys: items made earlier gain the
    # columns, empty (no gate), before the schema indexes them.
    columns = {row[0] for row in connection.execute(_SQL["work_columns"])}
    if columns and "concurrency_key" not in columns:
        for statement in _SQL["add_work_flow"].split(";"):
            connection.execute(statement)


def _migrate(connection: sqlite3.Connection, path: str) -> None:
    connection.execute(_SQL["begin_write"])
    try:
        connection.execute(_SQL["create_schema_version"])
        row = connection.execute(_SQL["get_schema_version"]).fetchone()
        found = 0 if row is None else int(row[0])
        if found > SCHEMA_VERSION:
            raise ConfigurationError(
                f"SQLite database {path} has durably schema version {found}, newer than "
                f"version {SCHEMA_VERSION} this durably understands; upgrade durably"
            )
        if found < SCHEMA_VERSION:
            _add_tenant_seq(connection)
            _add_workflow_tenant(connection)
            _add_work_flow(connection)
            for statement in _SCHEMA:
                connection.execute(statement)
            if found < 8:  # runs opened before their state followed their workflow
                connection.execute(_SQL["follow_runs"], {"states": json.dumps(RUN_STATES)})
            connection.execute(_SQL["set_schema_version"], {"version": SCHEMA_VERSION})
        connection.commit()
    except BaseException:
        if connection.in_transaction:
            connection.rollback()
        raise


__all__ = [
    "SCHEMA_VERSION",
    "Database",
    "DatabaseClosedError",
    "Transaction",
    "TransactionEndedError",
    "connect",
]
