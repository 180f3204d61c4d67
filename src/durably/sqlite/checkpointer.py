"""Workflow records and fenced claims in a SQLite file, timed by SQLite's own clock."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from durably.errors import Fenced, InvalidInputError
from durably.sqlite import catalog as _catalog
from durably.sqlite.changes import SqliteChanges
from durably.sqlite.connection import Database, Transaction
from durably.sqlite.gates import BoundSqliteGates
from durably.sqlite.scheduler import BoundSqliteScheduler
from durably.sqlite.statements import load_statements
from durably.stores.admission import (
    NO_CAPS,
    Admit,
    TenantCaps,
    TenantCounts,
    admit_batch,
    refuse_over,
    running_after,
)
from durably.stores.cancelling import (
    CancelAsk,
    CancelOutcome,
    Looked,
    cancel_batch,
    endable,
    look_batch,
)
from durably.stores.catalog import (
    CatalogEntry,
    Line,
    Listed,
    Mark,
    catalog_batch,
    line_read,
    tallied,
)
from durably.stores.changes import ENDED, RECORDS, RecordSelector, every_record
from durably.stores.codec import (
    CheckpointCodec,
    JsonCodec,
    decoded,
    decoded_records,
    key_text,
    screened_encode,
)
from durably.stores.gates import Admission, GateCounts, WorkflowGate
from durably.stores.retention import FINISHED, sweep_arguments
from durably.stores.runs import run_state
from durably.stores.status import (
    WorkflowInfo,
    WorkflowStatus,
    checked_report,
    int_field,
    read_status,
    text_field,
)
from durably.stores.throughput import Minute
from durably.stores.workflows import (
    INBOX_PREFIX,
    Entry,
    Pass,
    Recorded,
    Written,
    inbox_key,
    kept_prefixes,
    message_keys,
    named_keys,
    new_priority,
    refuse_finished,
    step_key,
    written_records,
)
from durably.validation import identifier, listing_page, positive, positive_int, within_size

T = TypeVar("T")

_SQL = load_statements("checkpointer.sql")
_SWEEP = load_statements("sweep.sql")
_SWEEP_BATCH = 100  # workflows per transaction: bounds how long one sweep holds the lock

SqliteEffect = Callable[[sqlite3.Cursor], object]
"""What `SqliteCheckpointer.transact` commits with a record: a synchronous callback given a
cursor in the open transaction; its return value is recorded."""


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _info(row: sqlite3.Row) -> WorkflowInfo:
    return read_status(
        row["workflow"],
        lambda: WorkflowInfo(
            workflow=text_field(row["workflow"]),
            status=WorkflowStatus(text_field(row["status"])),
            attempts=int_field(row["attempts"]),
            last_error=None if row["last_error"] is None else text_field(row["last_error"]),
            updated_at=_at(row["updated_at"]),
        ),
    )


def _check_pass(holder: Pass) -> None:
    identifier(holder.workflow, "workflow")
    if isinstance(holder.token, bool) or not isinstance(holder.token, int):
        raise InvalidInputError(f"a pass token is an int, got {holder.token!r}")


class BoundSqliteCheckpointer:
    """The checkpointer's operations inside an open `Transaction` (synchronous).

    Obtain it with `SqliteCheckpointer.bound(tx)`; `SqliteDurable` joins it with the
    scheduler's in one commit. Values are already-encoded text here.
    """

    def __init__(self, tx: Transaction, codec: CheckpointCodec) -> None:
        self._tx = tx
        self._codec = codec
        self._gates = BoundSqliteGates(tx)
        self.woke = False
        """Whether a write made a workflow a gate admitted ready (to notify after commit)."""

    def load(self, workflow: str) -> dict[str, object]:
        """Every record, decoded, in first-recorded order."""
        rows = self._tx.texts(_SQL["load"], {"workflow": workflow})
        return decoded_records(self._codec, workflow, [(row[0], row[1]) for row in rows])

    def peek(self, workflow: str, keys: list[str]) -> dict[str, object]:
        """The records under ``keys`` that exist, decoded, in the order asked."""
        rows = self._tx.texts(_SQL["peek"], {"workflow": workflow, "keys": json.dumps(keys)})
        found = {key_text(row[0]): row[1] for row in rows}
        return decoded_records(self._codec, workflow, [(k, found[k]) for k in keys if k in found])

    def look(self, workflow: str, keys: list[str]) -> tuple[WorkflowInfo | None, dict[str, object]]:
        """The status and the records under ``keys`` that exist, in one statement."""
        info: WorkflowInfo | None = None
        found: dict[str, str | bytes] = {}
        for row in self._tx.texts(_SQL["look"], {"workflow": workflow, "keys": json.dumps(keys)}):
            if row["part"] == 0:
                info = _info(row)
            else:
                found[key_text(row["key"])] = row["value"]
        rows = [(k, found[k]) for k in keys if k in found]
        return info, decoded_records(self._codec, workflow, rows)

    def look_many(
        self, workflows: list[str], keys: list[str], prefixes: tuple[str, ...]
    ) -> list[Looked]:
        """Each workflow's status and its records under ``keys`` or ``prefixes``, in one
        statement."""
        params = {
            "workflows": json.dumps(workflows),
            "keys": json.dumps(keys),
            "prefixes": json.dumps(prefixes),
        }
        infos: dict[str, WorkflowInfo] = {}
        found: dict[str, list[tuple[str | bytes, str | bytes]]] = {}
        for row in self._tx.texts(_SQL["look_many"], params):
            workflow = text_field(row["workflow"])
            if row["part"] == 0:
                infos[workflow] = _info(row)
            else:
                found.setdefault(workflow, []).append((row["key"], row["value"]))
        return [
            Looked(infos.get(w), decoded_records(self._codec, w, found.get(w, [])))
            for w in workflows
        ]

    def cancel(self, ask: CancelAsk, marker: str, reason: str) -> CancelOutcome:
        """One workflow of `SqliteCheckpointer.cancel_many` (``marker`` and ``reason``
        encoded): its marker, and its cancelled end when no pass runs it."""
        workflow = ask.workflow
        info = self.get_status(workflow)
        status = None if info is None else info.status
        if status is not None and status.finished:
            return CancelOutcome(workflow, status, first=False, ended=False)
        first = self.insert(workflow, ask.marker, marker).first
        claim = self._tx.one(_SQL["get_claim"], {"workflow": workflow})
        held = claim is not None and claim["alive_until"] > self._tx.store_now
        superseded = self._tx.one(_SQL["get_record"], {"workflow": workflow, "key": ask.superseded})
        if held or not endable(status) or superseded is not None:
            return CancelOutcome(workflow, status, first, ended=False, held=held)
        # Under a claim of its own, as one cancel's end: a lapsed pass is fenced out.
        holder = self.claim(workflow, 1.0, 1.0)
        assert holder is not None  # no live claim, under the write lock
        self.insert(workflow, ask.ended, reason)
        attempts = 0 if info is None else info.attempts
        self._write_status(workflow, WorkflowStatus.CANCELLED, attempts, ask.reason)
        self._recount(workflow, WorkflowStatus.CANCELLED.value)
        self.release(holder)
        return CancelOutcome(workflow, status, first, ended=True)

    def history(self, workflow: str) -> dict[str, Written]:
        """Every record with the time it landed, in first-recorded order."""
        rows = self._tx.texts(_SQL["history"], {"workflow": workflow})
        return written_records(
            self._codec, workflow, [(row[0], row[1], _at(row[2])) for row in rows]
        )

    def claim(self, workflow: str, budget: float, alive: float) -> Pass | None:
        """Take the workflow unless a live claim holds it."""
        now = self._tx.store_now
        row = self._tx.one(_SQL["get_claim"], {"workflow": workflow})
        if row is not None and row["alive_until"] > now:
            return None
        # A fresh claim row starts above every claim the retention sweep deleted.
        base = row["token"] if row is not None else self._tx.row(_SWEEP["swept_token"])[0]
        token = base + 1
        held_until = now + budget
        self._tx.execute(
            _SQL["take_claim"],
            {
                "workflow": workflow,
                "token": token,
                "held_until": held_until,
                "alive_until": min(now + alive, held_until),
                "alive_for": alive,
            },
        )
        return Pass(workflow, token)

    def renew(self, holder: Pass, alive: float) -> bool:
        """Push liveness out within the budget; False if superseded or spent."""
        params = {
            "workflow": holder.workflow,
            "token": holder.token,
            "now": self._tx.store_now,
            "alive": alive,
        }
        return self._tx.execute(_SQL["renew_claim"], params).rowcount > 0

    def extend(self, holder: Pass, budget: float, alive: float) -> bool:
        """Grow the budget (never shrink it) and renew; False if superseded."""
        params = {
            "workflow": holder.workflow,
            "token": holder.token,
            "now": self._tx.store_now,
            "budget": budget,
            "alive": alive,
        }
        return self._tx.execute(_SQL["extend_claim"], params).rowcount > 0

    def fence(self, holder: Pass) -> None:
        """Raise `Fenced` unless ``holder`` carries the workflow's current token."""
        row = self._tx.one(_SQL["get_claim"], {"workflow": holder.workflow})
        if row is None or row["token"] != holder.token:
            raise Fenced(holder.workflow, holder.token)

    def record(self, holder: Pass, key: str, encoded: str) -> Recorded[object]:
        """Write ``key`` once for ``holder`` (fenced) and renew its liveness."""
        self.fence(holder)
        recorded = self.insert(holder.workflow, key, encoded)
        self._touch(holder)
        return recorded

    def _touch(self, holder: Pass) -> None:
        """A successful write renews ``holder``'s liveness (never past its budget)."""
        self._tx.execute(
            _SQL["touch_claim"],
            {"workflow": holder.workflow, "token": holder.token, "now": self._tx.store_now},
        )

    def recorded(self, workflow: str, key: str) -> Recorded[object] | None:
        """The value already under ``key`` (as a losing write sees it), or None."""
        rows = self._tx.texts(_SQL["get_record"], {"workflow": workflow, "key": key})
        if not rows:
            return None
        return Recorded(decoded(self._codec, workflow, key, rows[0][0]), False)

    def insert(self, workflow: str, key: str, encoded: str) -> Recorded[object]:
        """Insert-if-absent; ``first`` if this write landed or matches the stored text."""
        params = {"workflow": workflow, "key": key, "value": encoded, "now": self._tx.store_now}
        if self._tx.execute(_SQL["insert_record"], params).rowcount > 0:
            return Recorded(self._codec.decode(encoded), True)
        stored = self._tx.texts(_SQL["get_record"], {"workflow": workflow, "key": key})[0][0]
        return Recorded(decoded(self._codec, workflow, key, stored), stored == encoded)

    def admit(
        self, workflow: str, key: str, encoded: str, *, tenant: str, caps: TenantCaps
    ) -> Recorded[object]:
        """`insert` the start record; a first one is counted under ``tenant``, or refused
        past ``caps`` (`WorkflowLimitError`, nothing written)."""
        if self.recorded(workflow, key) is None:
            refuse_over(caps, self.tenant_counts(tenant), tenant=tenant, workflow=workflow)
            params = {"workflow": workflow, "key": key, "value": encoded}
            self._tx.execute(_SQL["insert_record"], {**params, "now": self._tx.store_now})
            if self._tx.execute(_SQL["admit"], {"workflow": workflow, "tenant": tenant}).rowcount:
                self._tx.execute(_SQL["count_admitted"], {"tenant": tenant})
            return Recorded(self._codec.decode(encoded), True)
        return self.insert(workflow, key, encoded)

    def admit_gated(
        self,
        workflow: str,
        key: str,
        encoded: str,
        *,
        tenant: str,
        caps: TenantCaps,
        gate: WorkflowGate,
    ) -> Admission:
        """`admit` through ``gate``: admitted while it has room, else queued (status
        QUEUED); a start already recorded changes nothing."""
        fresh = self.recorded(workflow, key) is None
        recorded = self.admit(workflow, key, encoded, tenant=tenant, caps=caps)
        if fresh and self._gates.admit(workflow, tenant, gate, self._admitted_from_line):
            self._write_status(workflow, WorkflowStatus.QUEUED)
        return Admission(recorded, self._gates.queued(workflow))

    def gate_counts(self, gate: str) -> GateCounts:
        """Gate ``gate``'s admitted and queued workflows."""
        return self._gates.counts(gate)

    def rerank_queued(self, workflow: str, gate: str, priority: int) -> bool:
        """`SqliteCheckpointer.rerank_queued` inside this transaction."""
        return self._gates.rerank(workflow, gate, priority)

    def throttle_start(self, key: str, now: float, interval: float, burst: int) -> float:
        """Reserve a start under throttle ``key``: the earliest it may begin."""
        return self._gates.throttle(key, now, interval, burst)

    def _write_status(
        self, workflow: str, status: WorkflowStatus, attempts: int = 0, error: str | None = None
    ) -> None:
        """Store ``workflow``'s status and, in the same transaction, the state of the run
        record following it (`durably.stores.runs.FOLLOWS`) where that state changes."""
        params = {
            "workflow": workflow,
            "status": status.value,
            "attempts": attempts,
            "last_error": error,
            "now": self._tx.store_now,
        }
        self._tx.execute(_SQL["set_status"], params)
        self._tx.execute(
            _SQL["follow_run"], {"workflow": workflow, "state": run_state(status).value}
        )

    def _admitted_from_line(
        self, workflow: str, tenant: str, namespace: str, priority: int
    ) -> None:
        # Pending and ready for its kind's scheduler, in the write that freed its slot.
        self._write_status(workflow, WorkflowStatus.PENDING)
        BoundSqliteScheduler(self._tx, namespace, 0.0).make_ready(workflow, tenant, priority)
        self.woke = True

    def tenant_counts(self, tenant: str) -> TenantCounts:
        """``tenant``'s admitted workflows, running and started."""
        row = self._tx.one(_SQL["tenant_counts"], {"tenant": tenant})
        return TenantCounts() if row is None else TenantCounts(row["running"], row["started"])

    def _recount(self, workflow: str, status: str) -> None:
        """Move the running count of an admitted ``workflow`` now at ``status``."""
        running = int(running_after(status))
        self._gates.moved(workflow, not running, self._admitted_from_line)
        row = self._tx.one(_SQL["flip_running"], {"workflow": workflow, "running": running})
        if row is not None:
            delta = 1 if running else -1
            self._tx.execute(_SQL["move_running"], {"tenant": row["tenant"], "delta": delta})

    def _uncount(self, workflow: str) -> None:
        """Forget an admitted ``workflow`` deleted from the store."""
        self._gates.forget(workflow, self._admitted_from_line)
        row = self._tx.one(_SQL["unadmit"], {"workflow": workflow})
        if row is not None:
            params = {"tenant": row["tenant"], "running": row["running"]}
            self._tx.execute(_SQL["uncount"], params)

    def append(self, workflow: str, encoded: str, unless_finished: bool = False) -> Entry:
        """Add a message under the next ``inbox:`` key of ``workflow``; with
        ``unless_finished``, `WorkflowFinishedError` for a finished workflow (the status
        is read under the same write lock)."""
        if unless_finished:
            rows = self._tx.texts(_SQL["get_status"], {"workflow": workflow})
            refuse_finished(workflow, rows[0]["status"] if rows else None)
        position = self._tx.row(_SQL["next_inbox_position"], {"workflow": workflow})[0]
        key = inbox_key(position)
        self.insert(workflow, key, encoded)
        return Entry(key, self._codec.decode(encoded))

    def forget(self, holder: Pass, keys: list[str]) -> int:
        """Delete the records under ``keys`` for ``holder`` (fenced) and renew it."""
        self.fence(holder)
        params = {"workflow": holder.workflow, "keys": json.dumps(keys)}
        deleted = self._tx.execute(_SQL["forget_records"], params).rowcount
        self._touch(holder)
        return deleted

    def restart(self, holder: Pass, key: str, encoded: str, keep: tuple[str, ...]) -> int:
        """Delete every record not under a ``keep`` prefix, write ``key`` afresh and
        store the PENDING status, for ``holder`` (fenced); the number deleted."""
        self.fence(holder)
        workflow = holder.workflow
        params = {"workflow": workflow, "key": key, "keep": json.dumps(keep)}
        deleted = self._tx.execute(_SQL["restart_records"], params).rowcount
        self._tx.execute(_SQL["delete_record"], {"workflow": workflow, "key": key})
        self.insert(workflow, key, encoded)
        self._touch(holder)
        self._write_status(workflow, WorkflowStatus.PENDING)
        self._recount(workflow, WorkflowStatus.PENDING.value)
        return deleted

    def discard(self, workflow: str) -> int:
        """Delete every record and the status, and fence the holder; the count deleted."""
        params = {"workflow": workflow}
        deleted = self._tx.execute(_SQL["delete_records"], params).rowcount
        self._tx.execute(_SQL["delete_status"], params)
        _catalog.drop(self._tx, workflow)
        self._tx.execute(_SQL["fence_claim"], {**params, "now": self._tx.store_now})
        self._uncount(workflow)
        return deleted

    def sweep(self, *, before: float, limit: int) -> list[str]:
        """Delete up to ``limit`` finished workflows updated before ``before`` whose claim
        is not live (records, status, claim, inbox position); the ids swept."""
        completed, failed, cancelled = (status.value for status in FINISHED)
        chosen = self._tx.all(
            _SWEEP["finished"],
            {
                "completed": completed,
                "failed": failed,
                "cancelled": cancelled,
                "before": before,
                "now": self._tx.store_now,
                "limit": limit,
            },
        )
        for row in chosen:
            params = {"workflow": row["workflow"]}
            for name in (
                "delete_records",
                "delete_status",
                "delete_claim",
                "delete_inbox",
                "delete_catalog",
            ):
                self._tx.execute(_SWEEP[name], params)
            self._uncount(row["workflow"])
            if row["token"] is not None:
                self._tx.execute(_SWEEP["raise_swept_token"], {"token": row["token"]})
        return [row["workflow"] for row in chosen]

    def release(self, holder: Pass) -> None:
        """End ``holder``'s claim now (if it is current) without rewinding its token."""
        self._tx.execute(
            _SQL["release_claim"],
            {"workflow": holder.workflow, "token": holder.token, "now": self._tx.store_now},
        )

    def set_status(
        self, holder: Pass, status: WorkflowStatus, *, attempts: int, error: str | None
    ) -> WorkflowInfo:
        """Store the status for ``holder`` (fenced)."""
        self.fence(holder)
        self._write_status(holder.workflow, status, attempts, error)
        self._recount(holder.workflow, status.value)
        return _info(self._tx.row(_SQL["get_status"], {"workflow": holder.workflow}))

    def finish(
        self, holder: Pass, key: str, encoded: str, *, attempts: int, error: str | None
    ) -> WorkflowInfo:
        """`record` ``key`` and store the COMPLETED status for ``holder`` (fenced once)."""
        self.record(holder, key, encoded)
        self._write_status(holder.workflow, WorkflowStatus.COMPLETED, attempts, error)
        self._recount(holder.workflow, WorkflowStatus.COMPLETED.value)
        return _info(self._tx.row(_SQL["get_status"], {"workflow": holder.workflow}))

    def get_status(self, workflow: str) -> WorkflowInfo | None:
        """The last reported status, or None."""
        rows = self._tx.texts(_SQL["get_status"], {"workflow": workflow})
        return _info(rows[0]) if rows else None

    def list_status(
        self, *, status: WorkflowStatus | None, limit: int, after: str | None
    ) -> list[WorkflowInfo]:
        """Statuses in workflow-id order after ``after``."""
        params = {
            "status": None if status is None else status.value,
            "after": after,
            "limit": limit,
        }
        return [_info(row) for row in self._tx.texts(_SQL["list_status"], params)]

    def workflows(self, *, after: str | None, limit: int) -> list[str]:
        """Workflows with records or a status, in code point order."""
        rows = self._tx.all(_SQL["workflows"], {"after": after, "limit": limit})
        return [str(row[0]) for row in rows]


