"""`PostgresStateStore`: runs and sessions in two tables, compare-and-set on ``version``."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any, Self, TypeVar

from durably.clock import Clock, SystemClock
from durably.errors import (
    StateConflictError,
    StateInUseError,
    StateNotFoundError,
)
from durably.postgres import statements
from durably.postgres.connection import Access
from durably.postgres.executor import Row, Session
from durably.postgres.failures import RetryBudget, state_errors
from durably.postgres.jsonb import jsonb_text
from durably.postgres.migrate import verify
from durably.postgres.schema import StateTables
from durably.postgres.settings import PostgresStoreSettings
from durably.stores.runs import (
    TERMINAL_STATES,
    USAGE_FIELDS,
    RunRecord,
    RunState,
    Scrubber,
    SessionRecord,
    StateDelta,
    StateKey,
    StatePage,
    StateQuery,
    checked_delta,
    create_batch,
    listing_start,
    stored_run,
    stored_session,
)
from durably.stores.settings import DEFAULT_MAX_VALUE_BYTES
from durably.stores.totals import RunTotals, summed, totals_request
from durably.validation import identifier, listing_page, within_size

_TEMPLATES = statements.load("state.sql")
# The column order of the counter columns in state.sql; a Usage field without a column
# would be lost, so refuse to import rather than drop it silently.
_USAGE_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "requests",
    "tool_calls",
)
if _USAGE_COLUMNS != USAGE_FIELDS:  # pragma: no cover - guards a core change
    raise ImportError(f"durably.postgres stores usage columns {_USAGE_COLUMNS}, not {USAGE_FIELDS}")
_RUN_COLUMNS = frozenset({*_USAGE_COLUMNS, "usage", "cost_micros", "iterations", "message_cursor"})
_LIVE_STATES = [state.value for state in RunState if state not in TERMINAL_STATES]


class PostgresStateStore:
    """Run and session records in PostgreSQL (`durably.stores.StateStore`).

    ``bound(connection)`` gives a store that runs inside the caller's open transaction.
    """

    def __init__(
        self,
        pool: Any,
        *,
        clock: Clock | None = None,
        settings: PostgresStoreSettings | None = None,
        tables: StateTables | None = None,
        scrub: Scrubber | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self._scrub = scrub
        self._tables = tables or StateTables()
        self._max_bytes = settings.max_value_bytes if settings else DEFAULT_MAX_VALUE_BYTES
        self._access = Access.over(
            pool, settings.retry if settings else RetryBudget(), clock=self._clock
        )
        self._sql = statements.render_all(_TEMPLATES, self._tables.names)

    async def close(self) -> None:
        """Nothing of its own to release (idempotent): the pool is its owner's."""

    @property
    def access(self) -> Access:
        """How this store reaches its database (its pool tells `PostgresDurable` whether a
        start's writes can share a transaction with it)."""
        return self._access

    @property
    def tables(self) -> StateTables:
        """The tables this store writes."""
        return self._tables

    @classmethod
    async def open(
        cls,
        pool: Any,
        *,
        clock: Clock | None = None,
        settings: PostgresStoreSettings | None = None,
        tables: StateTables | None = None,
    ) -> Self:
        """A store after `verify` accepted the database (`ConfigurationError` otherwise)."""
        await verify(pool, tables, durable=settings.durable if settings else True)
        return cls(pool, clock=clock, settings=settings, tables=tables)

    def bound(self, connection: Any) -> PostgresStateStore:
        """This store inside ``connection``'s open transaction; it retries nothing."""
        twin = object.__new__(PostgresStateStore)
        twin.__dict__.update(self.__dict__)
        twin._access = self._access.bound(connection)
        return twin

    # --- runs -----------------------------------------------------------------------------

    async def get_run(self, key: StateKey) -> RunRecord | None:
        _valid(key)
        rows = await self._run(lambda s: s.fetch(self._sql["get_run"], key.tenant, key.id))
        return _run_record(key, rows[0]) if rows else None

    async def put_run(self, record: RunRecord) -> RunRecord:
        now = self._clock.now()
        stored = stored_run(
            record,
            version=record.version + 1,
            updated_at=now,
            max_bytes=self._max_bytes,
            store="postgres",
            scrubber=self._scrub,
        )
        body = self._encode(stored.model_dump(mode="json", exclude=set(_RUN_COLUMNS | {"version"})))
        counters = [getattr(stored.usage, name) for name in _USAGE_COLUMNS]
        counters += [stored.cost_micros, stored.iterations, stored.message_cursor]
        head = [record.tenant, record.run_id, stored.state.value, stored.session_id, now]
        token = secrets.token_hex(8)  # tells a retry of this write from another writer's

        async def write(session: Session) -> Sequence[Row]:
            if record.version == 0:
                return await session.fetch(self._sql["insert_run"], *head, *counters, body, token)
            return await session.fetch(
                self._sql["update_run"], *head, *counters, body, token, record.version
            )

        if await self._run(write):
            return stored
        found = await self._run(
            lambda s: s.fetch(self._sql["run_version"], record.tenant, record.run_id, token)
        )
        return _own_write(stored, record.key, record.version, found)

    async def create_runs(self, records: Sequence[RunRecord]) -> list[bool]:
        """Store each record whose run does not exist yet, in one statement."""
        rows = self.run_rows(create_batch(records))
        if not rows:
            return []
        return list(await self._run(lambda s: self.create_runs_on(s, rows)))

    def run_rows(self, records: Sequence[RunRecord]) -> list[dict[str, object]]:
        """``records`` checked and rendered as `create_runs_on` stores them, as new runs
        (version 1, updated now); refused here as `put_run` refuses one."""
        now = self._clock.now()
        rows: list[dict[str, object]] = []
        for n, record in enumerate(records):
            stored = stored_run(
                record,
                version=1,
                updated_at=now,
                max_bytes=self._max_bytes,
                store="postgres",
                scrubber=self._scrub,
            )
            body = stored.model_dump(mode="json", exclude=set(_RUN_COLUMNS | {"version"}))
            row: dict[str, object] = {name: getattr(stored.usage, name) for name in _USAGE_COLUMNS}
            row.update(
                tenant=record.tenant,
                run_id=record.run_id,
                state=stored.state.value,
                session_id=stored.session_id,
                updated_at=now,
                cost_micros=stored.cost_micros,
                iterations=stored.iterations,
                message_cursor=stored.message_cursor,
                body=self._encode(body),
                n=n,
            )
            rows.append(row)
        return rows

    async def run_written_with(self, session: Session, record: RunRecord, token: str) -> bool:
        """Whether ``record``'s run is stored by the write that carried ``token``, on
        ``session``."""
        rows = await session.fetch(self._sql["run_version"], record.tenant, record.run_id, token)
        return bool(rows) and bool(rows[0][1])

    async def create_runs_on(self, session: Session, rows: list[dict[str, object]]) -> list[bool]:
        """Store each of ``rows`` (`run_rows`) whose run does not exist yet, on ``session``
        (inside a transaction its caller may have opened): whether each was stored."""
        token = secrets.token_hex(8)
        written = await session.fetch(self._sql["insert_runs"], json.dumps(rows), token)
        stored_keys = {(str(tenant), str(run_id)) for tenant, run_id in written}
        return [(str(row["tenant"]), str(row["run_id"])) in stored_keys for row in rows]

    async def patch_run(self, key: StateKey, delta: StateDelta) -> RunRecord:
        _valid(key)
        checked_delta(delta)
        amounts = [getattr(delta.usage, name) for name in _USAGE_COLUMNS]
        amounts += [delta.cost_micros, delta.iterations, delta.messages_read]
        now = self._clock.now()
        rows = await self._run(
            lambda s: s.fetch(self._sql["patch_run"], key.tenant, key.id, now, *amounts)
        )
        if not rows:
            raise StateNotFoundError(key, "run")
        return _run_record(key, rows[0])

    async def delete_run(self, key: StateKey) -> bool:
        _valid(key)
        rows = await self._run(lambda s: s.fetch(self._sql["delete_run"], key.tenant, key.id))
        return bool(rows)

    async def list_runs(self, query: StateQuery) -> StatePage:
        after = listing_start(query)
        state = query.state.value if query.state is not None else None
        rows = await self._run(
            lambda s: s.fetch(
                self._sql["list_runs"],
                query.tenant,
                state,
                query.updated_before,
                after,
                query.limit + 1,
            )
        )
        page = rows[: query.limit]
        records = tuple(
            _run_record(StateKey(tenant=query.tenant, id="-"), row, from_body=True) for row in page
        )
        cursor = str(int(page[-1][13])) if len(rows) > query.limit else None
        return StatePage(records=records, cursor=cursor)

    async def tenants(self, *, after: str | None = None, limit: int = 1000) -> list[str]:
        """Tenants with at least one run, in code point order (see `StateStore.tenants`)."""
        listing_page(after, limit)
        rows = await self._run(lambda s: s.fetch(self._sql["tenants"], after, limit))
        return [str(row[0]) for row in rows]

    async def tenant_totals(
        self, tenants: Sequence[str] | None = None, *, after: str | None = None, limit: int = 100
    ) -> list[RunTotals]:
        """Run totals per tenant (see `StateStore.tenant_totals`): at most 8 rows per tenant
        and state, kept by a trigger on the runs table."""
        named = totals_request(tenants, after, limit)
        if named is None:
            rows = await self._run(
                lambda s: s.fetch(self._sql["first_tenant_totals"], after, limit)
            )
        else:
            rows = await self._run(lambda s: s.fetch(self._sql["tenant_totals"], named))
        return summed(rows)

    # --- sessions -------------------------------------------------------------------------

    async def get_session(self, key: StateKey) -> SessionRecord | None:
        _valid(key)
        rows = await self._run(lambda s: s.fetch(self._sql["get_session"], key.tenant, key.id))
        if not rows:
            return None
        version, updated_at, body = rows[0]
        document = json.loads(body)
        document.update(version=int(version), updated_at=float(updated_at))
        return SessionRecord.model_validate_json(json.dumps(document))

    async def put_session(self, record: SessionRecord) -> SessionRecord:
        now = self._clock.now()
        stored = stored_session(record, version=record.version + 1, updated_at=now)
        body = self._encode(stored.model_dump(mode="json", exclude={"version", "updated_at"}))

        token = secrets.token_hex(8)  # tells a retry of this write from another writer's

        async def write(session: Session) -> Sequence[Row]:
            if record.version == 0:
                return await session.fetch(
                    self._sql["insert_session"], record.tenant, record.session_id, now, body, token
                )
            return await session.fetch(
                self._sql["update_session"],
                record.tenant,
                record.session_id,
                now,
                body,
                token,
                record.version,
            )

        if await self._run(write):
            return stored
        found = await self._run(
            lambda s: s.fetch(self._sql["session_version"], record.tenant, record.session_id, token)
        )
        return _own_write(stored, record.key, record.version, found)

    async def delete_session(self, key: StateKey, *, cascade: bool = False) -> bool:
        _valid(key)

        async def delete(session: Session) -> bool:
            if not await session.fetch(self._sql["lock_session"], key.tenant, key.id):
                return False
            live = await session.fetch(
                self._sql["live_session_runs"], key.tenant, key.id, _LIVE_STATES
            )
            if live and not cascade:
                raise StateInUseError(key, tuple(str(row[0]) for row in live))
            if cascade:
                await session.fetch(self._sql["delete_session_runs"], key.tenant, key.id)
            return bool(await session.fetch(self._sql["delete_session"], key.tenant, key.id))

        return await self._access.run(delete, errors=state_errors, transaction=True)

    # --- internals ------------------------------------------------------------------------

    async def _run(self, operation: Any) -> Any:
        return await self._access.run(operation, errors=state_errors)

    def _encode(self, document: dict[str, Any]) -> str:
        text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
        if "e+" in text:  # perhaps a float jsonb would give back as an int
            text = jsonb_text(document)
        return within_size(text, self._max_bytes, "record", "postgres")


