"""The in-memory `Checkpointer`: records and fenced claims over dicts, for tests and demos.

Every method finishes without yielding to the event loop, so each one is atomic under
asyncio. Leases run on ``time.monotonic()`` (the store's clock); the times `history`
reports come from ``time.time()``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from durably.errors import Fenced
from durably.memory.catalog import MemoryCatalog
from durably.memory.gates import MemoryGates
from durably.memory.state import MemoryStateStore
from durably.stores.admission import Admit, TenantCaps, TenantCounts, admit_batch, refuse_over
from durably.stores.cancelling import (
    CancelAsk,
    CancelOutcome,
    Looked,
    cancel_batch,
    endable,
    look_batch,
    wanted_key,
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
from durably.stores.changes import ENDED, RECORDS, LocalChanges, RecordSelector, every_record
from durably.stores.codec import (
    CheckpointCodec,
    JsonCodec,
    decoded,
    decoded_records,
    screened_encode,
)
from durably.stores.gates import Admission, GateCounts, WorkflowGate
from durably.stores.retention import FINISHED, sweep_arguments
from durably.stores.runs import run_state
from durably.stores.settings import DEFAULT_MAX_VALUE_BYTES
from durably.stores.status import WorkflowInfo, WorkflowStatus, checked_report
from durably.stores.throughput import RATED_STATUSES, Minute, Ring
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

MemoryEffect = Callable[[dict[str, object]], object]
"""An effect for `MemoryCheckpointer.transact`: a function over a working copy of the
store's ``data`` dict, committed together with the record only if it returns."""


@dataclass(slots=True)
class _Claim:
    token: int
    held_until: float
    alive_until: float
    alive_for: float


@dataclass(frozen=True, slots=True)
class _Record:
    encoded: str
    at: float


@dataclass(frozen=True, slots=True)
class _Status:
    status: WorkflowStatus
    attempts: int
    last_error: str | None
    updated_at: float


