"""Runs and sessions in process memory, held as encoded JSON like a real store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from durably.clock import Clock, SystemClock
from durably.errors import (
    StateConflictError,
    StateInUseError,
    StateNotFoundError,
)
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
    followed,
    followed_workflow,
    listing_start,
    patched_run,
    stored_run,
    stored_session,
)
from durably.stores.totals import RunTotals, Tally, totals_request
from durably.validation import identifier, listing_page

_Key = tuple[str, str]


@dataclass(slots=True)
class _StoredRun:
    sequence: int  # its place among its tenant's runs, assigned at first insert
    text: str
    session_id: str | None


@dataclass(slots=True)
class _Tables:
    runs: dict[_Key, _StoredRun] = field(default_factory=dict)
    sessions: dict[_Key, str] = field(default_factory=dict)
    # (tenant, session_id) -> run ids whose record names that session
    session_runs: dict[_Key, set[str]] = field(default_factory=dict)
    # tenant -> the last place handed out among its runs (the listing order and cursor, so
    # a cursor tells a tenant nothing about other tenants' runs)
    sequences: dict[str, int] = field(default_factory=dict)
    totals: Tally = field(default_factory=Tally)
    # (tenant, workflow key) -> the run id of the record following that workflow
    follows: dict[_Key, str] = field(default_factory=dict)


def _key(key: StateKey) -> _Key:
    # Re-check even a constructed key: `model_construct` skips the validators.
    return (identifier(key.tenant, "tenant"), identifier(key.id, "id"))


class MemoryStateStore:
    """A `StateStore` over dicts, for tests and single-process tools.

    Every operation reads and writes without awaiting in between, so each is atomic with
    respect to other asyncio tasks. Records are kept as JSON text: mutating a returned
    object never changes what is stored.
    """

    def __init__(self, clock: Clock | None = None, *, scrub: Scrubber | None = None) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._scrub = scrub
        self._tables = _Tables()

    # --- runs ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Nothing to release (idempotent): everything lives in this object."""

    async def get_run(self, key: StateKey) -> RunRecord | None:
        """The run at ``key``, or None."""
        stored = self._tables.runs.get(_key(key))
        return None if stored is None else RunRecord.model_validate_json(stored.text)

    async def put_run(self, record: RunRecord) -> RunRecord:
        """Compare-and-set write; raises `StateConflictError` with both versions."""
        # Refuse and render before touching the tables: a refusal must leave them as they were.
        saved = stored_run(
            record,
            version=record.version + 1,
            updated_at=self._clock.now(),
            scrubber=self._scrub,
        )
        text = saved.model_dump_json()
        key = _key(record.key)
        current = self._tables.runs.get(key)
        actual = 0 if current is None else RunRecord.model_validate_json(current.text).version
        if actual != record.version:
            raise StateConflictError(record.key, record.version, actual)
        return self._write_run(record, saved, text, current)

    async def create_runs(self, records: Sequence[RunRecord]) -> list[bool]:
        """Store each record whose run does not exist yet, at once (nothing awaited)."""
        now = self._clock.now()
        # Every record refused or rendered before the first is written.
        rendered = [
            (record, stored_run(record, version=1, updated_at=now, scrubber=self._scrub))
            for record in create_batch(records)
        ]
        created = []
        for record, saved in rendered:
            fresh = _key(record.key) not in self._tables.runs
            if fresh:
                self._write_run(record, saved, saved.model_dump_json(), None)
            created.append(fresh)
        return created

    def _write_run(
        self, record: RunRecord, saved: RunRecord, text: str, current: _StoredRun | None
    ) -> RunRecord:
        """Store ``saved`` (``record`` checked and rendered as ``text``) over ``current``."""
        key = _key(record.key)
        if current is None:
            place = self._tables.sequences.get(record.tenant, 0) + 1
            self._tables.sequences[record.tenant] = place
            current = _StoredRun(place, "", None)
            self._tables.runs[key] = current
        else:
            self._tables.totals.count(RunRecord.model_validate_json(current.text), -1)
        self._tables.totals.count(saved, 1)
        self._move_session(record.tenant, record.run_id, current.session_id, saved.session_id)
        current.text = text
        current.session_id = saved.session_id
        workflow = followed_workflow(saved)
        if workflow is not None:
            self._tables.follows[(record.tenant, workflow)] = record.run_id
        return saved

    async def patch_run(self, key: StateKey, delta: StateDelta) -> RunRecord:
        """Add ``delta`` and bump the version; `StateNotFoundError` for an absent run."""
        checked_delta(delta)
        stored = self._tables.runs.get(_key(key))
        if stored is None:
            raise StateNotFoundError(key, "run")
        record = RunRecord.model_validate_json(stored.text)
        merged = patched_run(record, delta, updated_at=self._clock.now())
        stored.text = merged.model_dump_json()
        self._tables.totals.count(record, -1)
        self._tables.totals.count(merged, 1)
        return merged

    def follow(self, tenant: str, workflow: str, state: RunState) -> None:
        """Move the run of ``tenant`` following ``workflow`` (if any) to ``state``.

        What the checkpointer calls in each status write (`durably.stores.runs.run_state`
        of the new status), without awaiting, so the two move together; a run already in
        ``state`` is left as it is (no new version).
        """
        run_id = self._tables.follows.get((tenant, workflow))
        stored = None if run_id is None else self._tables.runs.get((tenant, run_id))
        if stored is None:
            return
        record = RunRecord.model_validate_json(stored.text)
        if record.state is state or followed_workflow(record) != workflow:
            return
        moved = followed(record, state)
        stored.text = moved.model_dump_json()
        self._tables.totals.count(record, -1)
        self._tables.totals.count(moved, 1)

    async def delete_run(self, key: StateKey) -> bool:
        """Delete the run; False if there was none."""
        tenant, run_id = _key(key)
        stored = self._tables.runs.pop((tenant, run_id), None)
        if stored is None:
            return False
        self._tables.totals.count(RunRecord.model_validate_json(stored.text), -1)
        self._move_session(tenant, run_id, stored.session_id, None)
        return True

    async def list_runs(self, query: StateQuery) -> StatePage:
        """One page of the tenant's runs in creation order (see `StateStore.list_runs`)."""
        after = listing_start(query)
        tenant = query.tenant
        matches: list[tuple[int, RunRecord]] = []
        for (owner, _), stored in self._tables.runs.items():
            if owner != tenant or stored.sequence <= after:
                continue
            record = RunRecord.model_validate_json(stored.text)
            if query.state is not None and record.state != query.state:
                continue
            if query.updated_before is not None and not record.updated_at < query.updated_before:
                continue
            matches.append((stored.sequence, record))
        matches.sort(key=lambda match: match[0])
        page = matches[: query.limit]
        more = len(matches) > query.limit
        cursor = str(page[-1][0]) if more else None
        return StatePage(records=tuple(record for _, record in page), cursor=cursor)

    async def tenants(self, *, after: str | None = None, limit: int = 1000) -> list[str]:
        """Tenants with at least one run, in code point order (see `StateStore.tenants`)."""
        listing_page(after, limit)
        owners = {owner for owner, _ in self._tables.runs}
        return sorted(o for o in owners if after is None or o > after)[:limit]

    async def tenant_totals(
        self, tenants: Sequence[str] | None = None, *, after: str | None = None, limit: int = 100
    ) -> list[RunTotals]:
        """Run totals per tenant (see `StateStore.tenant_totals`)."""
        named = totals_request(tenants, after, limit)
        return self._tables.totals.read(named, after, limit)

    # --- sessions -----------------------------------------------------------------------

    async def get_session(self, key: StateKey) -> SessionRecord | None:
        """The session at ``key``, or None."""
        text = self._tables.sessions.get(_key(key))
        return None if text is None else SessionRecord.model_validate_json(text)

    async def put_session(self, record: SessionRecord) -> SessionRecord:
        """Compare-and-set write of a session; raises `StateConflictError`."""
        saved = stored_session(record, version=record.version + 1, updated_at=self._clock.now())
        text = saved.model_dump_json()
        key = _key(record.key)
        current = self._tables.sessions.get(key)
        actual = 0 if current is None else SessionRecord.model_validate_json(current).version
        if actual != record.version:
            raise StateConflictError(record.key, record.version, actual)
        self._tables.sessions[key] = text
        return saved

    async def delete_session(self, key: StateKey, *, cascade: bool = False) -> bool:
        """Delete a session; `StateInUseError` while one of its runs is live, unless
        ``cascade``, which deletes all of its runs. False if there was no session."""
        tenant, session_id = _key(key)
        if (tenant, session_id) not in self._tables.sessions:
            return False
        run_ids = self._runs_of(tenant, session_id)
        if cascade:
            for run_id in run_ids:
                gone = self._tables.runs.pop((tenant, run_id))
                self._tables.totals.count(RunRecord.model_validate_json(gone.text), -1)
            self._tables.session_runs.pop((tenant, session_id), None)
        else:
            live = tuple(
                run_id
                for run_id in run_ids
                if not RunRecord.model_validate_json(
                    self._tables.runs[(tenant, run_id)].text
                ).state.terminal
            )
            if live:
                raise StateInUseError(key, live)
        del self._tables.sessions[(tenant, session_id)]
        return True

    # --- the session index ----------------------------------------------------------------

    def _runs_of(self, tenant: str, session_id: str) -> list[str]:
        """The session's run ids in creation order."""
        run_ids = self._tables.session_runs.get((tenant, session_id), set())
        return sorted(run_ids, key=lambda run_id: self._tables.runs[(tenant, run_id)].sequence)

    def _move_session(
        self, tenant: str, run_id: str, before: str | None, after: str | None
    ) -> None:
        if before == after:
            return
        if before is not None:
            members = self._tables.session_runs.get((tenant, before))
            if members is not None:
                members.discard(run_id)
                if not members:
                    del self._tables.session_runs[(tenant, before)]
        if after is not None:
            self._tables.session_runs.setdefault((tenant, after), set()).add(run_id)


__all__ = ["MemoryStateStore"]
