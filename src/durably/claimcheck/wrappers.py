"""Stores that send large values behind a claim check, over any backing's stores.

`ClaimCheckedCheckpointer`, `ClaimCheckedDurable` and `ClaimCheckedQueue` wrap a store of
any backing and apply a `ClaimCheckPolicy` on the way in and out, so a workflow body or a
handler sees its values whole while the checkpoint or the queue holds a handle. Everything
else passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

from durably.claimcheck.policy import ClaimCheckPolicy
from durably.errors import ConfigurationError
from durably.stores.catalog import CatalogEntry, Cataloguing, Line, Listed, Mark
from durably.stores.codec import CheckpointCodec
from durably.stores.debounce import Begun
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.stores.throughput import Minute
from durably.stores.work import (
    DEFAULT_QUEUE,
    DeadLetterPage,
    QueuePolicy,
    QueueStats,
    WorkItem,
    WorkQueue,
)
from durably.stores.workflows import (
    INBOX_PREFIX,
    Checkpointer,
    Durable,
    Entry,
    Pass,
    Recorded,
    Scheduler,
    Written,
    finish_workflow,
    look_at,
)

EffectT = TypeVar("EffectT")


class ClaimCheckedCheckpointer(Generic[EffectT]):
    """A `Checkpointer` whose values over the policy's threshold are recorded as handles.

    ``record``, ``finish``, ``supply``, ``append`` and ``restart`` put a large value in the
    claim-check store first (an orphaned blob, if the write then fails, lapses with its
    ttl); ``load``, ``peek``, ``history`` and every `Recorded` fetch it back. A
    ``transact`` effect's value is committed by the inner store as it is: it is written
    inside the store's transaction, where a claim-check put cannot join.
    """

    def __init__(self, inner: Checkpointer[EffectT], claims: ClaimCheckPolicy) -> None:
        self._inner = inner
        self._claims = claims

    @property
    def inner(self) -> Checkpointer[EffectT]:
        """The wrapped checkpointer (it holds the envelopes)."""
        return self._inner

    @property
    def claims(self) -> ClaimCheckPolicy:
        """The policy applied."""
        return self._claims

    @property
    def codec(self) -> CheckpointCodec:
        return self._inner.codec

    async def close(self) -> None:
        """Close the wrapped checkpointer (the claim-check store is the policy's owner's)."""
        await self._inner.close()

    async def _value(self, stored: object) -> object:
        return await self._claims.unstow(stored, self._inner.codec)

    async def load(self, workflow: str) -> dict[str, object]:
        records = await self._inner.load(workflow)
        return {key: await self._value(value) for key, value in records.items()}

    async def peek(self, workflow: str, keys: Collection[str]) -> dict[str, object]:
        records = await self._inner.peek(workflow, keys)
        return {key: await self._value(value) for key, value in records.items()}

    async def look(
        self, workflow: str, keys: Collection[str]
    ) -> tuple[WorkflowInfo | None, dict[str, object]]:
        info, records = await look_at(self._inner, workflow, keys)
        return info, {key: await self._value(value) for key, value in records.items()}

    async def history(self, workflow: str) -> dict[str, Written]:
        records = await self._inner.history(workflow)
        return {key: Written(await self._value(w.value), w.at) for key, w in records.items()}

    async def claim(self, workflow: str, budget: float, alive: float) -> Pass | None:
        return await self._inner.claim(workflow, budget, alive)

    async def renew(self, holder: Pass, alive: float) -> bool:
        return await self._inner.renew(holder, alive)

    async def extend(self, holder: Pass, budget: float, alive: float) -> bool:
        return await self._inner.extend(holder, budget, alive)

    async def release(self, holder: Pass) -> None:
        await self._inner.release(holder)

    async def record(self, holder: Pass, key: str, value: object) -> Recorded[object]:
        return await checked_write(
            self._claims, self._inner.codec, value, lambda v: self._inner.record(holder, key, v)
        )

    async def transact(self, holder: Pass, key: str, effect: EffectT) -> Recorded[object]:
        recorded = await self._inner.transact(holder, key, effect)
        return Recorded(await self._value(recorded.value), recorded.first)

    async def supply(self, workflow: str, key: str, value: object) -> Recorded[object]:
        return await checked_write(
            self._claims, self._inner.codec, value, lambda v: self._inner.supply(workflow, key, v)
        )

    async def append(self, workflow: str, value: object, *, unless_finished: bool = False) -> Entry:
        return await checked_entry(
            self._claims,
            self._inner.codec,
            value,
            lambda v: self._inner.append(workflow, v, unless_finished=unless_finished),
        )

    async def forget(self, holder: Pass, keys: Collection[str]) -> int:
        return await self._inner.forget(holder, keys)

    async def restart(
        self,
        holder: Pass,
        key: str,
        value: object,
        *,
        keep: Collection[str] = (INBOX_PREFIX,),
    ) -> int:
        stowed = await self._claims.stow(value, self._inner.codec)
        return await self._inner.restart(holder, key, stowed.stored, keep=keep)

    async def discard(self, workflow: str) -> int:
        return await self._inner.discard(workflow)

    async def set_status(
        self,
        holder: Pass,
        status: WorkflowStatus,
        *,
        attempts: int = 0,
        error: str | None = None,
    ) -> WorkflowInfo:
        return await self._inner.set_status(holder, status, attempts=attempts, error=error)

    async def finish(
        self,
        holder: Pass,
        key: str,
        value: object,
        *,
        attempts: int = 0,
        error: str | None = None,
    ) -> WorkflowInfo:
        """`finish_workflow` on the wrapped checkpointer with ``value`` stowed as `record`
        stows it (in one write where the wrapped checkpointer can finish)."""
        stowed = await self._claims.stow(value, self._inner.codec)
        return await finish_workflow(
            self._inner, holder, key, stowed.stored, attempts=attempts, error=error
        )

    async def get_status(self, workflow: str) -> WorkflowInfo | None:
        return await self._inner.get_status(workflow)

    async def list_status(
        self, *, status: WorkflowStatus | None = None, limit: int = 50, after: str | None = None
    ) -> list[WorkflowInfo]:
        return await self._inner.list_status(status=status, limit=limit, after=after)

    async def workflows(self, *, after: str | None = None, limit: int = 1000) -> list[str]:
        return await self._inner.workflows(after=after, limit=limit)

    def _cataloguing(self) -> Cataloguing:
        if not isinstance(self._inner, Cataloguing):
            raise ConfigurationError(f"{type(self._inner).__name__} keeps no workflow catalog")
        return self._inner

    async def catalog(self, workflow: str, entry: CatalogEntry) -> None:
        await self._cataloguing().catalog(workflow, entry)

    async def catalog_many(self, entries: Sequence[tuple[str, CatalogEntry]]) -> None:
        await self._cataloguing().catalog_many(entries)

    async def listed(
        self, line: Line, *, before: Mark | None = None, since_us: int = 0, limit: int = 100
    ) -> list[Listed]:
        return await self._cataloguing().listed(line, before=before, since_us=since_us, limit=limit)

    async def repair_catalog(self, *, limit: int = 500) -> int:
        return await self._cataloguing().repair_catalog(limit=limit)

    async def tally(self, tenant: str | None = None) -> dict[tuple[str, WorkflowStatus], int]:
        return await self._cataloguing().tally(tenant)

    async def finished_per_minute(self) -> dict[str, list[Minute]]:
        return await self._cataloguing().finished_per_minute()

    async def sweep(
        self,
        *,
        finished_before: datetime,
        limit: int = 1000,
        on_swept: Callable[[str], Awaitable[None]] | None = None,
    ) -> int:
        return await self._inner.sweep(
            finished_before=finished_before, limit=limit, on_swept=on_swept
        )


class ClaimCheckedDurable(Generic[EffectT]):
    """A `Durable` whose ``checkpointer`` is claim-checked and whose ``arrive`` and
    ``deliver`` put a large value in the claim-check store before the inner store's
    (atomic, where it is) write-and-wake."""

    def __init__(self, inner: Durable[EffectT], claims: ClaimCheckPolicy) -> None:
        self._inner = inner
        self._claims = claims
        self._checkpointer = ClaimCheckedCheckpointer(inner.checkpointer, claims)

    @property
    def inner(self) -> Durable[EffectT]:
        """The wrapped durable."""
        return self._inner

    @property
    def checkpointer(self) -> ClaimCheckedCheckpointer[EffectT]:
        return self._checkpointer

    @property
    def scheduler(self) -> Scheduler:
        return self._inner.scheduler

    async def arrive(
        self,
        workflow: str,
        key: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
    ) -> Recorded[object]:
        return await checked_write(
            self._claims,
            self._checkpointer.codec,
            value,
            lambda v: self._inner.arrive(workflow, key, v, tenant=tenant, priority=priority),
        )

    async def deliver(
        self,
        workflow: str,
        value: object,
        *,
        tenant: str | None = None,
        priority: int | None = None,
        unless_finished: bool = False,
    ) -> Entry:
        return await checked_entry(
            self._claims,
            self._checkpointer.codec,
            value,
            lambda v: self._inner.deliver(
                workflow, v, tenant=tenant, priority=priority, unless_finished=unless_finished
            ),
        )

    async def delete(self, workflow: str) -> int:
        return await self._inner.delete(workflow)

    async def close(self) -> None:
        """Close the wrapped durable (the claim-check store is the policy's owner's)."""
        await self._inner.close()


async def checked_write(
    claims: ClaimCheckPolicy,
    codec: CheckpointCodec,
    value: object,
    write: Callable[[object], Awaitable[Recorded[object]]],
) -> Recorded[object]:
    """``write`` of ``value`` as the policy stows it, its `Recorded` value read back."""
    stowed = await claims.stow(value, codec)
    recorded = await write(stowed.stored)
    return Recorded(await claims.unstow(recorded.value, codec, stowed), recorded.first)


async def checked_entry(
    claims: ClaimCheckPolicy,
    codec: CheckpointCodec,
    value: object,
    append: Callable[[object], Awaitable[Entry]],
) -> Entry:
    """``append`` of ``value`` as the policy stows it, the `Entry` value read back."""
    stowed = await claims.stow(value, codec)
    entry = await append(stowed.stored)
    return Entry(entry.key, await claims.unstow(entry.value, codec, stowed))


class ClaimCheckedQueue:
    """A `WorkQueue` whose payload fields over the policy's threshold travel as handles.

    ``enqueue`` puts large fields in the claim-check store and queues their heads with a
    manifest; ``claim`` (and ``enqueue``'s answer) hands the item back whole. The items
    ``heartbeat``, ``complete``, ``fail`` and ``dead_letters`` return carry the payload as
    stored (heads and manifest); `ClaimCheckPolicy.expand` reads one in full. A worker
    serves it by polling (the inner queue's pushed wakeups are not passed through).
    """

    def __init__(self, inner: WorkQueue, claims: ClaimCheckPolicy) -> None:
        self._inner = inner
        self._claims = claims

    @property
    def inner(self) -> WorkQueue:
        """The wrapped queue (it holds heads and manifests)."""
        return self._inner

    @property
    def claims(self) -> ClaimCheckPolicy:
        """The claim-check policy applied."""
        return self._claims

    @property
    def policy(self) -> QueuePolicy:
        return self._inner.policy

    async def enqueue(self, item: WorkItem, *, dedupe_ttl: float | None = None) -> WorkItem:
        stowed = await self._claims.stow_payload(item.payload)
        if stowed == item.payload:
            return await self._inner.enqueue(item, dedupe_ttl=dedupe_ttl)
        queued = await self._inner.enqueue(
            item.model_copy(update={"payload": stowed}), dedupe_ttl=dedupe_ttl
        )
        if queued.payload == stowed:
            return queued.model_copy(update={"payload": item.payload})
        return await self._claims.expand(queued)  # a live duplicate, queued before

    async def enqueue_many(
        self, items: Sequence[WorkItem], *, dedupe_ttl: float | None = None
    ) -> list[WorkItem]:
        stowed = [await self._claims.stow_payload(item.payload) for item in items]
        queued = await self._inner.enqueue_many(
            [
                item if payload == item.payload else item.model_copy(update={"payload": payload})
                for item, payload in zip(items, stowed, strict=True)
            ],
            dedupe_ttl=dedupe_ttl,
        )
        answers: list[WorkItem] = []
        for item, payload, answer in zip(items, stowed, queued, strict=True):
            if answer.payload == payload and answer.id == item.id and answer.tenant == item.tenant:
                answers.append(answer.model_copy(update={"payload": item.payload}))
            else:  # a live duplicate, queued before
                answers.append(await self._claims.expand(answer))
        return answers

    async def claim(
        self, *, worker: str, queue: str = DEFAULT_QUEUE, lease_seconds: float | None = None
    ) -> WorkItem | None:
        item = await self._inner.claim(worker=worker, queue=queue, lease_seconds=lease_seconds)
        return None if item is None else await self._claims.expand(item)

    async def heartbeat(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        return await self._inner.heartbeat(item_id, tenant=tenant, worker=worker)

    async def complete(self, item_id: str, *, tenant: str, worker: str) -> WorkItem:
        return await self._inner.complete(item_id, tenant=tenant, worker=worker)

    async def fail(
        self,
        item_id: str,
        *,
        tenant: str,
        worker: str,
        error: str,
        retryable: bool = True,
        retry_at: float | None = None,
    ) -> WorkItem:
        return await self._inner.fail(
            item_id,
            tenant=tenant,
            worker=worker,
            error=error,
            retryable=retryable,
            retry_at=retry_at,
        )

    async def reap(self) -> Any:
        return await self._inner.reap()

    async def adopt(self, *, worker: str) -> Any:
        return await self._inner.adopt(worker=worker)

    async def dead_letters(
        self, *, tenant: str, limit: int = 50, queue: str | None = None
    ) -> list[WorkItem]:
        return await self._inner.dead_letters(tenant=tenant, limit=limit, queue=queue)

    async def dead_letter_page(
        self,
        *,
        tenant: str | None = None,
        queue: str | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> DeadLetterPage:
        return await self._inner.dead_letter_page(
            tenant=tenant, queue=queue, limit=limit, after=after
        )

    async def stats(self, *, queue: str = DEFAULT_QUEUE) -> QueueStats:
        return await self._inner.stats(queue=queue)

    async def last_tick(self, name: str) -> float | None:
        """The wrapped queue's schedule mark (cron schedules need no claim check)."""
        last: float | None = await self._inner_call("last_tick")(name)
        return last

    async def advance_tick(self, name: str, tick: float) -> tuple[bool, float | None]:
        """The wrapped queue's schedule mark (cron schedules need no claim check)."""
        advance = getattr(self._inner, "advance_tick", None)
        if advance is None:
            raise ConfigurationError(f"{type(self._inner).__name__} keeps no schedule ticks")
        moved: tuple[bool, float | None] = await advance(name, tick)
        return moved

    async def debounce(self, slot: str, workflow: str, args: str, due: float) -> str:
        """The wrapped queue's debounce slot (its arguments are the start record's)."""
        pending: str = await self._inner_call("debounce")(slot, workflow, args, due)
        return pending

    async def begin_debounced(self, slot: str, workflow: str, now: float) -> Begun:
        """The wrapped queue's debounce slot, taken by a workflow that is due."""
        begun: Begun = await self._inner_call("begin_debounced")(slot, workflow, now)
        return begun

    def _inner_call(self, name: str) -> Any:
        found = getattr(self._inner, name, None)
        if found is None:
            raise ConfigurationError(f"{type(self._inner).__name__} has no {name}")
        return found

    async def purge(self, *, queue: str, tenant: str | None = None) -> int:
        return await self._inner.purge(queue=queue, tenant=tenant)

    async def finished_per_minute(self, *, queues: Sequence[str]) -> dict[str, list[Minute]]:
        return await self._inner.finished_per_minute(queues=queues)

    async def purge_dead_letters(
        self, *, queue: str, tenant: str | None = None, item_id: str | None = None
    ) -> int:
        return await self._inner.purge_dead_letters(queue=queue, tenant=tenant, item_id=item_id)

    async def queue_names(self, *, limit: int = 1000) -> list[str]:
        return await self._inner.queue_names(limit=limit)

    async def close(self) -> None:
        """Close the wrapped queue (the claim-check store is the policy's owner's)."""
        await self._inner.close()


__all__ = [
    "ClaimCheckedCheckpointer",
    "ClaimCheckedDurable",
    "ClaimCheckedQueue",
    "checked_entry",
    "checked_write",
]