_Stored = TypeVar("_Stored", RunRecord, SessionRecord)


def _own_write(stored: _Stored, key: StateKey, expected: int, found: Sequence[Row]) -> _Stored:
    """``stored`` if the version found is the one this very write made (a retry whose
    first attempt committed, its answer lost with the connection); else the conflict."""
    version, mine = (int(found[0][0]), bool(found[0][1])) if found else (0, False)
    if mine and version == expected + 1:
        return stored
    raise StateConflictError(key, expected, version)


def _valid(key: StateKey) -> None:
    # A key built with model_construct skipped validation; refuse it here, before any I/O.
    identifier(key.tenant, "tenant")
    identifier(key.id, "id")


def _run_record(key: StateKey, row: Row, *, from_body: bool = False) -> RunRecord:
    (version, updated_at, *numbers, body, _seq) = row
    document = json.loads(body)
    usage = dict(zip(_USAGE_COLUMNS, (int(n) for n in numbers[:7]), strict=True))
    cost, iterations, cursor = (int(n) for n in numbers[7:10])
    document.update(
        version=int(version),
        updated_at=float(updated_at),
        usage=usage,
        cost_micros=cost,
        iterations=iterations,
        message_cursor=cursor,
    )
    if not from_body:
        document.update(tenant=key.tenant, run_id=key.id)
    return RunRecord.model_validate_json(json.dumps(document))


__all__ = ["PostgresStateStore"]
