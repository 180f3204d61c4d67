"""What a `Worker` runs for each registration: a claim loop per work queue and per workflow
kind, each with its own concurrency limit, and the keep-alive that holds a long item or pass.

Waiting (polls, heartbeats, grace) is in real seconds on the event loop; every timestamp
the worker hands a store (backoff deadlines, `wake_due`) comes from the injected `Clock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from durably.clock import Clock
from durably.errors import (
    ConfigurationError,
    Contended,
    DurablyError,
    Fenced,
    LeaseLostError,
    StrayCancellationError,
    WorkflowStopped,
)
from durably.redaction import mend_text
from durably.runtime import Run, resume
from durably.settling import settle_within_lease
from durably.status import WorkflowStatus
from durably.tasks import cancel_requested, stop
from durably.validation import positive_int
from durably.work import QueuePolicy, WorkItem, WorkQueue
from durably.workflows import (
    Blocked,
    Completed,
    Delivery,
    Durable,
    Finish,
    Pass,
    Sleeping,
    finish_workflow,
    value_refused,
)

Handler = Callable[[WorkItem], Awaitable[None]]
# A completion's answer: the completed item or why not, and an item claimed for its slot.
_Completed = tuple["WorkItem | DurablyError", "WorkItem | None"]
Body = Callable[[Run], Awaitable[object]]

# How soon a delivery given back at shutdown becomes visible: "at once", but `extend` only
# takes a positive duration, and extending (unlike `make_ready`) never revives a workflow
# that was deleted meanwhile.
GIVE_BACK_SECONDS = 0.001

CONTENDED_TRIES = 10
"""How often per ``alive`` window a workflow another pass holds is tried again: the
holder's claim, if its worker died, lapses within one window, so the takeover follows
within a tenth of a window (not a whole scheduler lease later)."""

GATHER_SECONDS = 0.002
"""How long a busy queue service waits for more slots to free before it claims: one
batched claim then refills several slots (see `QueueService._gather_free_slots`)."""

COMPLETE_MOST = 100
"""The most completions one `complete_many` call of the Worker carries."""

SENDERS = 2
"""How many completion calls a queue service has in flight at once when the queue claims
with its completions (`complete_and_claim`); else one."""

RECOVERED = "a pass ended without reporting: its worker died or lost its claim"
"""The error a recovered pass reports (workflows served with ``max_recoveries``)."""


@dataclass(slots=True)
class Context:
    """What every service shares with the worker that runs it."""

    worker: str
    clock: Clock
    logger: logging.Logger
    poll_seconds: float
    stopping: asyncio.Event
    note_due: Callable[[float], None]
    fatal: Callable[[BaseException], None]


def retryable(exc: BaseException) -> bool:
    """Whether a failure may go away on its own: a durably error says so, anything else may."""
    return bool(exc.retryable) if isinstance(exc, DurablyError) else True


class Instant:
    """An instant in seconds since the epoch, shown in log lines as UTC ISO 8601 (built
    only when a line is written)."""

    __slots__ = ("epoch",)

    def __init__(self, epoch: float) -> None:
        self.epoch = epoch

    def __str__(self) -> str:
        return datetime.fromtimestamp(self.epoch, UTC).isoformat(timespec="milliseconds")


class _WorkWaiter(Protocol):
    async def wait_for_work(self, queue: str, within: float) -> object: ...


class _WaitingClaimer(Protocol):
    async def claim_waiting(self, *, worker: str, queue: str, within: float) -> WorkItem | None: ...


class Service:
    """A claim loop with a concurrency limit: claims only while a slot is free."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = positive_int(concurrency, "concurrency")
        self.inflight: set[asyncio.Task[None]] = set()
        self.peak = 0
        # Set when a slot frees up or the worker stops: the claim loop waits on it.
        self._nudge = asyncio.Event()

    def reset(self) -> None:
        """Forget the last run's wake-ups (before serving again)."""
        self._nudge = asyncio.Event()

    def nudge(self) -> None:
        """Wake the claim loop (a slot freed, or the worker is stopping)."""
        self._nudge.set()

    def start(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``work`` in a slot; the slot frees itself when it ends."""
        task = asyncio.create_task(work)
        self.inflight.add(task)
        self.peak = max(self.peak, len(self.inflight))
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[None]) -> None:
        self.inflight.discard(task)
        self._nudge.set()

    async def serve(self, ctx: Context) -> None:
        """Claim and start work until the worker stops; store errors are logged and waited out."""
        while not ctx.stopping.is_set():
            self._nudge.clear()
            if len(self.inflight) >= self.concurrency:
                await self._nudge.wait()  # backpressure: no claim without a free slot
                continue
            try:
                if not await self.claim_one(ctx):
                    await self.idle(ctx)  # a waiting claim fails here like any other
            except ConfigurationError as exc:
                ctx.fatal(exc)
                return
            except Exception:
                ctx.logger.exception("claiming failed; retrying", extra=self.fields(ctx))
                await self._rest(ctx.poll_seconds)

    async def claim_one(self, ctx: Context) -> bool:
        """Claim one unit of work and start it; False if there was none."""
        raise NotImplementedError

    async def idle(self, ctx: Context) -> None:
        """Wait for work after finding none."""
        await self._rest(ctx.poll_seconds)

    def fields(self, ctx: Context) -> dict[str, object]:
        """The structured-logging fields naming this service."""
        return {"worker": ctx.worker}

    async def _rest(self, seconds: float, also: Awaitable[object] | None = None) -> None:
        """Wait ``seconds`` or until nudged (or until ``also`` finishes)."""
        waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(self._nudge.wait())]
        if also is not None:
            waits.append(asyncio.ensure_future(also))
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
            await asyncio.gather(*waits, return_exceptions=True)


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

    def fields(self, ctx: Context, item: WorkItem | None = None) -> dict[str, object]:
        fields: dict[str, object] = {"worker": ctx.worker, "queue": self.name}
        if item is not None:
            fields.update(item=item.id, tenant=item.tenant)
        return fields

    async def claim_one(self, ctx: Context) -> bool:
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

    async def _gather_free_slots(self, ctx: Context) -> None:
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

    async def idle(self, ctx: Context) -> None:
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

    async def _claim_waiting(self, ctx: Context, claimer: _WaitingClaimer) -> None:
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

    def _launch(self, ctx: Context, item: WorkItem) -> None:
        """Start ``item``'s handler and its slot in the same loop turn, the handler first,
        so it begins on the next turn rather than one after the slot's (about 0.1 ms of an
        idle worker's wake-up). The handler never outlives its slot."""
        handling = [self._handle(ctx, item)]
        slot = self.start(self._work(ctx, item, handling))
        slot.add_done_callback(lambda _: handling[0].cancel())

    def _handle(self, ctx: Context, item: WorkItem) -> asyncio.Future[None]:
        """``item``'s handler, started."""
        if ctx.logger.isEnabledFor(logging.DEBUG):  # the fields cost more than the check
            ctx.logger.debug("claimed work item", extra=self.fields(ctx, item))
        try:
            return asyncio.ensure_future(self.handler(item))
        except Exception as exc:  # failed before returning an awaitable: settled as a failure
            failed = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return failed

    async def _work(
        self, ctx: Context, item: WorkItem, handling: list[asyncio.Future[None]]
    ) -> None:
        """Serve one slot: ``item`` (its handler in ``handling``), then each item the queue
        claimed for this slot in the same round trip as the completion."""
        while True:
            lost: list[LeaseLostError] = []
            attempt = (handling[0], lost)
            key = self._begin(ctx, item, attempt)
            try:
                following = await self._work_one(ctx, item, handling[0], lost)
            finally:
                if self._attempts.get(key) is attempt:
                    del self._attempts[key]
            if following is None:
                return
            item = following
            handling[0] = self._handle(ctx, item)

    def _begin(self, ctx: Context, item: WorkItem, attempt: _Attempt) -> tuple[str, str]:
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
        ctx: Context,
        item: WorkItem,
        handling: asyncio.Future[None],
        lost: list[LeaseLostError],
    ) -> WorkItem | None:
        """Run the handler under a heartbeat, then settle: complete, fail, or (lease lost,
        shutdown) leave the item for the queue to hand out again. A lease lost is noted in
        ``lost``. Returns the item claimed for this slot with the completion, if any."""
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
                raise  # shutdown: the worker gives the item back with `adopt`
            if not lost:
                # Nobody cancelled it: a failure of this attempt, not an item left held.
                stray = StrayCancellationError("a work item's handler")
                await self._settle_failure(ctx, held[0], stray, fields)
                return None
        except Exception as exc:
            if not lost:
                await self._settle_failure(ctx, held[0], exc, fields)
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
                "lost the lease on a work item; its handler was cancelled (%s)",
                lost[0].reason,
                extra=fields,
            )
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
                "work item finished after its lease was lost (%s); not completed",
                exc.reason,
                extra=fields,
            )
        except Exception:
            ctx.logger.exception("could not complete a work item", extra=fields)
        else:
            ctx.logger.info("completed work item", extra=fields)
        for extra in handed[1:]:  # a settle tried again was handed one more: its own slot
            self._launch(ctx, extra)
        return handed[0] if handed else None

    async def _complete(self, ctx: Context, item: WorkItem, handed: list[WorkItem]) -> WorkItem:
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

    async def _send_completions(self, ctx: Context, complete_many: Any, claims: Any) -> None:
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
        self, ctx: Context, item: WorkItem, exc: Exception, fields: dict[str, object]
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
                "work item failed after its lease was lost (%s)", lost.reason, extra=fields
            )
        except Exception:
            ctx.logger.exception("could not record a work item's failure", extra=fields)
        else:
            ctx.logger.warning(
                "work item failed (attempt %d, now %s): %s",
                settled.attempts,
                settled.state.value,
                mend_text(repr(exc), "error"),  # as the queue keeps it: secrets masked
                extra=fields,
            )

    async def _heartbeat(
        self,
        ctx: Context,
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


class WorkflowService(Service):
    """Serves one workflow kind: deliveries from ``durable.scheduler``, passes of ``body``."""

    def __init__(
        self,
        kind: str,
        body: Body,
        durable: Durable[Any],
        *,
        concurrency: int,
        policy: QueuePolicy,
        budget: float,
        alive: float,
        max_recoveries: int | None = None,
    ) -> None:
        super().__init__(concurrency)
        self.kind = kind
        self.body = body
        self.durable = durable
        self.policy = policy
        self.budget = budget
        self.alive = alive
        self.max_recoveries = (
            None if max_recoveries is None else positive_int(max_recoveries, "max_recoveries")
        )

    def fields(self, ctx: Context, workflow: str | None = None) -> dict[str, object]:
        fields: dict[str, object] = {"worker": ctx.worker, "kind": self.kind}
        if workflow is not None:
            fields["workflow"] = workflow
        return fields

    async def claim_one(self, ctx: Context) -> bool:
        asked = asyncio.get_running_loop().time()
        delivery = await self.durable.scheduler.next_ready(ctx.poll_seconds)
        if delivery is None:
            # next_ready waits for a wakeup itself; rest only if it came back early.
            waited = asyncio.get_running_loop().time() - asked
            return waited >= ctx.poll_seconds / 2
        if ctx.stopping.is_set():
            await self._give_back(ctx, delivery)
            return True
        self.start(self._pass(ctx, delivery))
        return True

    async def serve_one(self, ctx: Context, delivery: Delivery) -> None:
        """Run one pass for ``delivery`` now, as the claim loop does in a slot (used to
        drive workflows step by step, e.g. `durably.App.run_until_idle`)."""
        await self._pass(ctx, delivery)

    async def _pass(self, ctx: Context, delivery: Delivery) -> None:
        """One pass: claim, run the body under renewal, report the outcome, release."""
        fields = self.fields(ctx, delivery.workflow)
        checkpointer = self.durable.checkpointer
        try:
            holder = await checkpointer.claim(delivery.workflow, self.budget, self.alive)
        except Exception:
            ctx.logger.exception("claiming a workflow failed", extra=fields)
            return
        if holder is None:
            # Another pass holds it. If that pass's worker died, its claim lapses within one
            # `alive` window of its last renewal, maybe just after this delivery came back:
            # try again soon rather than a whole scheduler lease later.
            ctx.logger.debug("workflow is held by another pass", extra=fields)
            with contextlib.suppress(Exception):
                await self.durable.scheduler.extend(delivery, self.alive / CONTENDED_TRIES)
            return
        claim_lost = False
        try:
            claim_lost = await self._run_pass(ctx, delivery, holder, fields)
        except (Fenced, Contended):
            ctx.logger.info("workflow pass was superseded; dropped", extra=fields)
        except asyncio.CancelledError:
            # Shutdown: release first, so the worker that takes the delivery can claim.
            await self._release(ctx, holder, fields)
            await self._give_back(ctx, delivery)
            raise
        except Exception:
            ctx.logger.exception("workflow pass could not report its outcome", extra=fields)
        await self._release(ctx, holder, fields)
        if claim_lost:
            await self._give_back(ctx, delivery)

    async def _run_pass(
        self, ctx: Context, delivery: Delivery, holder: Pass, fields: dict[str, object]
    ) -> bool:
        """Run the body and report how it ended; True if the claim was lost meanwhile."""
        checkpointer = self.durable.checkpointer
        info = await checkpointer.get_status(delivery.workflow)
        if info is not None and info.status is WorkflowStatus.PARKED:
            # No pass until it is resumed (which sets it pending): a message or a wakeup
            # that arrived meanwhile is kept for then, and runs nothing now.
            await self.durable.scheduler.done(delivery)
            ctx.logger.debug("workflow is parked: not run until resumed", extra=fields)
            return False
        attempts = info.attempts if info is not None else 0
        last_error = info.last_error if info is not None else None
        recovered = info is not None and info.status is WorkflowStatus.RUNNING
        if self.max_recoveries is not None and recovered:  # the last pass never reported
            attempts += 1
            last_error = RECOVERED
            if attempts > self.max_recoveries:
                await self._park_crashing(ctx, delivery, holder, attempts, fields)
                return False
        await checkpointer.set_status(
            holder, WorkflowStatus.RUNNING, attempts=attempts, error=last_error
        )
        runs: list[Run] = []
        passing = asyncio.create_task(
            resume(holder, checkpointer, self.body, clock=ctx.clock, on_run=runs.append)
        )
        lost: list[bool] = []
        keeping = asyncio.create_task(self._keep_alive(ctx, delivery, holder, passing, lost))
        try:
            outcome = await passing
        except asyncio.CancelledError:
            if not cancel_requested():
                if lost:
                    ctx.logger.warning("workflow pass lost its claim; cancelled", extra=fields)
                    return True
                # Nobody cancelled the body: a failed pass, retried as any other.
                stray = StrayCancellationError("a workflow body")
                await self._settle_failure(ctx, delivery, holder, attempts, stray, fields)
                return False
            if self.max_recoveries is not None:
                # Given back at shutdown: not a crash, so the next pass counts nothing.
                with contextlib.suppress(Exception):
                    await checkpointer.set_status(
                        holder, WorkflowStatus.PENDING, attempts=attempts, error=last_error
                    )
            raise
        except Exception as exc:
            await self._settle_failure(ctx, delivery, holder, attempts, exc, fields)
            return False
        finally:
            await stop(keeping)
        counts = (
            f"this pass: {runs[0].performed} steps run, {runs[0].replayed} replayed from records"
            if runs
            else ""
        )
        scheduler = self.durable.scheduler
        if isinstance(outcome, Completed):
            ending = outcome.value
            if isinstance(ending, Finish):
                # The body's last record and the status in one write where the store can.
                try:
                    await finish_workflow(
                        checkpointer,
                        holder,
                        ending.key,
                        ending.value,
                        attempts=attempts,
                        error=last_error,
                    )
                except Exception as exc:
                    if not value_refused(exc):
                        raise  # the store may take it on a later pass
                    # A result no store takes (too large, say) fails the workflow rather
                    # than leaving it running, every pass ending the same way.
                    unstored = DurablyError(f"the workflow's result was not stored: {exc}")
                    await self._settle_failure(ctx, delivery, holder, attempts, unstored, fields)
                    return False
            else:
                await checkpointer.set_status(
                    holder, WorkflowStatus.COMPLETED, attempts=attempts, error=last_error
                )
            await scheduler.done(delivery)
            ctx.logger.info("workflow completed (%s)", counts, extra=fields)
        elif isinstance(outcome, Sleeping):
            await checkpointer.set_status(
                holder, WorkflowStatus.SLEEPING, attempts=attempts, error=last_error
            )
            await scheduler.wake_at(delivery, outcome.due)
            ctx.note_due(outcome.due)
            ctx.logger.info(
                "workflow sleeps at %r until %s (%s)",
                outcome.key,
                Instant(outcome.due),
                counts,
                extra=fields,
            )
        elif isinstance(outcome, Blocked):
            await checkpointer.set_status(
                holder, WorkflowStatus.BLOCKED, attempts=attempts, error=last_error
            )
            waited = sorted(outcome.waiting | outcome.listening)
            if outcome.due is None:
                await scheduler.done(delivery)
                ctx.logger.info(
                    "workflow blocked waiting for %s (%s)", waited, counts, extra=fields
                )
            else:
                # A timeout beside the wait: run again at the deadline unless a value or
                # message makes the workflow ready first.
                await scheduler.wake_at(delivery, outcome.due)
                ctx.note_due(outcome.due)
                ctx.logger.info(
                    "workflow blocked waiting for %s until %s (%s)",
                    waited,
                    Instant(outcome.due),
                    counts,
                    extra=fields,
                )
        return False

    async def _park_crashing(
        self,
        ctx: Context,
        delivery: Delivery,
        holder: Pass,
        attempts: int,
        fields: dict[str, object],
    ) -> None:
        error = f"parked after {attempts} passes ended without reporting ({RECOVERED})"
        await self.durable.checkpointer.set_status(
            holder, WorkflowStatus.PARKED, attempts=attempts, error=error
        )
        await self.durable.scheduler.done(delivery)
        ctx.logger.error("workflow %s", error, extra=fields)

    async def _settle_failure(
        self,
        ctx: Context,
        delivery: Delivery,
        holder: Pass,
        attempts: int,
        exc: Exception,
        fields: dict[str, object],
    ) -> None:
        checkpointer = self.durable.checkpointer
        error = mend_text(repr(exc), "error")  # as stored: bounded, secrets masked
        if isinstance(exc, WorkflowStopped):
            # Parked or cancelled: no attempt used, no further pass until resumed.
            await checkpointer.set_status(
                holder, WorkflowStatus(exc.status), attempts=attempts, error=error
            )
            await self.durable.scheduler.done(delivery)
            ctx.logger.warning("workflow %s: %s", exc.status, error, extra=fields)
            return
        settled = self.policy.settle_failure(
            attempts, retryable=retryable(exc), now=ctx.clock.now()
        )
        if settled.dead or settled.available_at is None:
            await checkpointer.set_status(
                holder, WorkflowStatus.FAILED, attempts=settled.attempts, error=error
            )
            await self.durable.scheduler.done(delivery)
            ctx.logger.error(
                "workflow failed for good after %d attempt(s): %s",
                settled.attempts,
                error,
                extra=fields,
            )
            return
        await checkpointer.set_status(
            holder, WorkflowStatus.SLEEPING, attempts=settled.attempts, error=error
        )
        await self.durable.scheduler.wake_at(delivery, settled.available_at)
        ctx.note_due(settled.available_at)
        ctx.logger.warning(
            "workflow body failed (attempt %d); retrying at %s: %s",
            settled.attempts,
            Instant(settled.available_at),
            error,
            extra=fields,
        )

    async def _keep_alive(
        self,
        ctx: Context,
        delivery: Delivery,
        holder: Pass,
        passing: asyncio.Task[Any],
        lost: list[bool],
    ) -> None:
        """Renew the claim and keep the delivery hidden while the pass runs; cancel the
        pass if the claim is gone."""
        scheduler = self.durable.scheduler
        interval = min(self.alive, scheduler.lease) / 3
        while True:
            await asyncio.sleep(interval)
            try:
                if not await self.durable.checkpointer.renew(holder, self.alive):
                    lost.append(True)
                    passing.cancel()
                    return
                # False means a wakeup arrived meanwhile: the pass runs on, and the
                # wakeup is delivered again after it.
                await scheduler.extend(delivery, scheduler.lease)
            except Exception:
                ctx.logger.exception(
                    "renewing a workflow claim failed; retrying",
                    extra=self.fields(ctx, delivery.workflow),
                )

    async def _release(self, ctx: Context, holder: Pass, fields: dict[str, object]) -> None:
        try:
            await self.durable.checkpointer.release(holder)
        except Exception:
            ctx.logger.exception("releasing a workflow claim failed", extra=fields)

    async def _give_back(self, ctx: Context, delivery: Delivery) -> None:
        """Make a delivery this worker will not finish visible to other workers at once."""
        with contextlib.suppress(Exception):
            await self.durable.scheduler.extend(delivery, GIVE_BACK_SECONDS)
        ctx.logger.info("gave a workflow back", extra=self.fields(ctx, delivery.workflow))


__all__ = [
    "CONTENDED_TRIES",
    "GIVE_BACK_SECONDS",
    "RECOVERED",
    "Body",
    "Context",
    "Handler",
    "QueueService",
    "Service",
    "WorkflowService",
    "retryable",
]
