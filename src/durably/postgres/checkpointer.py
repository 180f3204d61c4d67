"""`PostgresCheckpointer`: workflow records (jsonb) and fenced claims on the server's clock."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import Any, Self, TypeVar

from durably.errors import (
    ConfigurationError,
    Fenced,
    InvalidInputError,
    StatePersistenceError,
)
from durably.postgres import statements
from durably.postgres.catalog import PostgresCatalog
from durably.postgres.changes import PostgresChanges
from durably.postgres.connection import Access
from durably.postgres.executor import Row, Session
from durably.postgres.failures import EffectFailed, RetryBudget, state_errors
from durably.postgres.gates import PostgresGates
from durably.postgres.jsonb import jsonb_text
from durably.postgres.migrate import verify
from durably.postgres.schema import StateTables
from durably.postgres.settings import PostgresStoreSettings
from durably.postgres.sweep import sweep_finished
from durably.stores.admission import (
    NO_CAPS,
    Admit,
    TenantCaps,
    TenantCounts,
    admit_batch,
    refuse_over,
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
from durably.stores.changes import RecordSelector, every_record
from durably.stores.codec import (
    CheckpointCodec,
    JsonCodec,
    decoded,
    decoded_records,
    renders_json,
    screened_encode,
)
from durably.stores.gates import Admission, GateCounts, WorkflowGate
from durably.stores.retention import FINISHED
from durably.stores.runs import run_state
from durably.stores.settings import DEFAULT_MAX_VALUE_BYTES
from durably.stores.status import WorkflowInfo, WorkflowStatus, checked_report, read_status
from durably.stores.throughput import Minute
from durably.stores.workflows import INBOX_DIGITS as _DIGITS
from durably.stores.workflows import (
    INBOX_PREFIX,
    Entry,
    Pass,
    Recorded,
    Written,
    kept_prefixes,
    message_keys,
    named_keys,
    new_priority,
    refuse_finished,
    step_key,
    written_records,
)
from durably.validation import identifier, listing_page, positive, positive_int, within_size

PostgresEffect = Callable[[Any], Awaitable[object]]
"""A `transact` effect: an async callback given the open transaction's cursor (psycopg
``AsyncCursor``) or connection (asyncpg), returning the step's value."""

T = TypeVar("T")
_TEMPLATES = statements.load("checkpointer.sql")
_FINISHED = [status.value for status in FINISHED]


class _HandBack(Exception):
    """Leaves a transaction by rolling it back while still answering with ``recorded``."""

    def __init__(self, recorded: Recorded[object]) -> None:
        super().__init__("hand back")
        self.recorded = recorded