class MemoryCheckpointer:
    """A `Checkpointer[MemoryEffect]` held in this process.

    ``data`` is the user "database" that `transact` effects work on; ``now`` is the lease
    clock (``time.monotonic`` unless a test injects another). A value whose encoded text
    is over ``max_value_bytes`` (1 MiB by default, as SQLite's and PostgreSQL's) is refused
    with `StatePersistenceError` (reason ``too_large``), as those stores refuse it.
    """

    def __init__(
        self,
        codec: CheckpointCodec | None = None,
        *,
        now: Callable[[], float] = time.monotonic,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        self._codec: CheckpointCodec = codec if codec is not None else JsonCodec()
        screened = screened_encode(self._codec)
        limit = positive_int(max_value_bytes, "max_value_bytes")

        def encode(value: object) -> str:
            # The same limit as SQLite's and PostgreSQL's by default: what a test stores
            # here, a production store takes too.
            return within_size(screened(value), limit, "value", "memory")

        self._encode = encode
        self._now = now
        self.data: dict[str, object] = {}
        self._records: dict[str, dict[str, _Record]] = {}
        self._claims: dict[str, _Claim] = {}
        self._statuses: dict[str, _Status] = {}
        # Never reset (not even by discard), so an inbox key is never reused.
        self._appended: dict[str, int] = {}
        # The highest token of any swept claim: a claim created afresh starts above it.
        self._swept_token = 0
        # Admitted workflows: their tenant and whether they count as running; and the
        # counts per tenant, [running, started], kept with every write that moves them.
        self._admitted: dict[str, tuple[str, bool]] = {}
        self._counts: dict[str, list[int]] = {}
        # Workflow gates, and how a workflow they admit is made ready for its kind
        # (registered by each MemoryDurable: its scheduler's namespace).
        self._gates = MemoryGates()
        self._wakers: dict[str, Callable[[str, str | None, int | None], None]] = {}
        self._catalog = MemoryCatalog(self._info_of)
        self._runs: MemoryStateStore | None = None  # whose followed runs move with statuses
        self._finished = Ring()  # workflows ended per minute, by kind
        self._changes = LocalChanges()
        self._announced: RecordSelector = every_record

    async def close(self) -> None:
        """Nothing to release (idempotent): everything lives in this object."""

    @property
    def changes(self) -> LocalChanges:
        """The feed of this store's writes (`durably.stores.changes`)."""
        return self._changes

    def announce_records(self, selected: RecordSelector) -> None:
        """Announce a record a pass writes only when ``selected`` takes its key."""
        self._announced = selected

    @property
    def codec(self) -> CheckpointCodec:
        """The codec values are stored with."""
        return self._codec

    # --- reading ---------------------------------------------------------------------------

    async def load(self, workflow: str) -> dict[str, object]:
        """Every record, decoded, in first-recorded order; ``{}`` for an unknown workflow."""
        identifier(workflow, "workflow")
        records = self._records.get(workflow, {})
        rows = [(key, record.encoded) for key, record in records.items()]
        return decoded_records(self._codec, workflow, rows)

    async def peek(self, workflow: str, keys: Collection[str]) -> dict[str, object]:
        """The records under ``keys`` that exist, decoded, in the order asked."""
        return self._peeked(workflow, keys)

    def _peeked(self, workflow: str, keys: Collection[str]) -> dict[str, object]:
        identifier(workflow, "workflow")
        wanted = named_keys(keys)
        records = self._records.get(workflow, {})
        rows = [(key, records[key].encoded) for key in wanted if key in records]
        return decoded_records(self._codec, workflow, rows)

    async def look(
        self, workflow: str, keys: Collection[str]
    ) -> tuple[WorkflowInfo | None, dict[str, object]]:
        """The status and the records under ``keys`` that exist, read together."""
        records = self._peeked(workflow, keys)
        stored = self._statuses.get(workflow)
        return (_info(workflow, stored) if stored is not None else None), records

    async def look_many(
        self, workflows: Sequence[str], keys: Collection[str], prefixes: Collection[str] = ()
    ) -> list[Looked]:
        """Each workflow's status and its records under ``keys`` or ``prefixes``, read
        together."""
        checked, wanted, starts = look_batch(workflows, keys, prefixes)
        looked = []
        for workflow in checked:
            records = self._records.get(workflow, {})
            rows = [(k, r.encoded) for k, r in records.items() if wanted_key(k, wanted, starts)]
            stored = self._statuses.get(workflow)
            info = None if stored is None else _info(workflow, stored)
            looked.append(Looked(info, decoded_records(self._codec, workflow, rows)))
        return looked

    async def history(self, workflow: str) -> dict[str, Written]:
        """Every record with the (aware, UTC) time it landed, in first-recorded order."""
        identifier(workflow, "workflow")
        records = self._records.get(workflow, {})
        return written_records(
            self._codec,
            workflow,
            [(key, record.encoded, _utc(record.at)) for key, record in records.items()],
        )

    # --- claims ----------------------------------------------------------------------------

    async def claim(self, workflow: str, budget: float, alive: float) -> Pass | None:
        """Take the workflow if no live pass holds it; None if one does."""
        identifier(workflow, "workflow")
        positive(budget, "budget")
        positive(alive, "alive")
        now = self._now()
        current = self._claims.get(workflow)
        if current is not None and current.alive_until > now:
            return None
        token = current.token + 1 if current is not None else self._swept_token + 1
        held_until = now + budget
        self._claims[workflow] = _Claim(token, held_until, min(now + alive, held_until), alive)
        return Pass(workflow, token)

    async def renew(self, holder: Pass, alive: float) -> bool:
        """Push the liveness window out (never past the budget); False if superseded or spent."""
        positive(alive, "alive")
        claim = self._holding(holder)
        now = self._now()
        if claim is None or claim.held_until <= now:
            return False
        claim.alive_until = min(now + alive, claim.held_until)
        return True

    async def extend(self, holder: Pass, budget: float, alive: float) -> bool:
        """Grow the budget (never shrink it) and renew; False if superseded."""
        positive(budget, "budget")
        positive(alive, "alive")
        claim = self._holding(holder)
        if claim is None:
            return False
        now = self._now()
        claim.held_until = max(claim.held_until, now + budget)
        claim.alive_until = min(now + alive, claim.held_until)
        return True

    async def release(self, holder: Pass) -> None:
        """End ``holder``'s claim now without rewinding its token (no-op if superseded)."""
        claim = self._holding(holder)
        if claim is not None:
            now = self._now()
            claim.held_until = claim.alive_until = now

    # --- writing ---------------------------------------------------------------------------

    async def record(self, holder: Pass, key: str, value: object) -> Recorded[object]:
        """Write ``key`` once (first writer wins); `Fenced` if ``holder`` was superseded."""
        step_key(key)
        encoded = self._encode(value)
        claim = self._fence(holder)
        recorded = self._insert(holder.workflow, key, encoded, self._announced(key))
        self._touch(claim)
        return recorded

    async def transact(self, holder: Pass, key: str, effect: MemoryEffect) -> Recorded[object]:
        """Run ``effect`` over a copy of ``data`` and commit it with its record, once.

        A recorded key returns without running the effect; a superseded pass gets `Fenced`
        before it; an effect that raises (or a value the codec refuses) leaves neither.
        """
        identifier(holder.workflow, "workflow")
        step_key(key)
        existing = self._records.get(holder.workflow, {}).get(key)
        if existing is not None:
            return Recorded(decoded(self._codec, holder.workflow, key, existing.encoded), False)
        claim = self._fence(holder)
        working = copy.deepcopy(self.data)
        value = effect(working)
        encoded = self._encode(value)
        recorded = self._insert(holder.workflow, key, encoded, self._announced(key))
        # Keep the dict's identity: callers may hold a reference to ``data``.
        self.data.clear()
        self.data.update(working)
        self._touch(claim)
        return recorded

    async def supply(self, workflow: str, key: str, value: object) -> Recorded[object]:
        """First-writer-wins write from outside any pass; takes no claim."""
        return self._supply_now(workflow, key, value)

    async def admit(
        self, workflow: str, key: str, value: object, *, tenant: str, caps: TenantCaps
    ) -> Recorded[object]:
        """`supply` the start record and count a first one under ``tenant``;
        `WorkflowLimitError` (writing nothing) past ``caps``."""
        identifier(workflow, "workflow")
        identifier(tenant, "tenant")
        step_key(key)
        encoded = self._encode(value)
        fresh = key not in self._records.get(workflow, {})
        if fresh:
            running, started = self._counts.get(tenant, (0, 0))
            refuse_over(caps, TenantCounts(running, started), tenant=tenant, workflow=workflow)
        recorded = self._insert(workflow, key, encoded)
        if fresh and workflow not in self._admitted:
            self._admitted[workflow] = (tenant, True)
            counts = self._counts.setdefault(tenant, [0, 0])
            counts[0] += 1
            counts[1] += 1
        return recorded

    async def admit_many(self, admits: Sequence[Admit]) -> list[Recorded[object]]:
        """`admit` each start without caps, at once (nothing awaited between them)."""
        batch = admit_batch(admits)
        encoded = [self._encode(admit.value) for admit in batch]  # refused before any write
        recorded = []
        for admit, text in zip(batch, encoded, strict=True):
            fresh = admit.key not in self._records.get(admit.workflow, {})
            recorded.append(self._insert(admit.workflow, admit.key, text))
            if fresh and admit.workflow not in self._admitted:
                self._admitted[admit.workflow] = (admit.tenant, True)
                counts = self._counts.setdefault(admit.tenant, [0, 0])
                counts[0] += 1
                counts[1] += 1
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
        """`admit` through ``gate``: admitted while it has room, else queued (status
        QUEUED); a start already recorded changes nothing."""
        fresh = key not in self._records.get(workflow, {})
        recorded = await self.admit(workflow, key, value, tenant=tenant, caps=caps)
        if (
            fresh
            and not self._gates.knows(workflow)
            and self._gates.admit(workflow, tenant, gate, self._admitted_from_line)
        ):
            self._store_status(workflow, _Status(WorkflowStatus.QUEUED, 0, None, time.time()))
        return Admission(recorded, self._gates.queued(workflow))

    async def gate_counts(self, gate: str) -> GateCounts:
        """Gate ``gate``'s admitted and queued workflows."""
        return self._gates.counts(gate)

    async def rerank_queued(self, workflow: str, gate: str, priority: int) -> bool:
        """Give ``workflow``, queued in gate ``gate``'s line, ``priority``'s place there;
        False when it is not queued there."""
        identifier(workflow, "workflow")
        identifier(gate, "gate")
        return self._gates.rerank(workflow, gate, new_priority(priority))

    async def repair_gates(self, *, limit: int = 500) -> int:
        """Nothing to repair: the write that frees a slot admits the next itself."""
        positive_int(limit, "limit")
        return 0

    async def throttle_start(self, key: str, now: float, interval: float, burst: int) -> float:
        """Reserve a start under throttle ``key``: the earliest it may begin."""
        return self._gates.throttle(key, now, interval, burst)

    def _wake_in(self, namespace: str, wake: Callable[[str, str | None, int | None], None]) -> None:
        """Make the workflows gates admit for kind ``namespace`` ready through ``wake``."""
        self._wakers[namespace] = wake

    def _admitted_from_line(
        self, workflow: str, tenant: str, namespace: str, priority: int
    ) -> None:
        self._store_status(workflow, _Status(WorkflowStatus.PENDING, 0, None, time.time()))
        wake = self._wakers.get(namespace)
        if wake is not None:
            wake(workflow, tenant, priority)

    async def tenant_counts(self, tenant: str) -> TenantCounts:
        """``tenant``'s admitted workflows, running and started."""
        identifier(tenant, "tenant")
        running, started = self._counts.get(tenant, (0, 0))
        return TenantCounts(running, started)

    async def append(self, workflow: str, value: object, *, unless_finished: bool = False) -> Entry:
        """Add a message under a store-named ``inbox:`` key that sorts in append order;
        with ``unless_finished``, `WorkflowFinishedError` for a finished workflow."""
        return self._append_now(workflow, value, unless_finished)

    async def forget(self, holder: Pass, keys: Collection[str]) -> int:
        """Delete the messages under ``keys`` for ``holder``; the number deleted."""
        identifier(holder.workflow, "workflow")
        doomed = message_keys(keys)
        claim = self._fence(holder)
        records = self._records.get(holder.workflow, {})
        deleted = sum(1 for key in doomed if records.pop(key, None) is not None)
        self._touch(claim)
        return deleted

    async def restart(
        self,
        holder: Pass,
        key: str,
        value: object,
        *,
        keep: Collection[str] = (INBOX_PREFIX,),
    ) -> int:
        """Delete every record not under a ``keep`` prefix, write ``key`` afresh and
        report PENDING, for ``holder``, at once; the number of records deleted."""
        identifier(holder.workflow, "workflow")
        step_key(key)
        prefixes = kept_prefixes(keep)
        encoded = self._encode(value)
        claim = self._fence(holder)
        records = self._records.get(holder.workflow, {})
        kept = {k: r for k, r in records.items() if k != key and k.startswith(prefixes)}
        deleted = sum(1 for k in records if k != key and not k.startswith(prefixes))
        self._records[holder.workflow] = kept
        self._insert(holder.workflow, key, encoded)
        self._touch(claim)
        pending = _Status(WorkflowStatus.PENDING, 0, None, time.time())
        self._store_status(holder.workflow, pending)
        self._recount(holder.workflow, WorkflowStatus.PENDING)
        return deleted

    async def discard(self, workflow: str) -> int:
        """Delete every record and the status and fence the current holder; the count deleted."""
        return self._discard_now(workflow)

    async def cancel_many(self, asks: Sequence[CancelAsk]) -> list[CancelOutcome]:
        """Cancel each workflow of ``asks`` (`durably.stores.cancelling`), all at once."""
        batch = cancel_batch(asks)
        encoded = [(self._encode(ask.value), self._encode(ask.reason)) for ask in batch]
        return [self._cancel_now(ask, *texts) for ask, texts in zip(batch, encoded, strict=True)]

    def _cancel_now(self, ask: CancelAsk, marker: str, reason: str) -> CancelOutcome:
        workflow = ask.workflow
        stored = self._statuses.get(workflow)
        status = None if stored is None else stored.status
        if status is not None and status.finished:
            return CancelOutcome(workflow, status, first=False, ended=False)
        first = self._insert(workflow, ask.marker, marker).first
        claim = self._claims.get(workflow)
        now = self._now()
        held = claim is not None and claim.alive_until > now
        if held or not endable(status) or ask.superseded in self._records.get(workflow, {}):
            return CancelOutcome(workflow, status, first, ended=False, held=held)
        if claim is not None:  # a lapsed pass is fenced out, as a claim would fence it
            claim.token += 1
            claim.held_until = claim.alive_until = now
        self._insert(workflow, ask.ended, reason)
        attempts = 0 if stored is None else stored.attempts
        ended = _Status(WorkflowStatus.CANCELLED, attempts, ask.reason, time.time())
        self._store_status(workflow, ended)
        self._recount(workflow, WorkflowStatus.CANCELLED)
        self._changes.announce(workflow, ENDED)
        return CancelOutcome(workflow, status, first, ended=True)

    # --- status ----------------------------------------------------------------------------

    async def set_status(
        self,
        holder: Pass,
        status: WorkflowStatus,
        *,
        attempts: int = 0,
        error: str | None = None,
    ) -> WorkflowInfo:
        """Report the workflow's status; `Fenced` if ``holder`` was superseded."""
        status, error = checked_report(status, attempts, error)
        self._fence(holder)
        stored = _Status(status, attempts, error, time.time())
        self._count_finished(holder.workflow, stored)
        self._store_status(holder.workflow, stored)
        self._recount(holder.workflow, status)
        if status.finished:
            self._changes.announce(holder.workflow, ENDED)
        return _info(holder.workflow, stored)

    async def finish(
        self,
        holder: Pass,
        key: str,
        value: object,
        *,
        attempts: int = 0,
        error: str | None = None,
    ) -> WorkflowInfo:
        """`record` ``key`` and report COMPLETED, atomically; `Fenced` (writing neither) if
        ``holder`` was superseded."""
        step_key(key)
        encoded = self._encode(value)
        status, error = checked_report(WorkflowStatus.COMPLETED, attempts, error)
        claim = self._fence(holder)
        self._insert(holder.workflow, key, encoded)
        self._touch(claim)
        stored = _Status(status, attempts, error, time.time())
        self._count_finished(holder.workflow, stored)
        self._store_status(holder.workflow, stored)
        self._recount(holder.workflow, status)
        self._changes.announce(holder.workflow, ENDED)
        return _info(holder.workflow, stored)

    def follow_runs(self, runs: MemoryStateStore) -> None:
        """Move the run records of ``runs`` that follow a workflow with its status writes."""
        self._runs = runs

    def _store_status(self, workflow: str, stored: _Status) -> None:
        """Store ``workflow``'s status and, before any await, its run's state."""
        self._statuses[workflow] = stored
        tenant = self._catalog.tenant_of(workflow)
        if self._runs is not None and tenant is not None:
            self._runs.follow(tenant, workflow, run_state(stored.status))

    async def get_status(self, workflow: str) -> WorkflowInfo | None:
        """The last reported status, or None (never reported, or discarded)."""
        identifier(workflow, "workflow")
        stored = self._statuses.get(workflow)
        return _info(workflow, stored) if stored is not None else None

    async def list_status(
        self, *, status: WorkflowStatus | None = None, limit: int = 50, after: str | None = None
    ) -> list[WorkflowInfo]:
        """Statuses ordered by workflow id (code points), those after ``after``."""
        if after is not None:
            identifier(after, "after")
        positive_int(limit, "limit")
        wanted = WorkflowStatus(status) if status is not None else None
        found: list[WorkflowInfo] = []
        for workflow in sorted(self._statuses):
            if after is not None and workflow <= after:
                continue
            stored = self._statuses[workflow]
            if wanted is not None and stored.status is not wanted:
                continue
            found.append(_info(workflow, stored))
            if len(found) == limit:
                break
        return found

    async def workflows(self, *, after: str | None = None, limit: int = 1000) -> list[str]:
        """Workflows with records or a status, in code point order."""
        listing_page(after, limit)
        known = {w for w, records in self._records.items() if records} | set(self._statuses)
        return sorted(w for w in known if after is None or w > after)[:limit]

    # --- retention ---------------------------------------------------------------------------

    async def sweep(
        self,
        *,
        finished_before: datetime,
        limit: int = 1000,
        on_swept: Callable[[str], Awaitable[None]] | None = None,
    ) -> int:
        """Delete up to ``limit`` finished workflows older than ``finished_before`` whose
        claim is not live (records, status, claim); the number swept."""
        sweep_arguments(finished_before, limit)
        before = finished_before.timestamp()
        now = self._now()
        chosen = sorted(
            (stored.updated_at, workflow)
            for workflow, stored in self._statuses.items()
            if stored.status in FINISHED
            and stored.updated_at < before
            and (workflow not in self._claims or self._claims[workflow].alive_until <= now)
        )[:limit]
        # Every deletion happens before the first await, so the whole batch is atomic.
        for _, workflow in chosen:
            self._records.pop(workflow, None)
            self._statuses.pop(workflow, None)
            self._catalog.drop(workflow)
            self._appended.pop(workflow, None)
            self._uncount(workflow)
            claim = self._claims.pop(workflow, None)
            if claim is not None:
                self._swept_token = max(self._swept_token, claim.token)
        if on_swept is not None:
            for _, workflow in chosen:
                await on_swept(workflow)
        return len(chosen)

    # --- the catalog -----------------------------------------------------------------------

    async def catalog(self, workflow: str, entry: CatalogEntry) -> None:
        """Enter ``workflow`` in the catalog (an entry already there is kept)."""
        identifier(workflow, "workflow")
        self._catalog.enter(workflow, entry)

    async def catalog_many(self, entries: Sequence[tuple[str, CatalogEntry]]) -> None:
        """Enter each (workflow, entry) in the catalog (an entry already there is kept)."""
        for workflow, entry in catalog_batch(entries):
            self._catalog.enter(workflow, entry)

    async def listed(
        self, line: Line, *, before: Mark | None = None, since_us: int = 0, limit: int = 100
    ) -> list[Listed]:
        """Up to ``limit`` workflows of ``line`` before ``before``, newest first."""
        line_read(line, since_us, limit)
        return self._catalog.listed(line, before, since_us, limit)

    async def finished_per_minute(self) -> dict[str, list[Minute]]:
        """Catalogued workflows of each kind completed and failed in each of the last
        minutes (wall clock, as the statuses' times), oldest first."""
        return self._finished.read(None, time.time())

    async def repair_catalog(self, *, limit: int = 500) -> int:
        """Nothing to repair: the status write keeps the catalog itself."""
        positive_int(limit, "limit")
        return 0

    async def tally(self, tenant: str | None = None) -> dict[tuple[str, WorkflowStatus], int]:
        """How many catalogued workflows each (kind, status) pair has."""
        if tenant is not None:
            identifier(tenant, "tenant")
        return tallied(self._catalog.tally(tenant))

    def _info_of(self, workflow: str) -> WorkflowInfo | None:
        stored = self._statuses.get(workflow)
        return None if stored is None else _info(workflow, stored)

    # --- synchronous steps, shared with MemoryDurable so it never awaits between writes ---

    def _supply_now(self, workflow: str, key: str, value: object) -> Recorded[object]:
        identifier(workflow, "workflow")
        step_key(key)
        return self._insert(workflow, key, self._encode(value))

    def _append_now(self, workflow: str, value: object, unless_finished: bool = False) -> Entry:
        identifier(workflow, "workflow")
        encoded = self._encode(value)
        if unless_finished:
            status = self._statuses.get(workflow)
            refuse_finished(workflow, None if status is None else status.status)
        position = self._appended.get(workflow, 0) + 1
        key = inbox_key(position)
        self._appended[workflow] = position
        self._insert(workflow, key, encoded)
        return Entry(key, self._codec.decode(encoded))

    def _discard_now(self, workflow: str) -> int:
        identifier(workflow, "workflow")
        deleted = len(self._records.pop(workflow, {}))
        self._statuses.pop(workflow, None)
        self._uncount(workflow)
        self._catalog.drop(workflow)
        claim = self._claims.get(workflow)
        if claim is not None:
            now = self._now()
            claim.token += 1
            claim.held_until = claim.alive_until = now
        self._changes.announce(workflow, ENDED)
        return deleted

    # --- admission counts ------------------------------------------------------------------

    def _recount(self, workflow: str, status: WorkflowStatus) -> None:
        """Move the running count of an admitted ``workflow`` now at ``status``."""
        self._gates.moved(workflow, status.finished, self._admitted_from_line)
        admitted = self._admitted.get(workflow)
        if admitted is None:
            return
        tenant, was = admitted
        now = not status.finished
        if now != was:
            self._admitted[workflow] = (tenant, now)
            self._counts[tenant][0] += 1 if now else -1

    def _count_finished(self, workflow: str, stored: _Status) -> None:
        """Count a catalogued ``workflow`` that ``stored`` ends (completed or failed) in its
        kind's minute, unless it had ended so already."""
        if stored.status not in RATED_STATUSES:
            return
        previous = self._statuses.get(workflow)
        kind = self._catalog.kind_of(workflow)
        if kind is not None and (previous is None or previous.status is not stored.status):
            failed = stored.status is WorkflowStatus.FAILED
            self._finished.count(kind, stored.updated_at, failed=failed)

    def _uncount(self, workflow: str) -> None:
        """Forget an admitted ``workflow`` deleted from the store."""
        self._gates.forget(workflow, self._admitted_from_line)
        admitted = self._admitted.pop(workflow, None)
        if admitted is None:
            return
        tenant, running = admitted
        counts = self._counts[tenant]
        counts[0] -= int(running)
        counts[1] -= 1

    # --- internals -------------------------------------------------------------------------

    def _holding(self, holder: Pass) -> _Claim | None:
        """The claim if ``holder`` is still its newest pass."""
        identifier(holder.workflow, "workflow")
        claim = self._claims.get(holder.workflow)
        if claim is None or claim.token != holder.token:
            return None
        return claim

    def _fence(self, holder: Pass) -> _Claim:
        claim = self._holding(holder)
        if claim is None:
            raise Fenced(holder.workflow, holder.token)
        return claim

    def _touch(self, claim: _Claim) -> None:
        """A successful write is a sign of life: renew, but never past the budget."""
        claim.alive_until = min(self._now() + claim.alive_for, claim.held_until)

    def _insert(
        self, workflow: str, key: str, encoded: str, announced: bool = True
    ) -> Recorded[object]:
        records = self._records.setdefault(workflow, {})
        existing = records.get(key)
        if existing is not None:
            stored = decoded(self._codec, workflow, key, existing.encoded)
            return Recorded(stored, existing.encoded == encoded)
        # Keep landing times non-decreasing in record order even if the wall clock steps back.
        last = next(reversed(records.values())).at if records else 0.0
        records[key] = _Record(encoded, max(time.time(), last))
        if announced:
            self._changes.announce(workflow, RECORDS)
        return Recorded(self._codec.decode(encoded), True)


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _info(workflow: str, stored: _Status) -> WorkflowInfo:
    return WorkflowInfo(
        workflow, stored.status, stored.attempts, stored.last_error, _utc(stored.updated_at)
    )


__all__ = ["MemoryCheckpointer", "MemoryEffect"]