class SqliteCheckpointer:
    """A `Checkpointer` over a SQLite `Database`; its effects are `SqliteEffect` callbacks.

    Claims are timed by SQLite's clock (`unixepoch('subsec')`, or julianday on SQLite
    before 3.42). Values are stored as the codec's text.
    """

    def __init__(self, database: Database, *, codec: CheckpointCodec | None = None) -> None:
        self._db = database
        self._codec: CheckpointCodec = codec if codec is not None else JsonCodec()
        self._encode = screened_encode(self._codec)
        self._max_bytes = database.settings.max_value_bytes
        self._changes = SqliteChanges(database)
        self._announced: RecordSelector = every_record

    async def close(self) -> None:
        """Stop the feed of changes (idempotent): the database is its owner's."""
        await self._changes.stop()

    @property
    def changes(self) -> SqliteChanges:
        """The feed of this file's writes (`durably.stores.changes`)."""
        return self._changes

    def announce(self, workflow: str, what: str) -> None:
        """Announce a committed write of ``workflow`` to this process's waiters."""
        self._changes.announce(workflow, what)

    def announce_records(self, selected: RecordSelector) -> None:
        """Announce a record a pass writes only when ``selected`` takes its key."""
        self._announced = selected

    @property
    def codec(self) -> CheckpointCodec:
        """The codec values are stored with."""
        return self._codec

    def encode(self, value: object) -> str:
        """``value`` as the codec's text, refused before any I/O when no store could keep
        it (`InvalidInputError`, `durably.codec.screened_encode`) or it is over
        ``max_value_bytes`` (`StatePersistenceError(reason="too_large")`)."""
        return within_size(self._encode(value), self._max_bytes, "value", "sqlite")

    @property
    def database(self) -> Database:
        """The database this checkpointer lives in."""
        return self._db

    def bound(self, tx: Transaction) -> BoundSqliteCheckpointer:
        """This checkpointer's operations inside the open transaction ``tx``."""
        return BoundSqliteCheckpointer(tx, self._codec)

    async def load(self, workflow: str) -> dict[str, object]:
        """Every record, decoded, in first-recorded order; ``{}`` for an unknown workflow."""
        identifier(workflow, "workflow")
        return await self._db.transaction(lambda tx: self.bound(tx).load(workflow), write=False)

    async def peek(self, workflow: str, keys: Collection[str]) -> dict[str, object]:
        """The records under ``keys`` that exist, decoded, in the order asked (one
        indexed read)."""
        identifier(workflow, "workflow")
        wanted = named_keys(keys)
        return await self._db.transaction(
            lambda tx: self.bound(tx).peek(workflow, wanted), write=False
        )

    async def look(
        self, workflow: str, keys: Collection[str]
    ) -> tuple[WorkflowInfo | None, dict[str, object]]:
        """The status and the records under ``keys`` that exist, in one statement."""
        identifier(workflow, "workflow")
        wanted = named_keys(keys)
        return await self._db.transaction(
            lambda tx: self.bound(tx).look(workflow, wanted), write=False
        )

    async def look_many(
        self, workflows: Sequence[str], keys: Collection[str], prefixes: Collection[str] = ()
    ) -> list[Looked]:
        """Each workflow's status and its records under ``keys`` or ``prefixes``, in one
        statement."""
        checked, wanted, starts = look_batch(workflows, keys, prefixes)
        if not checked:
            return []
        return await self._db.transaction(
            lambda tx: self.bound(tx).look_many(checked, wanted, starts), write=False
        )

    async def history(self, workflow: str) -> dict[str, Written]:
        """Every record with the (UTC) time it landed, in first-recorded order."""
        identifier(workflow, "workflow")
        return await self._db.transaction(lambda tx: self.bound(tx).history(workflow), write=False)

    async def claim(self, workflow: str, budget: float, alive: float) -> Pass | None:
        """Take the workflow if no live pass holds it; None if one does."""
        identifier(workflow, "workflow")
        budget = positive(budget, "budget")
        alive = positive(alive, "alive")
        return await self._db.transaction(lambda tx: self.bound(tx).claim(workflow, budget, alive))

    async def renew(self, holder: Pass, alive: float) -> bool:
        """Push the liveness window out (never past the budget); False if superseded or
        the budget is spent."""
        _check_pass(holder)
        alive = positive(alive, "alive")
        return await self._db.transaction(lambda tx: self.bound(tx).renew(holder, alive))

    async def extend(self, holder: Pass, budget: float, alive: float) -> bool:
        """Grow the budget (never shrink it) and renew; False if superseded."""
        _check_pass(holder)
        budget = positive(budget, "budget")
        alive = positive(alive, "alive")
        return await self._db.transaction(lambda tx: self.bound(tx).extend(holder, budget, alive))

    async def record(self, holder: Pass, key: str, value: object) -> Recorded[object]:
        """Write ``key`` once (first writer wins); raises `Fenced` if ``holder`` was
        superseded, writing nothing."""
        _check_pass(holder)
        step_key(key)
        encoded = self.encode(value)
        recorded = await self._db.transaction(
            lambda tx: self.bound(tx).record(holder, key, encoded)
        )
        if self._announced(key):
            self.announce(holder.workflow, RECORDS)
        return recorded

    async def transact(self, holder: Pass, key: str, effect: SqliteEffect) -> Recorded[object]:
        """Run ``effect`` and record its value in one commit, exactly once across passes.

        A recorded key returns without running the effect; a superseded pass gets `Fenced`
        before it runs; an effect that raises leaves neither its writes nor a record, and
        its exception is re-raised.
        """
        _check_pass(holder)
        step_key(key)

        def run(tx: Transaction) -> Recorded[object]:
            bound = self.bound(tx)
            done = bound.recorded(holder.workflow, key)
            if done is not None:
                return done
            bound.fence(holder)
            value = effect(tx.cursor())
            tx.ensure_open()
            return bound.record(holder, key, self.encode(value))

        recorded = await self._db.transaction(run)
        if self._announced(key):
            self.announce(holder.workflow, RECORDS)
        return recorded

    async def supply(self, workflow: str, key: str, value: object) -> Recorded[object]:
        """First-writer-wins write from outside any pass; takes no claim."""
        identifier(workflow, "workflow")
        step_key(key)
        encoded = self.encode(value)
        recorded = await self._db.transaction(
            lambda tx: self.bound(tx).insert(workflow, key, encoded)
        )
        self.announce(workflow, RECORDS)
        return recorded

    async def admit(
        self, workflow: str, key: str, value: object, *, tenant: str, caps: TenantCaps
    ) -> Recorded[object]:
        """`supply` the start record and count a first one under ``tenant``, in one
        transaction; `WorkflowLimitError` (writing nothing) past ``caps``."""
        identifier(workflow, "workflow")
        identifier(tenant, "tenant")
        step_key(key)
        encoded = self.encode(value)
        return await self._db.transaction(
            lambda tx: self.bound(tx).admit(workflow, key, encoded, tenant=tenant, caps=caps)
        )

    async def admit_many(self, admits: Sequence[Admit]) -> list[Recorded[object]]:
        """`admit` each start without caps, in one transaction."""
        batch = admit_batch(admits)
        encoded = [self.encode(admit.value) for admit in batch]  # refused before the write

        def run(tx: Transaction) -> list[Recorded[object]]:
            bound = self.bound(tx)
            return [
                bound.admit(a.workflow, a.key, text, tenant=a.tenant, caps=NO_CAPS)
                for a, text in zip(batch, encoded, strict=True)
            ]

        recorded = await self._db.transaction(run)
        for admit in batch:
            self.announce(admit.workflow, RECORDS)
        return recorded

    async def admit_gated(
        self,
        workflow: str,
        key: str,
        value: object,
        *,
        tenant: str,
        caps: TenantCaps,
        gate: WorkflowGate,
    ) -> Admission:
        """`admit` through ``gate``, in one transaction: admitted while it has room, else
        queued (status QUEUED) in the gate's line."""
        identifier(workflow, "workflow")
        identifier(tenant, "tenant")
        step_key(key)
        encoded = self.encode(value)
        return await self._db.transaction(
            lambda tx: self.bound(tx).admit_gated(
                workflow, key, encoded, tenant=tenant, caps=caps, gate=gate
            )
        )

    async def gate_counts(self, gate: str) -> GateCounts:
        """Gate ``gate``'s admitted and queued workflows."""
        identifier(gate, "gate")
        return await self._db.transaction(lambda tx: self.bound(tx).gate_counts(gate), write=False)

    async def rerank_queued(self, workflow: str, gate: str, priority: int) -> bool:
        """Give ``workflow``, queued in gate ``gate``'s line, ``priority``'s place there;
        False when it is not queued there."""
        identifier(workflow, "workflow")
        identifier(gate, "gate")
        rank = new_priority(priority)
        return await self._db.transaction(
            lambda tx: self.bound(tx).rerank_queued(workflow, gate, rank)
        )

    async def repair_gates(self, *, limit: int = 500) -> int:
        """Nothing to repair: the write that frees a slot admits the next itself."""
        positive_int(limit, "limit")
        return 0

    async def throttle_start(self, key: str, now: float, interval: float, burst: int) -> float:
        """Reserve a start under throttle ``key``, in one transaction: the earliest it may
        begin."""
        identifier(key, "key")
        return await self._db.transaction(
            lambda tx: self.bound(tx).throttle_start(key, now, interval, burst)
        )

    async def _moving(self, write: Callable[[BoundSqliteCheckpointer], T]) -> T:
        """``write`` in one transaction, waking this process's schedulers after the commit
        when it made a workflow a gate admitted ready."""
        woke: list[bool] = []

        def run(tx: Transaction) -> T:
            bound = self.bound(tx)
            done = write(bound)
            woke.append(bound.woke)  # of the last try, the one committed
            return done

        done = await self._db.transaction(run)
        if woke and woke[-1]:
            self._db.notify_ready()
        return done

    async def tenant_counts(self, tenant: str) -> TenantCounts:
        """``tenant``'s admitted workflows, running and started."""
        identifier(tenant, "tenant")
        return await self._db.transaction(
            lambda tx: self.bound(tx).tenant_counts(tenant), write=False
        )

    async def append(self, workflow: str, value: object, *, unless_finished: bool = False) -> Entry:
        """Add a message under the next ``inbox:`` key (append order, also concurrently);
        with ``unless_finished``, `WorkflowFinishedError` for a finished workflow, in the
        same transaction."""
        identifier(workflow, "workflow")
        encoded = self.encode(value)
        entry = await self._db.transaction(
            lambda tx: self.bound(tx).append(workflow, encoded, unless_finished)
        )
        self.announce(workflow, RECORDS)
        return entry

    async def forget(self, holder: Pass, keys: Collection[str]) -> int:
        """Delete the messages under ``keys`` for ``holder`` in one transaction; the
        number deleted. `Fenced` if ``holder`` was superseded."""
        _check_pass(holder)
        doomed = message_keys(keys)
        return await self._db.transaction(lambda tx: self.bound(tx).forget(holder, doomed))

    async def restart(
        self,
        holder: Pass,
        key: str,
        value: object,
        *,
        keep: Collection[str] = (INBOX_PREFIX,),
    ) -> int:
        """Delete every record not under a ``keep`` prefix, write ``key`` afresh and
        report PENDING, in one transaction; the number deleted. `Fenced` if ``holder``
        was superseded."""
        _check_pass(holder)
        step_key(key)
        prefixes = kept_prefixes(keep)
        encoded = self.encode(value)
        return await self._moving(lambda bound: bound.restart(holder, key, encoded, prefixes))

    async def discard(self, workflow: str) -> int:
        """Delete every record and the status and fence the holder, atomically; the count."""
        identifier(workflow, "workflow")
        deleted = await self._moving(lambda bound: bound.discard(workflow))
        self.announce(workflow, ENDED)
        return deleted

    async def cancel_many(self, asks: Sequence[CancelAsk]) -> list[CancelOutcome]:
        """Cancel each workflow of ``asks`` (`durably.stores.cancelling`), in one
        transaction."""
        batch = cancel_batch(asks)
        encoded = [(self.encode(ask.value), self.encode(ask.reason)) for ask in batch]
        outcomes = await self._moving(
            lambda bound: [
                bound.cancel(ask, *texts) for ask, texts in zip(batch, encoded, strict=True)
            ]
        )
        for outcome in outcomes:
            if outcome.first:
                self.announce(outcome.workflow, RECORDS)
            if outcome.ended:
                self.announce(outcome.workflow, ENDED)
        return outcomes

    async def sweep(
        self,
        *,
        finished_before: datetime,
        limit: int = 1000,
        on_swept: Callable[[str], Awaitable[None]] | None = None,
    ) -> int:
        """Delete up to ``limit`` finished workflows older than ``finished_before`` whose
        claim is not live (records, status, claim), in transactions of up to 100 workflows;
        the number swept. A fresh claim afterwards outranks every deleted token."""
        sweep_arguments(finished_before, limit)
        before = finished_before.timestamp()
        swept = 0
        while swept < limit:
            batch = min(_SWEEP_BATCH, limit - swept)
            workflows = await self._db.transaction(
                functools.partial(self._sweep_in, before=before, limit=batch)
            )
            swept += len(workflows)
            if on_swept is not None:
                for workflow in workflows:
                    await on_swept(workflow)
            if len(workflows) < batch:
                break
        return swept

    def _sweep_in(self, tx: Transaction, *, before: float, limit: int) -> list[str]:
        return self.bound(tx).sweep(before=before, limit=limit)

    async def release(self, holder: Pass) -> None:
        """End ``holder``'s claim now without rewinding its token."""
        _check_pass(holder)
        await self._db.transaction(lambda tx: self.bound(tx).release(holder))

    async def set_status(
        self,
        holder: Pass,
        status: WorkflowStatus,
        *,
        attempts: int = 0,
        error: str | None = None,
    ) -> WorkflowInfo:
        """Report the workflow's status; `Fenced` if ``holder`` was superseded."""
        _check_pass(holder)
        status, error = checked_report(status, attempts, error)
        info = await self._moving(
            lambda bound: bound.set_status(holder, status, attempts=attempts, error=error)
        )
        if status.finished:
            self.announce(holder.workflow, ENDED)
        return info

    async def finish(
        self,
        holder: Pass,
        key: str,
        value: object,
        *,
        attempts: int = 0,
        error: str | None = None,
    ) -> WorkflowInfo:
        """`record` ``key`` and report COMPLETED in one transaction; `Fenced` (writing
        neither) if ``holder`` was superseded."""
        _check_pass(holder)
        step_key(key)
        encoded = self.encode(value)
        _, error = checked_report(WorkflowStatus.COMPLETED, attempts, error)
        info = await self._moving(
            lambda bound: bound.finish(holder, key, encoded, attempts=attempts, error=error)
        )
        self.announce(holder.workflow, ENDED)
        return info

    async def get_status(self, workflow: str) -> WorkflowInfo | None:
        """The last reported status, or None (never reported, or discarded)."""
        identifier(workflow, "workflow")
        return await self._db.transaction(
            lambda tx: self.bound(tx).get_status(workflow), write=False
        )

    async def list_status(
        self, *, status: WorkflowStatus | None = None, limit: int = 50, after: str | None = None
    ) -> list[WorkflowInfo]:
        """Statuses ordered by workflow id (code points), those after ``after``."""
        positive_int(limit, "limit")
        if after is not None:
            identifier(after, "after")
        wanted = None if status is None else WorkflowStatus(status)
        return await self._db.transaction(
            lambda tx: self.bound(tx).list_status(status=wanted, limit=limit, after=after),
            write=False,
        )

    async def workflows(self, *, after: str | None = None, limit: int = 1000) -> list[str]:
        """Workflows with records or a status, in code point order (see
        `Checkpointer.workflows`)."""
        listing_page(after, limit)
        return await self._db.transaction(
            lambda tx: self.bound(tx).workflows(after=after, limit=limit), write=False
        )

    async def catalog(self, workflow: str, entry: CatalogEntry) -> None:
        """Enter ``workflow`` in the catalog (an entry already there is kept)."""
        identifier(workflow, "workflow")
        await self._db.transaction(lambda tx: _catalog.enter(tx, workflow, entry))

    async def catalog_many(self, entries: Sequence[tuple[str, CatalogEntry]]) -> None:
        """Enter each (workflow, entry) in the catalog in one transaction (an entry
        already there is kept)."""
        batch = catalog_batch(entries)
        await self._db.transaction(lambda tx: _catalog.enter_many(tx, batch))

    async def listed(
        self, line: Line, *, before: Mark | None = None, since_us: int = 0, limit: int = 100
    ) -> list[Listed]:
        """Up to ``limit`` workflows of ``line`` before ``before``, newest first: one
        index range."""
        line_read(line, since_us, limit)
        return await self._db.transaction(
            lambda tx: _catalog.listed(tx, line, before, since_us, limit), write=False
        )

    async def finished_per_minute(self) -> dict[str, list[Minute]]:
        """Catalogued workflows of each kind completed and failed in each of the last
        minutes, oldest first: the ring the status triggers keep (schema.sql)."""
        return await self._db.transaction(_catalog.finished_per_minute, write=False)

    async def repair_catalog(self, *, limit: int = 500) -> int:
        """Nothing to repair: the status write keeps the catalog itself."""
        positive_int(limit, "limit")
        return 0

    async def tally(self, tenant: str | None = None) -> dict[tuple[str, WorkflowStatus], int]:
        """How many catalogued workflows each (kind, status) pair has (exact)."""
        if tenant is not None:
            identifier(tenant, "tenant")
        return tallied(
            await self._db.transaction(lambda tx: _catalog.tally(tx, tenant), write=False)
        )


__all__ = ["BoundSqliteCheckpointer", "SqliteCheckpointer", "SqliteEffect"]