class PostgresCheckpointer:
    """Workflow records and claims in PostgreSQL (`durably.stores.Checkpointer`).

    Values are stored as ``jsonb``, so the codec must render JSON text
    (`ConfigurationError` otherwise), and text ``jsonb`` cannot hold (a NUL or a lone
    surrogate, raw or escaped) is refused with `InvalidInputError` before it is sent.
    """

    def __init__(
        self,
        pool: Any,
        *,
        codec: CheckpointCodec | None = None,
        settings: PostgresStoreSettings | None = None,
        tables: StateTables | None = None,
    ) -> None:
        self._codec = codec or JsonCodec()
        if not renders_json(self._codec):
            raise ConfigurationError(
                f"{type(self._codec).__name__} does not render JSON text, but PostgreSQL "
                "stores checkpoint values as jsonb; use a codec with renders_json = True"
            )
        self._screened = screened_encode(self._codec)
        self._tables = tables or StateTables()
        self._max_bytes = settings.max_value_bytes if settings else DEFAULT_MAX_VALUE_BYTES
        self._access = Access.over(pool, settings.retry if settings else RetryBudget())
        self._sql = statements.render_all(_TEMPLATES, self._tables.names)
        self._catalog = PostgresCatalog(self._tables.names)
        self._channel = self._tables.channel("changes")
        self._gates = PostgresGates(self._tables)
        self._changes = PostgresChanges(self._access.database, self._channel)
        self._announced: RecordSelector = every_record

    async def close(self) -> None:
        """Stop the feed of changes and its listening connection (idempotent); the pool is
        its owner's."""
        await self._changes.stop()

    @property
    def changes(self) -> PostgresChanges:
        """The feed of this database's writes (`durably.stores.changes`), LISTENing on one
        connection outside the pool once started."""
        return self._changes

    def announce_records(self, selected: RecordSelector) -> None:
        """Announce a record a pass writes only when ``selected`` takes its key."""
        self._announced = selected

    def _told(self, key: str) -> str:
        """The channel a pass's record under ``key`` is announced on ('' for none)."""
        return self._channel if self._announced(key) else ""

    @classmethod
    async def open(
        cls,
        pool: Any,
        *,
        codec: CheckpointCodec | None = None,
        settings: PostgresStoreSettings | None = None,
        tables: StateTables | None = None,
    ) -> Self:
        """A checkpointer after `verify` accepted the database."""
        await verify(pool, tables, durable=settings.durable if settings else True)
        return cls(pool, codec=codec, settings=settings, tables=tables)

    @property
    def codec(self) -> CheckpointCodec:
        return self._codec

    @property
    def access(self) -> Access:
        """How this store reaches its database (shared with `PostgresDurable`)."""
        return self._access

    @property
    def tables(self) -> StateTables:
        """The tables this store writes (a `PostgresDurable` writes across them)."""
        return self._tables

    # --- reading --------------------------------------------------------------------------

    async def load(self, workflow: str) -> dict[str, object]:
        identifier(workflow, "workflow")
        rows = await self._run(lambda s: s.fetch(self._sql["load"], workflow))
        return decoded_records(self._codec, workflow, [(key, text) for key, text, _ in rows])

    async def peek(self, workflow: str, keys: Collection[str]) -> dict[str, object]:
        identifier(workflow, "workflow")
        wanted = named_keys(keys)
        rows = await self._run(lambda s: s.fetch(self._sql["peek_records"], workflow, wanted))
        found = {str(key): text for key, text in rows}
        return decoded_records(self._codec, workflow, [(k, found[k]) for k in wanted if k in found])

    async def look(
        self, workflow: str, keys: Collection[str]
    ) -> tuple[WorkflowInfo | None, dict[str, object]]:
        identifier(workflow, "workflow")
        wanted = named_keys(keys)
        rows = await self._run(lambda s: s.fetch(self._sql["look"], workflow, wanted))
        info = next((_info(row[1:6]) for row in rows if row[0]), None)
        found = {str(row[6]): row[7] for row in rows if not row[0]}
        records = [(k, found[k]) for k in wanted if k in found]
        return info, decoded_records(self._codec, workflow, records)

    async def look_many(
        self, workflows: Sequence[str], keys: Collection[str], prefixes: Collection[str] = ()
    ) -> list[Looked]:
        """Each workflow's status and its records under ``keys`` or ``prefixes``, in one
        statement."""
        checked, wanted, starts = look_batch(workflows, keys, prefixes)
        if not checked:
            return []
        rows = await self._run(
            lambda s: s.fetch(self._sql["look_many"], checked, wanted, list(starts))
        )
        infos: dict[str, WorkflowInfo] = {}
        found: dict[str, list[tuple[str, str]]] = {}
        for row in rows:
            workflow = str(row[1])
            if row[0]:
                infos[workflow] = _info(row[1:6])
            else:
                found.setdefault(workflow, []).append((str(row[6]), row[7]))
        return [
            Looked(infos.get(w), decoded_records(self._codec, w, found.get(w, []))) for w in checked
        ]

    async def history(self, workflow: str) -> dict[str, Written]:
        identifier(workflow, "workflow")
        rows = await self._run(lambda s: s.fetch(self._sql["load"], workflow))
        return written_records(
            self._codec, workflow, [(key, text, _utc(at)) for key, text, at in rows]
        )

    # --- claims ---------------------------------------------------------------------------

    async def claim(self, workflow: str, budget: float, alive: float) -> Pass | None:
        identifier(workflow, "workflow")
        budget = positive(budget, "budget")
        alive = positive(alive, "alive")
        rows = await self._run(lambda s: s.fetch(self._sql["claim"], workflow, budget, alive))
        return Pass(workflow, int(rows[0][0])) if rows else None

    async def renew(self, holder: Pass, alive: float) -> bool:
        identifier(holder.workflow, "workflow")
        alive = positive(alive, "alive")
        rows = await self._run(
            lambda s: s.fetch(self._sql["renew"], holder.workflow, holder.token, alive)
        )
        return bool(rows)

    async def extend(self, holder: Pass, budget: float, alive: float) -> bool:
        identifier(holder.workflow, "workflow")
        budget = positive(budget, "budget")
        alive = positive(alive, "alive")
        rows = await self._run(
            lambda s: s.fetch(self._sql["extend"], holder.workflow, holder.token, budget, alive)
        )
        return bool(rows)

    async def release(self, holder: Pass) -> None:
        identifier(holder.workflow, "workflow")
        await self._run(lambda s: s.fetch(self._sql["release"], holder.workflow, holder.token))

    # --- writing --------------------------------------------------------------------------

    async def record(self, holder: Pass, key: str, value: object) -> Recorded[object]:
        workflow = identifier(holder.workflow, "workflow")
        step_key(key)
        encoded = self._encode(value)
        return await self._access.run(
            self._record_on, holder, workflow, key, encoded, errors=state_errors
        )

    async def _record_on(
        self, session: Session, holder: Pass, workflow: str, key: str, encoded: str
    ) -> Recorded[object]:
        if await session.count(
            self._sql["record"], workflow, holder.token, key, encoded, self._told(key)
        ):
            return Recorded(self._codec.decode(encoded), True)
        if await self._write_counted(session, holder, key, encoded):
            return Recorded(self._codec.decode(encoded), True)
        return await self._stored(session, workflow, key, encoded)

    async def transact(self, holder: Pass, key: str, effect: PostgresEffect) -> Recorded[object]:
        """Run ``effect`` and record its value in one commit, exactly once across passes.

        A recorded key returns without running; a superseded pass raises `Fenced` before
        the effect (and after it, rolling it back, if superseded meanwhile); a failing
        effect leaves neither and its exception is re-raised. A value recorded under
        ``key`` while the effect ran (supplied, or by a racing transact, equal or not) is
        handed back (``first=False``) and the effect is rolled back; an effect that writes
        its own step row raises `InvalidInputError`.
        """
        identifier(holder.workflow, "workflow")
        step_key(key)

        async def run(session: Session) -> Recorded[object]:
            try:
                async with session.transaction():
                    return await self._transact_on(session, holder, key, effect)
            except _HandBack as back:
                return back.recorded

        return await self._run(run)

    async def _transact_on(
        self, session: Session, holder: Pass, key: str, effect: PostgresEffect
    ) -> Recorded[object]:
        workflow = holder.workflow
        token, existing = (await session.fetch(self._sql["peek"], workflow, key))[0]
        if existing is not None:
            return Recorded(decoded(self._codec, workflow, key, existing), False)
        if token is None or int(token) != holder.token:
            raise Fenced(workflow, holder.token)
        async with session.effect_handle() as handle:
            try:
                value = await effect(handle)
            except Exception as error:
                raise EffectFailed(error) from error
        encoded = self._encode(value)
        if await self._write_counted(session, holder, key, encoded):
            return Recorded(self._codec.decode(encoded), True)
        stored = await session.fetch(self._sql["stored"], workflow, key, encoded)
        text, _, mine = stored[0]
        if mine:
            raise InvalidInputError(
                f"the effect for step {key!r} wrote the step's own checkpoint row; "
                "transact records the effect's return value itself"
            )
        # Recorded meanwhile (a value supplied, or a racing transact of this key): the step
        # belongs to that write, so this effect must not commit beside it, even when the
        # values are equal (two committed effects); like a key found recorded, no win.
        raise _HandBack(Recorded(decoded(self._codec, workflow, key, text), False))

    async def _write_counted(self, session: Session, holder: Pass, key: str, encoded: str) -> bool:
        """Fence, renew and insert (`record_counted`): True when written, False when the
        key was already recorded; `Fenced` when ``holder`` no longer holds the workflow."""
        fenced_ok, written = (
            await session.fetch(
                self._sql["record_counted"],
                holder.workflow,
                holder.token,
                key,
                encoded,
                self._told(key),
            )
        )[0]
        if not fenced_ok:
            raise Fenced(holder.workflow, holder.token)
        return bool(written)

    async def supply(self, workflow: str, key: str, value: object) -> Recorded[object]:
        identifier(workflow, "workflow")
        step_key(key)
        encoded = self._encode(value)
        return await self._run(lambda s: self.supply_on(s, workflow, key, encoded))

    async def supply_on(
        self, session: Session, workflow: str, key: str, encoded: str
    ) -> Recorded[object]:
        """`supply` of an encoded value on ``session`` (for `PostgresDurable`)."""
        if await session.count(self._sql["supply"], workflow, key, encoded, self._channel):
            return Recorded(self._codec.decode(encoded), True)
        return await self._stored(session, workflow, key, encoded)

    async def admit(
        self, workflow: str, key: str, value: object, *, tenant: str, caps: TenantCaps
    ) -> Recorded[object]:
        """`supply` the start record and count a first one under ``tenant``, in one
        transaction that holds the tenant's first counts shard; `WorkflowLimitError` (rolled
        back, nothing written) past ``caps``."""
        identifier(workflow, "workflow")
        identifier(tenant, "tenant")
        step_key(key)
        encoded = self._encode(value)
        if not caps.capped:
            return await self._run(
                lambda s: self._admit_uncapped(s, workflow, key, encoded, tenant)
            )

        async def run(session: Session) -> Recorded[object]:
            return (await self.admit_on(session, workflow, key, encoded, tenant, caps))[0]

        return await self._access.run(run, errors=state_errors, transaction=True)

    async def admit_many(self, admits: Sequence[Admit]) -> list[Recorded[object]]:
        """`admit` each start without caps, in one statement (the stored record of each
        one found there read back in the same transaction)."""
        batch = admit_batch(admits)
        if not batch:
            return []
        encoded = [self._encode(admit.value) for admit in batch]  # refused before any I/O

        async def run(session: Session) -> list[Recorded[object]]:
            rows = await session.fetch(
                self._sql["admit_many"],
                [admit.workflow for admit in batch],
                [admit.key for admit in batch],
                encoded,
                [admit.tenant for admit in batch],
            )
            written = {str(row[0]) for row in rows}
            recorded: list[Recorded[object]] = []
            for admit, text in zip(batch, encoded, strict=True):
                if admit.workflow in written:
                    recorded.append(Recorded(self._codec.decode(text), True))
                else:
                    recorded.append(await self._stored(session, admit.workflow, admit.key, text))
            return recorded

        return await self._access.run(run, errors=state_errors, transaction=True)

    async def admit_on(
        self,
        session: Session,
        workflow: str,
        key: str,
        encoded: str,
        tenant: str,
        caps: TenantCaps,
    ) -> tuple[Recorded[object], bool]:
        """`admit` on ``session``, inside a transaction the caller opened (as
        `PostgresDurable` does); the record and whether this call wrote it."""
        if not caps.capped:
            written = await session.fetch(
                self._sql["admit_uncapped"], workflow, key, encoded, tenant
            )
            if int(written[0][0]):
                return Recorded(self._codec.decode(encoded), True), True
            return await self._stored(session, workflow, key, encoded), False
        await session.fetch(self._sql["lock_counts"], tenant)
        if not await session.count(self._sql["supply"], workflow, key, encoded, self._channel):
            return await self._stored(session, workflow, key, encoded), False
        # Read after the lock, so the counts include the previous turn's commit.
        running, started = (await session.fetch(self._sql["tenant_counts"], tenant))[0]
        counts = TenantCounts(int(running), int(started))
        refuse_over(caps, counts, tenant=tenant, workflow=workflow)  # rolls back
        await session.fetch(self._sql["admit"], workflow, tenant)
        return Recorded(self._codec.decode(encoded), True), True

    async def _admit_uncapped(
        self, session: Session, workflow: str, key: str, encoded: str, tenant: str
    ) -> Recorded[object]:
        return (await self.admit_on(session, workflow, key, encoded, tenant, NO_CAPS))[0]

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
        """`admit` through ``gate``, in one transaction that holds the gate's row:
        admitted while it has room, else queued (status QUEUED) in the gate's line."""
        identifier(workflow, "workflow")
        identifier(tenant, "tenant")
        step_key(key)
        encoded = self._encode(value)

        async def run(session: Session) -> Admission:
            recorded, wrote = await self.admit_on(session, workflow, key, encoded, tenant, caps)
            if wrote:
                queued = await self._gates.admit(session, workflow, tenant, gate)
            else:
                queued = await self._gates.queued(session, workflow)
            return Admission(recorded, queued)

        return await self._access.run(run, errors=state_errors, transaction=True)

    async def gate_counts(self, gate: str) -> GateCounts:
        """Gate ``gate``'s admitted and queued workflows."""
        identifier(gate, "gate")
        return await self._run(lambda s: self._gates.counts(s, gate))

    async def rerank_queued(self, workflow: str, gate: str, priority: int) -> bool:
        """Give ``workflow``, queued in gate ``gate``'s line, ``priority``'s place there,
        in one transaction that holds the gate's row; False when it is not queued there."""
        identifier(workflow, "workflow")
        identifier(gate, "gate")
        rank = new_priority(priority)

        async def run(session: Session) -> bool:
            return await self._gates.rerank(session, workflow, gate, rank)

        return await self._access.run(run, errors=state_errors, transaction=True)

    async def repair_gates(self, *, limit: int = 500) -> int:
        """Nothing to repair: the write that frees a slot admits the next itself."""
        positive_int(limit, "limit")
        return 0

    async def throttle_start(self, key: str, now: float, interval: float, burst: int) -> float:
        """Reserve a start under throttle ``key``, in one transaction that holds its row:
        the earliest it may begin."""
        identifier(key, "key")

        async def run(session: Session) -> float:
            return await self._gates.throttle(session, key, now, interval, burst)

        return await self._access.run(run, errors=state_errors, transaction=True)

    async def tenant_counts(self, tenant: str) -> TenantCounts:
        """``tenant``'s admitted workflows, running and started."""
        identifier(tenant, "tenant")
        rows = await self._run(lambda s: s.fetch(self._sql["tenant_counts"], tenant))
        return TenantCounts(int(rows[0][0]), int(rows[0][1])) if rows else TenantCounts()

    async def append(self, workflow: str, value: object, *, unless_finished: bool = False) -> Entry:
        identifier(workflow, "workflow")
        encoded = self._encode(value)

        async def run(session: Session) -> Entry:
            return await self.append_on(session, workflow, encoded, unless_finished)

        # Unless finished: two statements (the inbox lock, then the append) in one
        # transaction, which holds the lock to the commit.
        return await self._access.run(run, errors=state_errors, transaction=unless_finished)

    async def append_on(
        self, session: Session, workflow: str, encoded: str, unless_finished: bool = False
    ) -> Entry:
        """`append` of an encoded value on ``session`` (for `PostgresDurable`); with
        ``unless_finished``, inside a transaction the caller opened."""
        if unless_finished:
            await session.fetch(self._sql["inbox_turn"], workflow)
            key, ended, _ = (
                await session.fetch(
                    self._sql["append_unless_finished"],
                    workflow,
                    INBOX_PREFIX,
                    _DIGITS,
                    encoded,
                    _FINISHED,
                    self._channel,
                )
            )[0]
            refuse_finished(workflow, None if ended is None else str(ended))
            return Entry(str(key), self._codec.decode(encoded))
        rows = await session.fetch(
            self._sql["append"], workflow, INBOX_PREFIX, _DIGITS, encoded, self._channel
        )
        return Entry(str(rows[0][0]), self._codec.decode(encoded))

    async def forget(self, holder: Pass, keys: Collection[str]) -> int:
        workflow = identifier(holder.workflow, "workflow")
        doomed = message_keys(keys)
        rows = await self._run(
            lambda s: s.fetch(self._sql["forget"], workflow, holder.token, doomed)
        )
        return self._fenced_count(holder, rows)

    async def restart(
        self,
        holder: Pass,
        key: str,
        value: object,
        *,
        keep: Collection[str] = (INBOX_PREFIX,),
    ) -> int:
        """Delete every record not under a ``keep`` prefix, write ``key`` afresh and
        report PENDING, in one statement; `Fenced` (changing nothing) if superseded."""
        workflow = identifier(holder.workflow, "workflow")
        step_key(key)
        prefixes = list(kept_prefixes(keep))
        encoded = self._encode(value)
        pending = WorkflowStatus.PENDING.value
        rows = await self._run(
            lambda s: s.fetch(
                self._sql["restart"],
                workflow,
                holder.token,
                key,
                encoded,
                prefixes,
                pending,
                run_state(WorkflowStatus.PENDING).value,
            )
        )
        return self._fenced_count(holder, rows)

    @staticmethod
    def _fenced_count(holder: Pass, rows: Any) -> int:
        """The count a fenced statement answers with ``(fenced?, count)``; `Fenced` when
        ``holder`` no longer holds the workflow."""
        fenced_ok, count = rows[0]
        if not fenced_ok:
            raise Fenced(holder.workflow, holder.token)
        return int(count)

    async def discard(self, workflow: str) -> int:
        identifier(workflow, "workflow")

        async def run(session: Session) -> int:
            return await self.discard_on(session, workflow)

        return await self._access.run(run, errors=state_errors, transaction=True)

    async def discard_on(self, session: Session, workflow: str) -> int:
        """`discard` on ``session``, inside a transaction the caller opened."""
        # Fence first: the claim row lock makes a concurrent record wait, then refuse.
        await session.fetch(self._sql["discard_fence"], workflow)
        rows = await session.fetch(self._sql["discard_records"], workflow)
        await session.fetch(self._sql["discard_status"], workflow, self._channel)
        await session.fetch(self._sql["discard_admitted"], workflow)
        await self._gates.forget(session, workflow)
        return int(rows[0][0])

    async def cancel_many(self, asks: Sequence[CancelAsk]) -> list[CancelOutcome]:
        """Cancel each workflow of ``asks`` (`durably.stores.cancelling`), in one
        transaction: every workflow's locks first (`cancel_lock`), then one read, one
        write of the markers, and one statement per workflow ended here."""
        batch = cancel_batch(asks)
        if not batch:
            return []
        encoded = [(self._encode(ask.value), self._encode(ask.reason)) for ask in batch]

        async def run(session: Session) -> list[CancelOutcome]:
            workflows = [ask.workflow for ask in batch]
            await session.fetch(self._sql["cancel_lock"], workflows)
            rows = await session.fetch(
                self._sql["cancel_read"], workflows, [ask.superseded for ask in batch]
            )
            infos = [None if row[1] is None else _info(row[:5]) for row in rows]
            open_ = [
                (ask, texts)
                for ask, texts, info in zip(batch, encoded, infos, strict=True)
                if info is None or not info.status.finished
            ]
            marked = await session.fetch(
                self._sql["cancel_mark"],
                [ask.workflow for ask, _ in open_],
                [ask.marker for ask, _ in open_],
                [marker for _, (marker, _) in open_],
                self._channel,
            )
            written = {str(row[0]) for row in marked}
            outcomes: list[CancelOutcome] = []
            ending: list[tuple[int, CancelAsk, str, int]] = []
            for ask, (_, reason), info, row in zip(batch, encoded, infos, rows, strict=True):
                status = None if info is None else info.status
                if status is not None and status.finished:
                    outcomes.append(CancelOutcome(ask.workflow, status, False, ended=False))
                    continue
                first, held, superseded = ask.workflow in written, bool(row[5]), bool(row[6])
                if not (held or superseded) and endable(status):
                    attempts = 0 if info is None else info.attempts
                    ending.append((len(outcomes), ask, reason, attempts))
                outcomes.append(CancelOutcome(ask.workflow, status, first, False, held))
            for index in await self._end_many_on(session, ending):
                outcomes[index] = dataclasses.replace(outcomes[index], ended=True)
            return outcomes

        return await self._access.run(run, errors=state_errors, transaction=True)

    async def _end_many_on(
        self, session: Session, ending: list[tuple[int, CancelAsk, str, int]]
    ) -> list[int]:
        """End each workflow of ``ending`` (its outcome's index, its ask, its encoded
        reason, its attempts): the ungated ones in one statement (`cancel_end_many`), a
        gated one with its gate moved (`cancel_end`); the indexes of those ended."""
        if not ending:
            return []
        cancelled = WorkflowStatus.CANCELLED
        state = run_state(cancelled).value
        # One reason for the whole batch: an App cancels with one.
        reasons = {(reason, ask.reason) for _, ask, reason, _ in ending}
        ended: set[str] = set()
        for reason, error in reasons:
            group = [
                (ask, attempts)
                for _, ask, text, attempts in ending
                if (text, ask.reason) == (reason, error)
            ]
            rows = await session.fetch(
                self._sql["cancel_end_many"],
                [ask.workflow for ask, _ in group],
                [ask.ended for ask, _ in group],
                [attempts for _, attempts in group],
                reason,
                cancelled.value,
                state,
                error,
                self._channel,
            )
            ended.update(str(row[0]) for row in rows)
        for _, ask, reason, attempts in ending:
            if ask.workflow in ended:
                continue
            # Gated (left alone above): ended with its gate moved, as a gated report is.
            rows = await session.fetch(
                self._sql["cancel_end"],
                ask.workflow,
                ask.ended,
                reason,
                cancelled.value,
                attempts,
                ask.reason,
                self._channel,
                True,
                state,
            )
            if rows:
                await self._gates.moved(session, ask.workflow, True)
                ended.add(ask.workflow)
        return [index for index, ask, _, _ in ending if ask.workflow in ended]

    async def sweep(
        self,
        *,
        finished_before: datetime,
        limit: int = 1000,
        on_swept: Callable[[str], Awaitable[None]] | None = None,
    ) -> int:
        """Delete up to ``limit`` finished workflows older than ``finished_before`` whose
        claim is not live (records, status, claim), one transaction each; the number swept.
        Tokens come from the global sequence, so a later claim still outranks them."""
        return await sweep_finished(self._access, self._tables, finished_before, limit, on_swept)

    def encode(self, value: object) -> str:
        """``value`` in the codec's JSON text, refused when over ``max_value_bytes`` or
        when ``jsonb`` cannot hold it (a NUL or a lone surrogate: `InvalidInputError`)."""
        return self._encode(value)

    # --- status ---------------------------------------------------------------------------

    async def set_status(
        self,
        holder: Pass,
        status: WorkflowStatus,
        *,
        attempts: int = 0,
        error: str | None = None,
    ) -> WorkflowInfo:
        workflow = identifier(holder.workflow, "workflow")
        status, error = checked_report(status, attempts, error)
        ends = status.finished
        moves = ends or status is WorkflowStatus.PENDING  # an end frees a slot, a resume takes one

        def report(gated: bool) -> Callable[[Session], Awaitable[Sequence[Row]]]:
            return lambda s: s.fetch(
                self._sql["set_status"],
                workflow,
                holder.token,
                status.value,
                attempts,
                error,
                ends,
                self._channel,
                gated or not moves,
                run_state(status).value,
            )

        rows = await self._run(report(False))
        if not rows and moves:
            rows = await self._regated(workflow, report(True), finished=ends)
        if not rows:
            raise Fenced(workflow, holder.token)
        return WorkflowInfo(workflow, status, attempts, error, _utc(rows[0][0]))

    async def _regated(
        self,
        workflow: str,
        report: Callable[[Session], Awaitable[Sequence[Row]]],
        *,
        finished: bool,
    ) -> Sequence[Row]:
        """``report`` (a fenced status write: no rows when fenced), then the gate moves
        of ``workflow`` now ``finished`` or not, in one transaction.

        The status statements leave a gated workflow alone when run on their own (no row
        back, as when fenced): an ungated workflow's report stays one statement, and only
        a gated (or fenced) one pays for the transaction."""

        async def run(session: Session) -> Sequence[Row]:
            rows = await report(session)
            if rows:
                await self._gates.moved(session, workflow, finished)
            return rows

        return await self._access.run(run, errors=state_errors, transaction=True)

    async def finish(
        self,
        holder: Pass,
        key: str,
        value: object,
        *,
        attempts: int = 0,
        error: str | None = None,
    ) -> WorkflowInfo:
        """`record` ``key`` and report COMPLETED in one statement; `Fenced` (writing
        neither) if ``holder`` was superseded."""
        workflow = identifier(holder.workflow, "workflow")
        step_key(key)
        encoded = self._encode(value)
        status, error = checked_report(WorkflowStatus.COMPLETED, attempts, error)

        def report(gated: bool) -> Callable[[Session], Awaitable[Sequence[Row]]]:
            return lambda s: s.fetch(
                self._sql["finish"],
                workflow,
                holder.token,
                key,
                encoded,
                status.value,
                attempts,
                error,
                self._channel,
                gated,
                run_state(status).value,
            )

        rows = await self._run(report(False))
        if not rows:
            rows = await self._regated(workflow, report(True), finished=True)
        if not rows:
            raise Fenced(workflow, holder.token)
        return WorkflowInfo(workflow, status, attempts, error, _utc(rows[0][0]))

    async def get_status(self, workflow: str) -> WorkflowInfo | None:
        identifier(workflow, "workflow")
        rows = await self._run(lambda s: s.fetch(self._sql["get_status"], workflow))
        return _info(rows[0]) if rows else None

    async def list_status(
        self, *, status: WorkflowStatus | None = None, limit: int = 50, after: str | None = None
    ) -> list[WorkflowInfo]:
        if after is not None:
            identifier(after, "after")
        positive_int(limit, "limit")
        wanted = WorkflowStatus(status).value if status is not None else None
        rows = await self._run(lambda s: s.fetch(self._sql["list_status"], wanted, after, limit))
        return [_info(row) for row in rows]

    async def workflows(self, *, after: str | None = None, limit: int = 1000) -> list[str]:
        """Workflows with records or a status, in code point order."""
        listing_page(after, limit)
        rows = await self._run(lambda s: s.fetch(self._sql["workflows"], after, limit))
        return [str(row[0]) for row in rows]

    # --- the catalog ----------------------------------------------------------------------

    async def catalog(self, workflow: str, entry: CatalogEntry) -> None:
        """Enter ``workflow`` in the catalog (an entry already there is kept)."""
        identifier(workflow, "workflow")
        await self._run(lambda s: self._catalog.enter(s, workflow, entry))

    async def catalog_on(self, session: Session, workflow: str, entry: CatalogEntry) -> None:
        """`catalog` on ``session`` (for `PostgresDurable`)."""
        await self._catalog.enter(session, workflow, entry)

    async def catalog_many(self, entries: Sequence[tuple[str, CatalogEntry]]) -> None:
        """Enter each (workflow, entry) in the catalog in one statement (an entry already
        there is kept)."""
        batch = catalog_batch(entries)
        if batch:
            await self._access.run(
                lambda s: self._catalog.enter_many(s, batch), errors=state_errors, transaction=True
            )

    async def listed(
        self, line: Line, *, before: Mark | None = None, since_us: int = 0, limit: int = 100
    ) -> list[Listed]:
        """Up to ``limit`` workflows of ``line`` before ``before``, newest first: one
        index range."""
        line_read(line, since_us, limit)
        return await self._run(lambda s: self._catalog.listed(s, line, before, since_us, limit))

    async def finished_per_minute(self) -> dict[str, list[Minute]]:
        """Catalogued workflows of each kind completed and failed in each of the last
        minutes, oldest first: the ring the status trigger keeps (schema.sql)."""
        return await self._run(self._catalog.finished_per_minute)

    async def repair_catalog(self, *, limit: int = 500) -> int:
        """Nothing to repair: the status write keeps the catalog itself."""
        positive_int(limit, "limit")
        return 0

    async def tally(self, tenant: str | None = None) -> dict[tuple[str, WorkflowStatus], int]:
        """How many catalogued workflows each (kind, status) pair has (exact)."""
        if tenant is not None:
            identifier(tenant, "tenant")
        return tallied(await self._run(lambda s: self._catalog.tally(s, tenant)))

    # --- internals ------------------------------------------------------------------------

    async def recorded_on(
        self, session: Session, workflow: str, key: str, encoded: str
    ) -> Recorded[object]:
        """The record stored under ``key`` where a first-writer-wins write of ``encoded``
        wrote nothing, on ``session`` (for `PostgresDurable`): ``first`` when it equals it."""
        return await self._stored(session, workflow, key, encoded)

    async def _stored(
        self, session: Session, workflow: str, key: str, encoded: str
    ) -> Recorded[object]:
        rows = await session.fetch(self._sql["stored"], workflow, key, encoded)
        if not rows:
            # The winner was discarded between our insert and this read.
            raise StatePersistenceError("postgres", "contended", "record raced a discard")
        text, equal, _ = rows[0]
        return Recorded(decoded(self._codec, workflow, key, text), bool(equal))

    def _encode(self, value: object) -> str:
        text = self._screened(value)
        if "e+" in text:  # perhaps a float jsonb would give back as an int
            text = jsonb_text(json.loads(text))
        return within_size(text, self._max_bytes, "value", "postgres")

    async def _run(self, operation: Callable[[Session], Awaitable[T]]) -> T:
        return await self._access.run(operation, errors=state_errors)


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


def _info(row: Row) -> WorkflowInfo:
    workflow, status, attempts, last_error, updated_at = row
    return read_status(
        workflow,
        lambda: WorkflowInfo(
            str(workflow), WorkflowStatus(status), int(attempts), last_error, _utc(updated_at)
        ),
    )


__all__ = ["PostgresCheckpointer", "PostgresEffect"]
