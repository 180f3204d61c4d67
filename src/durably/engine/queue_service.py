"""The queue service: a `Worker`'s claim loop for one work queue name, its heartbeats
and its batched completions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from durably.engine.service import Instant, Service, ServiceContext, retryable
from durably.engine.settling import settle_within_lease
from durably.engine.tasks import cancel_requested, stop
from durably.errors import (
    DurablyError,
    LeaseLostError,
    StrayCancellationError,
)
from durably.otel import instruments
from durably.otel.api import tracing_on, watching
from durably.otel.tracing import Consuming, payload_carrier
from durably.redaction import mend_text
from durably.stores.work import WorkItem, WorkQueue, WorkState

Handler = Callable[[WorkItem], Awaitable[None]]
# A completion's answer: the completed item or why not, and an item claimed for its slot.
_Completed = tuple["WorkItem | DurablyError", "WorkItem | None"]

GATHER_SECONDS = 0.002
"""How long a busy queue service waits for more slots to free before it claims: one
batched claim then refills several slots (see `QueueService._gather_free_slots`)."""

COMPLETE_MOST = 100
"""The most completions one `complete_many` call of the Worker carries."""

SENDERS = 2
"""How many completion calls a queue service has in flight at once when the queue claims
with its completions (`complete_and_claim`); else one."""


class _WorkWaiter(Protocol):
    async def wait_for_work(self, queue: str, within: float) -> object: ...


class _WaitingClaimer(Protocol):
    async def claim_waiting(self, *, worker: str, queue: str, within: float) -> WorkItem | None: ...


_Attempt = tuple[asyncio.Future[None], list[LeaseLostError]]


class QueueService(Service):
    """Serves one work queue name of a `WorkQueue` with ``handler``."""

    def __init__(self, queue: WorkQueue, handler: Handler, name: str, concurrency: int) -> None:
        super().__init__(concurrency)
        self.queue = queue
        self.handler = handler
        self.name = name
        # The idle loop's waiting claim, which a stop (`nudge` once stopping) cancels.
        self._claiming: asyncio.Future[WorkItem | None] | None = None
        self._stopping = asyncio.Event()
        # The batched calls the queue offers, looked up once (each is optional).
        self._claim_many: Any = getattr(queue, "claim_many", None)
        self._complete_many: Any = getattr(queue, "complete_many", None)
        self._complete_and_claim: Any = getattr(queue, "complete_and_claim", None)
        # Completions waiting for the next `complete_many`, and the tasks sending them.
        self._completing: list[tuple[WorkItem, asyncio.Future[_Completed]]] = []
        self._senders: set[asyncio.Task[None]] = set()
        # Each item's running attempt here, by (tenant, id): its handler and lost-lease list.
        self._attempts: dict[tuple[str, str], _Attempt] = {}
        # Each item's consumer span while tracing, by (tenant, id), from `_handle` to its end.
        self._traces: dict[tuple[str, str], Consuming] = {}

    def fields(self, ctx: ServiceContext, item: WorkItem | None = None) -> dict[str, object]:
        fields: dict[str, object] = {"worker": ctx.worker, "queue": self.name}
        if item is not None:
            fields.update(item=item.id, tenant=item.tenant)
        return fields

    async def claim_one(self, ctx: ServiceContext) -> bool:
        # A queue with a batched claim fills every free slot in one round trip; each item
        # still gets its own lease, heartbeat and fenced settle. Only this loop starts work
        # in free slots (a completion's claims refill only the slots it frees), so the free
        # slots counted here can only grow while the claim is in flight.
        claim_many = self._claim_many
        if claim_many is not None:
            await self._gather_free_slots(ctx)
            if ctx.stopping.is_set():
                return True  # claim nothing more; `serve` sees the stop
        free = self.concurrency - len(self.inflight)
        if self._complete_and_claim is not None:
            free = min(free, self._batch_most())
        if free > 1 and claim_many is not None:
            batch: list[WorkItem] = await claim_many(worker=ctx.worker, queue=self.name, limit=free)
        else:
            item = await self.queue.claim(worker=ctx.worker, queue=self.name)
            batch = [] if item is None else [item]
        for item in batch:
            self._launch(ctx, item)
        return bool(batch)

    def _batch_most(self) -> int:
        """The most items one claim takes, and one completion call carries, when the queue
        claims with its completions (`complete_and_claim`): half the slots. Each half then
        refills its own slots as it completes, so one half's round trip is in flight while
        the other's items run, and neither the store nor this worker waits on the other."""
        return max(1, self.concurrency // 2)

    async def _gather_free_slots(self, ctx: ServiceContext) -> None:
        """While items are running, wait up to `GATHER_SECONDS` for half the slots to be
        free, so that one batched claim refills several slots rather than one claim per
        finished item. An idle service (nothing running) claims at once."""
        if not self.inflight:
            return
        wanted = self.concurrency // 2
        if self.concurrency - len(self.inflight) >= wanted:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GATHER_SECONDS
        timer = loop.call_later(GATHER_SECONDS, self._nudge.set)
        try:
            while (
                self.concurrency - len(self.inflight) < wanted
                and loop.time() < deadline
                and not ctx.stopping.is_set()
            ):
                self._nudge.clear()
                await self._nudge.wait()
        finally:
            timer.cancel()

    async def idle(self, ctx: ServiceContext) -> None:
        if getattr(self.queue, "claim_waiting", None) is not None:
            claimer: _WaitingClaimer = self.queue  # type: ignore[assignment]
            await self._claim_waiting(ctx, claimer)
            return
        waiter = getattr(self.queue, "wait_for_work", None)
        if waiter is None:
            await self._rest(ctx.poll_seconds)
        else:
            pushed: _WorkWaiter = self.queue  # type: ignore[assignment]
            await self._rest(ctx.poll_seconds, pushed.wait_for_work(self.name, ctx.poll_seconds))

    async def _claim_waiting(self, ctx: ServiceContext, claimer: _WaitingClaimer) -> None:
        """Wait up to ``poll_seconds`` for the queue to offer an item and start it: the
        queue claims in the same round trip as the wake-up. A slot is free (idle runs only
        after a claim found nothing with a slot free), so only the stop cuts the wait
        short (`nudge`); an item the cut-off claim took is given back by the shutdown's
        `adopt`. The claim is awaited directly, so an item starts one loop turn after its
        reply; a failed claim propagates to `serve`, which logs it and waits."""
        claiming = asyncio.ensure_future(
            claimer.claim_waiting(worker=ctx.worker, queue=self.name, within=ctx.poll_seconds)
        )
        self._claiming, self._stopping = claiming, ctx.stopping
        if ctx.stopping.is_set():
            self.nudge()
        try:
            item = await claiming
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this loop itself is cancelled
            return  # the stop cancelled the claim
        finally:
            self._claiming = None
        if item is not None:
            self._launch(ctx, item)

    def nudge(self) -> None:
        super().nudge()
        claiming = self._claiming
        if claiming is None or claiming.done() or not self._stopping.is_set():
            return
        claiming.cancel()
        # Cancel until it ends: Python 3.11's `asyncio.wait_for` drops a cancel that lands
        # just as a client opens a connection, and the blocking call would then run out its
        # whole wait.
        asyncio.get_running_loop().call_later(0.05, self.nudge)

    def _launch(self, ctx: ServiceContext, item: WorkItem) -> None:
        """Start ``item``'s handler and its slot in the same loop turn, the handler first,
        so it begins on the next turn rather than one after the slot's (about 0.1 ms of an
        idle worker's wake-up). The handler never outlives its slot."""
        handling = [self._handle(ctx, item)]
        slot = self.start(self._work(ctx, item, handling))
        slot.add_done_callback(lambda _: handling[0].cancel())

    def _handle(self, ctx: ServiceContext, item: WorkItem) -> asyncio.Future[None]:
        """``item``'s handler, started."""
        if ctx.logger.isEnabledFor(logging.DEBUG):  # the fields cost more than the check
            ctx.logger.debug(
                "claimed work item %r of tenant %r",
                item.id,
                item.tenant,
                extra=self.fields(ctx, item),
            )
        token = None
        if watching():
            instruments.item_event("claimed", self.name, item.tenant)
            if tracing_on():
                # The handler's task copies the current context as it is made: the span
                # is current for it, continuing the trace its producer stored with it.
                trace = Consuming(
                    self.name,
                    payload_carrier(item.payload),
                    {
                        "messaging.message.id": item.id,
                        "durably.tenant": item.tenant,
                        "durably.attempt": item.attempts + 1,
                        "durably.worker": ctx.worker,
                    },
                )
                self._traces[(item.tenant, item.id)] = trace
                token = trace.attach()
        try:
            return asyncio.ensure_future(self.handler(item))
        except Exception as exc:  # failed before returning an awaitable: settled as a failure
            failed = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return failed
        finally:
            if token is not None:
                Consuming.detach(token)

    async def _work(
        self, ctx: ServiceContext, item: WorkItem, handling: list[asyncio.Future[None]]
    ) -> None:
        """Serve one slot: ``item`` (its handler in ``handling``), then each item the queue
        claimed for this slot in the same round trip as the completion."""
        while True:
            lost: list[LeaseLostError] = []
            attempt = (handling[0], lost)
            key = self._begin(ctx, item, attempt)
            trace = self._traces.pop(key, None) if self._traces else None
            try:
                following = await self._work_one(ctx, item, handling[0], lost, trace)
            finally:
                if self._attempts.get(key) is attempt:
                    del self._attempts[key]
                if trace is not None:
                    trace.end()
            if following is None:
                return
            item = following
            handling[0] = self._handle(ctx, item)

    def _begin(self, ctx: ServiceContext, item: WorkItem, attempt: _Attempt) -> tuple[str, str]:
        """Note ``attempt`` as ``item``'s running one here, stopping an older attempt of
        the same item still running here: its lease lapsed and was reaped before a
        heartbeat could see it (the loop was blocked, say), and under the same worker name
        no settle could tell the two apart. Returns the key it is noted under."""
        key = (item.tenant, item.id)
        older = self._attempts.get(key)
        if older is not None:
            older_handling, older_lost = older
            older_lost.append(LeaseLostError(item.id, ctx.worker, ctx.worker, "expired"))
            older_handling.cancel()
        self._attempts[key] = attempt
        return key

    async def _work_one(
        self,
        ctx: ServiceContext,
        item: WorkItem,
        handling: asyncio.Future[None],
        lost: list[LeaseLostError],
        trace: Consuming | None = None,
    ) -> WorkItem | None:
        """Run the handler under a heartbeat, then settle: complete, fail, or (lease lost,
        shutdown) leave the item for the queue to hand out again. A lease lost is noted in
        ``lost``, the outcome in ``trace``. Returns the item claimed for this slot with the
        completion, if any."""
        fields = self.fields(ctx, item)
        held = [item]  # as the last heartbeat left it: the lease a settle may retry within
        # Most items end long before their first beat: a timer starts the heartbeat task
        # only once it is due, so a short item costs no task of its own.
        beating: list[asyncio.Task[None]] = []
        timer = asyncio.get_running_loop().call_later(
            self._beat_seconds(),
            lambda: beating.append(asyncio.create_task(self._heartbeat(ctx, held, handling, lost))),
        )
        try:
            await handling
        except asyncio.CancelledError:
            if cancel_requested():
                if trace is not None:
                    trace.outcome = "given_back"
                raise  # shutdown: the worker gives the item back with `adopt`
            if not lost:
                # Nobody cancelled it: a failure of this attempt, not an item left held.
                stray = StrayCancellationError("a work item's handler")
                await self._settle_failure(ctx, held[0], stray, fields, trace)
                return None
        except Exception as exc:
            if not lost:
                await self._settle_failure(ctx, held[0], exc, fields, trace)
                return None
        finally:
            timer.cancel()
            for task in beating:
                await stop(task)
        if lost:
            # However the handler ended (cancelled, or it swallowed the cancel), the item
            # is no longer this attempt's to settle: a reap may have handed it to a newer
            # attempt, even under this worker's name, which a settle could not tell apart.
            ctx.logger.warning(
                "lost the lease on work item %r of tenant %r; its handler was cancelled (%s)",
                item.id,
                item.tenant,
                lost[0].reason,
                extra=fields,
            )
            self._lease_lost(item, trace)
            return None
        handed: list[WorkItem] = []
        try:
            await settle_within_lease(
                lambda: self._complete(ctx, item, handed),
                lease_expires_at=held[0].lease_expires_at,
                clock=ctx.clock,
                logger=ctx.logger,
                what="complete a work item",
                fields=fields,
            )
        except LeaseLostError as exc:
            ctx.logger.warning(
                "work item %r of tenant %r finished after its lease was lost (%s); not completed",
                item.id,
                item.tenant,
                exc.reason,
                extra=fields,
            )
            self._lease_lost(item, trace)
        except Exception:
            ctx.logger.exception(
                "could not complete work item %r of tenant %r", item.id, item.tenant, extra=fields
            )
        else:
            ctx.logger.info(
                "completed work item %r of tenant %r", item.id, item.tenant, extra=fields
            )
            instruments.item_event("completed", self.name, item.tenant)
            if trace is not None:
                trace.outcome = "completed"
        for extra in handed[1:]:  # a settle tried again was handed one more: its own slot
            self._launch(ctx, extra)
        return handed[0] if handed else None

    async def _complete(
        self, ctx: ServiceContext, item: WorkItem, handed: list[WorkItem]
    ) -> WorkItem:
        """Complete ``item``, batched with the others finishing meanwhile when the queue
        has `complete_many` (each still fenced on its own lease); raises as `complete`. An
        item the queue claimed for this slot in the same round trip goes in ``handed``."""
        complete_many = self._complete_many
        if complete_many is None:
            return await self.queue.complete(item.id, tenant=item.tenant, worker=ctx.worker)
        answer: asyncio.Future[_Completed] = asyncio.get_running_loop().create_future()
        self._completing.append((item, answer))
        claims = self._complete_and_claim
        if len(self._senders) < (SENDERS if claims is not None else 1):
            sender = asyncio.create_task(self._send_completions(ctx, complete_many, claims))
            self._senders.add(sender)
            sender.add_done_callback(self._senders.discard)
        result, following = await answer
        if following is not None:
            handed.append(following)
        if isinstance(result, DurablyError):
            raise result
        return result

    async def _send_completions(self, ctx: ServiceContext, complete_many: Any, claims: Any) -> None:
        """Send the waiting completions until none wait, one call at a time per sender:
        those that finish while a batch is in flight go together in the next (or, with a
        queue that claims with its completions, out with a second sender at once). While
        the worker runs, a queue with `complete_and_claim` claims as many items as the
        batch frees slots, in the same round trip, each handed to a finishing slot."""
        batch: list[tuple[WorkItem, asyncio.Future[_Completed]]] = []
        try:
            await asyncio.sleep(0)  # those finishing in this same loop turn join the first
            most = COMPLETE_MOST if claims is None else self._batch_most()
            while self._completing:
                batch = self._completing[:most]
                del self._completing[:most]
                pairs = [(item.id, item.tenant) for item, _ in batch]
                claimed: list[WorkItem] = []
                try:
                    if claims is not None and not ctx.stopping.is_set():
                        results, claimed = await claims(
                            pairs, worker=ctx.worker, queue=self.name, limit=len(batch)
                        )
                    else:
                        results = await complete_many(pairs, worker=ctx.worker)
                except Exception as exc:  # every waiter sees it, and may try again
                    for _, answer in batch:
                        if not answer.done():
                            answer.set_exception(exc)
                    continue
                handing = iter(claimed)
                for (_, answer), result in zip(batch, results, strict=True):
                    if not answer.done():
                        answer.set_result((result, next(handing, None)))
                for left in handing:  # its waiter is gone (cancelled at shutdown)
                    if not ctx.stopping.is_set():
                        self._launch(ctx, left)  # else the shutdown's `adopt` gives it back
        finally:
            # Only when this task itself was cancelled: its waiters end with it.
            for _, answer in [*batch, *self._completing]:
                answer.cancel()
            self._completing = []

    async def _settle_failure(
        self,
        ctx: ServiceContext,
        item: WorkItem,
        exc: Exception,
        fields: dict[str, object],
        trace: Consuming | None = None,
    ) -> None:
        try:
            settled = await settle_within_lease(
                lambda: self.queue.fail(
                    item.id,
                    tenant=item.tenant,
                    worker=ctx.worker,
                    error=repr(exc),  # every queue keeps it mended (redaction.mend_text)
                    retryable=retryable(exc),
                ),
                lease_expires_at=item.lease_expires_at,
                clock=ctx.clock,
                logger=ctx.logger,
                what="record a work item's failure",
                fields=fields,
            )
        except LeaseLostError as lost:
            ctx.logger.warning(
                "work item %r of tenant %r failed after its lease was lost (%s)",
                item.id,
                item.tenant,
                lost.reason,
                extra=fields,
            )
            self._lease_lost(item, trace)
        except Exception:
            ctx.logger.exception(
                "could not record the failure of work item %r of tenant %r",
                item.id,
                item.tenant,
                extra=fields,
            )
        else:
            dead = settled.state is WorkState.DEAD_LETTERED
            instruments.item_event("failed", self.name, item.tenant)
            instruments.item_event("dead_lettered" if dead else "retried", self.name, item.tenant)
            if trace is not None:
                trace.outcome = "dead_lettered" if dead else "retrying"
                trace.set("durably.error", mend_text(repr(exc), "error"))
            extra = {**fields, "attempt": settled.attempts, "state": settled.state.value}
            again = ""
            if not dead and settled.available_at is not None:
                extra["retry_at"] = str(Instant(settled.available_at))
                again = f"; retrying at {extra['retry_at']}"
            ctx.logger.warning(
                "work item %r of tenant %r failed (attempt %d, now %s%s): %s",
                item.id,
                item.tenant,
                settled.attempts,
                settled.state.value,
                again,
                mend_text(repr(exc), "error"),  # as the queue keeps it: secrets masked
                extra=extra,
            )

    def _lease_lost(self, item: WorkItem, trace: Consuming | None) -> None:
        """Count ``item``'s lease as lost and say so on its span."""
        instruments.lease_lost(item.tenant, queue=self.name)
        if trace is not None:
            trace.outcome = "lease_lost"

    async def _heartbeat(
        self,
        ctx: ServiceContext,
        held: list[WorkItem],
        handling: asyncio.Future[None],
        lost: list[LeaseLostError],
    ) -> None:
        """Renew the lease now and every `_beat_seconds` after, until cancelled or lost."""
        interval = self._beat_seconds()
        item = held[0]
        while True:
            try:
                held[0] = await self.queue.heartbeat(item.id, tenant=item.tenant, worker=ctx.worker)
            except LeaseLostError as exc:
                lost.append(exc)
                handling.cancel()
                return
            except Exception:
                ctx.logger.exception("heartbeat failed; retrying", extra=self.fields(ctx, item))
            await asyncio.sleep(interval)

    def _beat_seconds(self) -> float:
        """A third of the lease, so one slow round trip cannot let it lapse."""
        return self.queue.policy.lease_for(None) / 3


__all__ = ["COMPLETE_MOST", "GATHER_SECONDS", "SENDERS", "Handler", "QueueService"]
