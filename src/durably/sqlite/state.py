"""Runs and sessions in a SQLite file: compare-and-set under `BEGIN IMMEDIATE`."""

from __future__ import annotations

import json
from collections.abc import Sequence

from durably.clock import Clock, SystemClock
from durably.errors import (
    StateConflictError,
    StateInUseError,
    StateNotFoundError,
)
from durably.sqlite.connection import Database, Transaction
from durably.sqlite.statements import load_statements
from durably.stores.runs import (
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
    patched_run,
    stored_run,
    stored_session,
)
from durably.stores.totals import RunTotals, summed, totals_request
from durably.validation import identifier, listing_page, within_size

_SQL = load_statements("state.sql")
_LIVE_STATES = json.dumps([state.value for state in RunState if not state.terminal])


def _run_key(key: StateKey) -> dict[str, str]:
    # Re-check even a constructed key: `model_construct` skips the validators.
    return {"tenant": identifier(key.tenant, "tenant"), "run_id": identifier(key.id, "id")}


def _session_key(key: StateKey) -> dict[str, str]:
    return {"tenant": identifier(key.tenant, "tenant"), "session_id": identifier(key.id, "id")}


class BoundSqliteStateStore:
    """The state store's operations inside an open `Transaction` (synchronous).

    Obtain it with `SqliteStateStore.bound(tx)` inside `Database.transaction`, to commit
    runs together with other writes (e.g. the work they queue). Same semantics and errors
    as `SqliteStateStore`; nothing is retried.
    """

    def __init__(
        self, tx: Transaction, clock: Clock, max_value_bytes: int, scrub: Scrubber | None = None
    ) -> None:
        self._tx = tx
        self._clock = clock
        self._max_bytes = max_value_bytes
        self._scrub = scrub

    def get_run(self, key: StateKey) -> RunRecord | None:
        """The run at ``key``, or None."""
        row = self._tx.one(_SQL["get_run"], _run_key(key))
        return None if row is None else RunRecord.model_validate_json(row[0])

    def put_run(self, record: RunRecord) -> RunRecord:
        """Compare-and-set write; `StateConflictError` with both versions."""
        return self._put_run(
            record, *_prepared_run(record, self._clock.now(), self._max_bytes, self._scrub)
        )

    def _put_run(self, record: RunRecord, saved: RunRecord, text: str) -> RunRecord:
        """`put_run` of ``record``, already checked and rendered (``saved`` as ``text``)."""
        params = _run_key(record.key)
        row = self._tx.one(_SQL["run_version"], params)
        actual = 0 if row is None else int(row[0])
        if actual != record.version:
            raise StateConflictError(record.key, record.version, actual)
        self._write_run(saved, insert=row is None, text=text)
        return saved

    def create_run(self, record: RunRecord, saved: RunRecord, text: str) -> bool:
        """Store ``saved`` (``record`` checked and rendered as ``text``) unless its run
        exists: whether it was stored."""
        if self._tx.one(_SQL["run_version"], _run_key(record.key)) is not None:
            return False
        self._write_run(saved, insert=True, text=text)
        return True

    def patch_run(self, key: StateKey, delta: StateDelta) -> RunRecord:
        """Add ``delta`` and bump the version under the write lock; `StateNotFoundError`."""
        return self._patch_run(key, checked_delta(delta))

    def _patch_run(self, key: StateKey, delta: StateDelta) -> RunRecord:
        """`patch_run` of a checked ``delta``."""
        current = self.get_run(key)
        if current is None:
            raise StateNotFoundError(key, "run")
        merged = patched_run(current, delta, updated_at=self._clock.now())
        self._write_run(merged, insert=False)
        return merged

    def _write_run(self, record: RunRecord, *, insert: bool, text: str | None = None) -> None:
        values: dict[str, object] = {
            **_run_key(record.key),
            "session_id": record.session_id,
            "state": record.state.value,
            "version": record.version,
            "updated_at": record.updated_at,
            "record": record.model_dump_json() if text is None else text,
        }
        if insert:  # a new run takes the tenant's next place, the listing order
            (place,) = self._tx.all(_SQL["next_run_place"], {"tenant": record.tenant})
            values["place"] = place[0]
        self._tx.execute(_SQL["insert_run" if insert else "update_run"], values)

    def delete_run(self, key: StateKey) -> bool:
        """Delete the run; False if there was none."""
        return self._tx.execute(_SQL["delete_run"], _run_key(key)).rowcount > 0

    def list_runs(self, query: StateQuery) -> StatePage:
        """One page of the tenant's runs in creation order."""
        return self._list_runs(query, listing_start(query))

    def _list_runs(self, query: StateQuery, after: int) -> StatePage:
        """`list_runs` of a checked ``query`` listing after the tenant's place ``after``."""
        rows = self._tx.all(
            _SQL["list_runs"],
            {
                "after": after,
                "tenant": query.tenant,
                "state": None if query.state is None else query.state.value,
                "updated_before": query.updated_before,
                "limit": query.limit + 1,
            },
        )
        page = rows[: query.limit]
        cursor = str(page[-1][0]) if len(rows) > query.limit else None
        records = tuple(RunRecord.model_validate_json(row[1]) for row in page)
        return StatePage(records=records, cursor=cursor)

    def tenants(self, *, after: str | None = None, limit: int = 1000) -> list[str]:
        """Tenants with at least one run, in code point order."""
        listing_page(after, limit)
        rows = self._tx.all(_SQL["tenants"], {"after": after, "limit": limit})
        return [str(row[0]) for row in rows]

    def tenant_totals(
        self, tenants: Sequence[str] | None = None, *, after: str | None = None, limit: int = 100
    ) -> list[RunTotals]:
        """Run totals per tenant (see `StateStore.tenant_totals`)."""
        return self._tenant_totals(totals_request(tenants, after, limit), after, limit)

    def _tenant_totals(
        self, named: list[str] | None, after: str | None, limit: int
    ) -> list[RunTotals]:
        """`tenant_totals` of a checked request (``named`` None: the first tenants)."""
        if named is None:
            rows = self._tx.all(_SQL["first_tenant_totals"], {"after": after, "limit": limit})
        else:
            rows = self._tx.all(_SQL["tenant_totals"], {"tenants": json.dumps(named)})
        return summed(rows)

    def get_session(self, key: StateKey) -> SessionRecord | None:
        """The session at ``key``, or None."""
        row = self._tx.one(_SQL["get_session"], _session_key(key))
        return None if row is None else SessionRecord.model_validate_json(row[0])

    def put_session(self, record: SessionRecord) -> SessionRecord:
        """Compare-and-set write of a session; `StateConflictError`."""
        prepared = _prepared_session(record, self._clock.now(), self._max_bytes)
        return self._put_session(record, *prepared)

    def _put_session(self, record: SessionRecord, saved: SessionRecord, text: str) -> SessionRecord:
        """`put_session` of ``record``, already checked and rendered (``saved`` as ``text``)."""
        params = _session_key(record.key)
        row = self._tx.one(_SQL["session_version"], params)
        actual = 0 if row is None else int(row[0])
        if actual != record.version:
            raise StateConflictError(record.key, record.version, actual)
        self._tx.execute(
            _SQL["upsert_session"],
            {**params, "version": saved.version, "record": text},
        )
        return saved

    def delete_session(self, key: StateKey, *, cascade: bool = False) -> bool:
        """Delete a session; `StateInUseError` while a run of it is live unless
        ``cascade`` (which deletes all its runs). False if there was no session."""
        params = _session_key(key)
        if self._tx.one(_SQL["session_version"], params) is None:
            return False
        if cascade:
            self._tx.execute(_SQL["delete_session_runs"], params)
        else:
            live = self._tx.all(_SQL["live_session_runs"], {**params, "live_states": _LIVE_STATES})
            if live:
                raise StateInUseError(key, tuple(row[0] for row in live))
        self._tx.execute(_SQL["delete_session"], params)
        return True


class SqliteStateStore:
    """A `StateStore` over a SQLite `Database`.

    Every write is one `BEGIN IMMEDIATE` transaction, so compare-and-set and patches are
    atomic across tasks and processes sharing the file. `bound(tx)` joins a wider
    transaction (see `Database.transaction`).
    """

    def __init__(
        self, database: Database, *, clock: Clock | None = None, scrub: Scrubber | None = None
    ) -> None:
        self._db = database
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._max_bytes = database.settings.max_value_bytes
        self._scrub = scrub

    async def close(self) -> None:
        """Nothing of its own to release (idempotent): the database is its owner's."""

    @property
    def database(self) -> Database:
        """The database this store lives in."""
        return self._db

    def bound(self, tx: Transaction) -> BoundSqliteStateStore:
        """This store's operations inside the open transaction ``tx``."""
        return BoundSqliteStateStore(tx, self._clock, self._max_bytes, self._scrub)

    async def get_run(self, key: StateKey) -> RunRecord | None:
        """The run at ``key``, or None."""
        _run_key(key)
        return await self._db.transaction(lambda tx: self.bound(tx).get_run(key), write=False)

    def prepared_run(self, record: RunRecord) -> tuple[RunRecord, str]:
        """``record`` checked and rendered as a write of it stores it (its stored form and
        text), for a `BoundSqliteStateStore.create_run` in a wider transaction; refused
        here as `put_run` refuses it."""
        return _prepared_run(record, self._clock.now(), self._max_bytes, self._scrub)

    async def put_run(self, record: RunRecord) -> RunRecord:
        """Compare-and-set write; raises `StateConflictError` with both versions."""
        # Checked and rendered before the transaction opens (and only then).
        saved, text = self.prepared_run(record)
        return await self._db.transaction(lambda tx: self.bound(tx)._put_run(record, saved, text))

    async def create_runs(self, records: Sequence[RunRecord]) -> list[bool]:
        """Store each record whose run does not exist yet, in one transaction."""
        now = self._clock.now()
        # Every record checked and rendered before the transaction opens.
        rendered = [
            (record, *_prepared_run(record, now, self._max_bytes, self._scrub))
            for record in create_batch(records)
        ]

        def run(tx: Transaction) -> list[bool]:
            bound = self.bound(tx)
            return [bound.create_run(*prepared) for prepared in rendered]

        return await self._db.transaction(run)

    async def patch_run(self, key: StateKey, delta: StateDelta) -> RunRecord:
        """Add ``delta``, bump the version; `StateNotFoundError` for an absent run."""
        _run_key(key)
        checked_delta(delta)  # refused before the transaction opens
        return await self._db.transaction(lambda tx: self.bound(tx)._patch_run(key, delta))

    async def delete_run(self, key: StateKey) -> bool:
        """Delete the run; False if there was none."""
        _run_key(key)
        return await self._db.transaction(lambda tx: self.bound(tx).delete_run(key))

    async def list_runs(self, query: StateQuery) -> StatePage:
        """One page of the tenant's runs in creation order; the cursor is opaque."""
        after = listing_start(query)  # refused before the transaction opens
        return await self._db.transaction(
            lambda tx: self.bound(tx)._list_runs(query, after), write=False
        )

    async def tenants(self, *, after: str | None = None, limit: int = 1000) -> list[str]:
        """Tenants with at least one run, in code point order (see `StateStore.tenants`)."""
        listing_page(after, limit)
        return await self._db.transaction(
            lambda tx: self.bound(tx).tenants(after=after, limit=limit), write=False
        )

    async def tenant_totals(
        self, tenants: Sequence[str] | None = None, *, after: str | None = None, limit: int = 100
    ) -> list[RunTotals]:
        """Run totals per tenant (see `StateStore.tenant_totals`): a row per tenant and
        state, kept by triggers on the runs table."""
        named = totals_request(tenants, after, limit)  # refused before the transaction opens
        return await self._db.transaction(
            lambda tx: self.bound(tx)._tenant_totals(named, after, limit), write=False
        )

    async def get_session(self, key: StateKey) -> SessionRecord | None:
        """The session at ``key``, or None."""
        _session_key(key)
        return await self._db.transaction(lambda tx: self.bound(tx).get_session(key), write=False)

    async def put_session(self, record: SessionRecord) -> SessionRecord:
        """Compare-and-set write of a session; raises `StateConflictError`."""
        saved, text = _prepared_session(record, self._clock.now(), self._max_bytes)
        return await self._db.transaction(
            lambda tx: self.bound(tx)._put_session(record, saved, text)
        )

    async def delete_session(self, key: StateKey, *, cascade: bool = False) -> bool:
        """Delete a session; `StateInUseError` while one of its runs is live unless
        ``cascade``. False if there was no session."""
        _session_key(key)
        return await self._db.transaction(
            lambda tx: self.bound(tx).delete_session(key, cascade=cascade)
        )


def _prepared_run(
    record: RunRecord, now: float, limit: int, scrub: Scrubber | None
) -> tuple[RunRecord, str]:
    """``record`` as stored at ``now`` (`stored_run` checks it) and its text, within
    ``limit`` bytes (`StatePersistenceError(reason="too_large")` otherwise)."""
    saved = stored_run(
        record,
        version=record.version + 1,
        updated_at=now,
        max_bytes=limit,
        store="sqlite",
        scrubber=scrub,
    )
    return saved, within_size(saved.model_dump_json(), limit, f"run {record.key}", "sqlite")


def _prepared_session(record: SessionRecord, now: float, limit: int) -> tuple[SessionRecord, str]:
    """``record`` as stored at ``now`` (`stored_session` checks it) and its text, within
    ``limit`` bytes."""
    saved = stored_session(record, version=record.version + 1, updated_at=now)
    return saved, within_size(saved.model_dump_json(), limit, f"session {record.key}", "sqlite")


__all__ = ["BoundSqliteStateStore", "SqliteStateStore"]
