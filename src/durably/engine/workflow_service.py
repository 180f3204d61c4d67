"""The workflow service: a `Worker`'s claim loop for one workflow kind, running one pass of
the body per delivery, keeping its claim alive and settling how the pass ended.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from durably.engine.runtime import Execution, resume
from durably.engine.service import Instant, Service, ServiceContext, retryable
from durably.engine.tasks import cancel_requested, stop
from durably.errors import (
    Contended,
    DurablyError,
    Fenced,
    StrayCancellationError,
    WorkflowStopped,
)
from durably.otel.passes import Describe, PassProbe
from durably.redaction import mend_text
from durably.stores.backoff import Jitter, full_jitter_seconds
from durably.stores.status import WorkflowStatus
from durably.stores.work import QueuePolicy
from durably.stores.workflows import (
    Blocked,
    Completed,
    Delivery,
    Durable,
    Finish,
    Pass,
    Restart,
    Sleeping,
    finish_workflow,
    value_refused,
)
from durably.validation import positive_int

Body = Callable[[Execution], Awaitable[object]]

# How soon a delivery given back at shutdown becomes visible: "at once", but `extend` only
# takes a positive duration, and extending (unlike `make_ready`) never revives a workflow
# that was deleted meanwhile.
GIVE_BACK_SECONDS = 0.001

CONTENDED_TRIES = 10
"""How often per ``alive`` window, on average, a workflow another pass holds is tried
again: the holder's claim, if its worker died, lapses within one window, so the takeover
follows within about a tenth of a window (not a whole scheduler lease later)."""


def contended_wait(alive: float, jitter: Jitter) -> float:
    """How long a delivery whose workflow another pass holds stays hidden before it is
    tried again: ``uniform(0, 2 * alive / CONTENDED_TRIES)``, one draw of ``jitter``
    scaling the whole window (full jitter; a tenth of ``alive`` on average).

    The passes a dead worker held lapse together, and every worker that took one of their
    deliveries would otherwise try again at the same instants; spread over the window,
    their claims reach the store one by one. Never below `GIVE_BACK_SECONDS` (``extend``
    takes a positive duration).
    """
    window = 2 * alive / CONTENDED_TRIES
    return max(GIVE_BACK_SECONDS, full_jitter_seconds(window, 1, jitter))


RECOVERED = "a pass ended without reporting: its worker died or lost its claim"
"""The error a recovered pass reports (workflows served with ``max_recoveries``)."""


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
        describe: Describe | None = None,
    ) -> None:
        super().__init__(concurrency)
        self.describe = describe
        self.kind = kind
        self.body = body
        self.durable = durable
        self.policy = policy
        self.budget = budget
        self.alive = alive
        self.max_recoveries = (
            None if max_recoveries is None else positive_int(max_recoveries, "max_recoveries")
        )

    def fields(self, ctx: ServiceContext, workflow: str | None = None) -> dict[str, object]:
        fields: dict[str, object] = {"worker": ctx.worker, "kind": self.kind}
        if workflow is not None:
            fields["workflow"] = workflow
        return fields

    async def claim_one(self, ctx: ServiceContext) -> bool:
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

    async def serve_one(self, ctx: ServiceContext, delivery: Delivery) -> None:
        """Run one pass for ``delivery`` now, as the claim loop does in a slot (used to
        drive workflows step by step, e.g. `durably.App.run_until_idle`)."""
        await self._pass(ctx, delivery)

    async def _pass(self, ctx: ServiceContext, delivery: Delivery) -> None:
        """One pass: claim, run the body under renewal, report the outcome, release."""
        fields = self.fields(ctx, delivery.workflow)
        checkpointer = self.durable.checkpointer
        try:
            holder = await checkpointer.claim(delivery.workflow, self.budget, self.alive)
        except Exception:
            ctx.logger.exception("claiming workflow %r failed", delivery.workflow, extra=fields)
            return
        if holder is None:
            # Another pass holds it. If that pass's worker died, its claim lapses within one
            # `alive` window of its last renewal, maybe just after this delivery came back:
            # try again soon rather than a whole scheduler lease later.
            ctx.logger.debug("workflow %r is held by another pass", delivery.workflow, extra=fields)
            with contextlib.suppress(Exception):
                wait = contended_wait(self.alive, ctx.jitter)
                await self.durable.scheduler.extend(delivery, wait)
            return
        claim_lost = False
        probe = PassProbe(self.kind, delivery.workflow, ctx.worker) if PassProbe.wanted() else None
        error: BaseException | None = None
        try:
            claim_lost = await self._run_pass(ctx, delivery, holder, fields, probe)
        except (Fenced, Contended):
            _note(probe, "superseded")
            ctx.logger.info(
                "workflow pass of %r was superseded; dropped", delivery.workflow, extra=fields
            )
        except asyncio.CancelledError:
            _note(probe, "given_back")
            # Shutdown: release first, so the worker that takes the delivery can claim.
            await self._release(ctx, holder, fields)
            await self._give_back(ctx, delivery)
            raise
        except Exception as exc:
            _note(probe, "unreported")
            error = exc
            ctx.logger.exception(
                "workflow pass of %r could not report its outcome", delivery.workflow, extra=fields
            )
        finally:
            if probe is not None:
                probe.end(error)
        await self._release(ctx, holder, fields)
        if claim_lost:
            await self._give_back(ctx, delivery)

    async def _run_pass(
        self,
        ctx: ServiceContext,
        delivery: Delivery,
        holder: Pass,
        fields: dict[str, object],
        probe: PassProbe | None = None,
    ) -> bool:
        """Run the body and report how it ended; True if the claim was lost meanwhile.
        The outcome is noted in ``probe``."""
        workflow = delivery.workflow
        checkpointer = self.durable.checkpointer
        try:
            info = await checkpointer.get_status(delivery.workflow)
        except WorkflowStopped as unreadable:
            # A status row something else wrote (`UnreadableRecordError`): parked, with
            # why, in a status that reads again; no pass until it is resumed.
            await self._settle_failure(ctx, delivery, holder, 0, unreadable, fields, probe)
            return False
        if info is not None and info.status is WorkflowStatus.QUEUED:
            # Woken while its gate still queues it (a message sent to it): its gate makes
            # it ready when it admits it, and the message waits for then.
            await self.durable.scheduler.done(delivery)
            _note(probe, "queued")
            return False
        if info is not None and info.status is WorkflowStatus.PARKED:
            # No pass until it is resumed (which sets it pending): a message or a wakeup
            # that arrived meanwhile is kept for then, and runs nothing now.
            await self.durable.scheduler.done(delivery)
            _note(probe, "parked")
            ctx.logger.debug("workflow %r is parked: not run until resumed", workflow, extra=fields)
            return False
        attempts = info.attempts if info is not None else 0
        last_error = info.last_error if info is not None else None
        recovered = info is not None and info.status is WorkflowStatus.RUNNING
        if self.max_recoveries is not None and recovered:  # the last pass never reported
            attempts += 1
            last_error = RECOVERED
            if attempts > self.max_recoveries:
                _note(probe, "parked")
                await self._park_crashing(ctx, delivery, holder, attempts, fields)
                return False
        if info is None or not info.status.finished:
            await checkpointer.set_status(
                holder, WorkflowStatus.RUNNING, attempts=attempts, error=last_error
            )
        # else a wakeup after the end (a message or a child's end that arrived during the
        # last pass): the pass reports the same end, and the status never reopens meanwhile,
        # so a message sent then is refused rather than kept unread.
        runs: list[Execution] = []
        on_run = runs.append
        if probe is not None:
            describe = self.describe

            def on_run(run: Execution) -> None:
                runs.append(run)
                probe.begin(run.recorded, describe)

        # A step the body's branches still run when it ended may take what a step awaited
        # on its own could: the rest of the pass's budget (the claim is renewed meanwhile).
        passing = asyncio.create_task(
            resume(
                holder,
                checkpointer,
                self.body,
                clock=ctx.clock,
                on_run=on_run,
                drain=self.budget,
            )
        )
        lost: list[bool] = []
        keeping = asyncio.create_task(self._keep_alive(ctx, delivery, holder, passing, lost))
        try:
            try:
                outcome = await passing
            finally:
                if probe is not None:
                    probe.attach()  # the lines logged about this pass carry its trace
        except asyncio.CancelledError:
            if not cancel_requested():
                if lost:
                    _note(probe, "claim_lost")
                    if probe is not None:
                        probe.claim_lost()
                    ctx.logger.warning(
                        "workflow pass of %r lost its claim; cancelled", workflow, extra=fields
                    )
                    return True
                # Nobody cancelled the body: a failed pass, retried as any other.
                stray = StrayCancellationError("a workflow body")
                await self._settle_failure(ctx, delivery, holder, attempts, stray, fields, probe)
                return False
            if self.max_recoveries is not None:
                # Given back at shutdown: not a crash, so the next pass counts nothing.
                with contextlib.suppress(Exception):
                    await checkpointer.set_status(
                        holder, WorkflowStatus.PENDING, attempts=attempts, error=last_error
                    )
            raise
        except Exception as exc:
            await self._settle_failure(ctx, delivery, holder, attempts, exc, fields, probe)
            return False
        finally:
            await stop(keeping)
        counts = (
            f"this pass: {runs[0].performed} steps run, {runs[0].replayed} replayed from records"
            if runs
            else "this pass: no steps"
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
                    await self._settle_failure(
                        ctx, delivery, holder, attempts, unstored, fields, probe
                    )
                    return False
            elif isinstance(ending, Restart):
                # Begun afresh (continue-as-new): the new record and the PENDING status in
                # one write, then ready again. The wakeup made while this delivery is held
                # outlives its answer; a crash between the two leaves the delivery to come
                # back after its lease.
                await checkpointer.restart(holder, ending.key, ending.value, keep=ending.keep)
                await scheduler.make_ready(delivery.workflow)
                await scheduler.done(delivery)
                _note(probe, "continued")
                ctx.logger.info("workflow %r continues as new (%s)", workflow, counts, extra=fields)
                return False
            else:
                await checkpointer.set_status(
                    holder, WorkflowStatus.COMPLETED, attempts=attempts, error=last_error
                )
            await scheduler.done(delivery)
            _note(probe, "completed")
            ctx.logger.info("workflow %r completed (%s)", workflow, counts, extra=fields)
        elif isinstance(outcome, Sleeping):
            await checkpointer.set_status(
                holder, WorkflowStatus.SLEEPING, attempts=attempts, error=last_error
            )
            await scheduler.wake_at(delivery, outcome.due)
            ctx.note_due(outcome.due)
            _note(probe, "sleeping")
            due = str(Instant(outcome.due))
            ctx.logger.info(
                "workflow %r sleeps at %r until %s (%s)",
                workflow,
                outcome.key,
                due,
                counts,
                extra={**fields, "due": due},
            )
        elif isinstance(outcome, Blocked):
            await checkpointer.set_status(
                holder, WorkflowStatus.BLOCKED, attempts=attempts, error=last_error
            )
            waited = sorted(outcome.waiting | outcome.listening)
            _note(probe, "blocked")
            if outcome.due is None:
                await scheduler.done(delivery)
                ctx.logger.info(
                    "workflow %r blocked waiting for %s (%s)",
                    workflow,
                    ", ".join(waited),
                    counts,
                    extra=fields,
                )
            else:
                # A timeout beside the wait: run again at the deadline unless a value or
                # message makes the workflow ready first.
                await scheduler.wake_at(delivery, outcome.due)
                ctx.note_due(outcome.due)
                due = str(Instant(outcome.due))
                ctx.logger.info(
                    "workflow %r blocked waiting for %s until %s (%s)",
                    workflow,
                    ", ".join(waited),
                    due,
                    counts,
                    extra={**fields, "due": due},
                )
        return False

    async def _park_crashing(
        self,
        ctx: ServiceContext,
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
        ctx.logger.error("workflow %r %s", delivery.workflow, error, extra=fields)

    async def _settle_failure(
        self,
        ctx: ServiceContext,
        delivery: Delivery,
        holder: Pass,
        attempts: int,
        exc: Exception,
        fields: dict[str, object],
        probe: PassProbe | None = None,
    ) -> None:
        checkpointer = self.durable.checkpointer
        workflow = delivery.workflow
        error = mend_text(repr(exc), "error")  # as stored: bounded, secrets masked
        if isinstance(exc, WorkflowStopped):
            # Parked or cancelled: no attempt used, no further pass until resumed.
            await checkpointer.set_status(
                holder, WorkflowStatus(exc.status), attempts=attempts, error=error
            )
            await self.durable.scheduler.done(delivery)
            _note(probe, str(exc.status))
            ctx.logger.warning("workflow %r %s: %s", workflow, exc.status, error, extra=fields)
            return
        settled = self.policy.settle_failure(
            attempts, retryable=retryable(exc), now=ctx.clock.now()
        )
        if settled.dead or settled.available_at is None:
            await checkpointer.set_status(
                holder, WorkflowStatus.FAILED, attempts=settled.attempts, error=error
            )
            await self.durable.scheduler.done(delivery)
            _note(probe, "failed")
            ctx.logger.error(
                "workflow %r failed for good after %d attempt(s): %s",
                workflow,
                settled.attempts,
                error,
                extra={**fields, "attempt": settled.attempts},
            )
            return
        await checkpointer.set_status(
            holder, WorkflowStatus.SLEEPING, attempts=settled.attempts, error=error
        )
        await self.durable.scheduler.wake_at(delivery, settled.available_at)
        ctx.note_due(settled.available_at)
        _note(probe, "retrying")
        retry_at = str(Instant(settled.available_at))
        ctx.logger.warning(
            "workflow %r body failed (attempt %d); retrying at %s: %s",
            workflow,
            settled.attempts,
            retry_at,
            error,
            extra={**fields, "attempt": settled.attempts, "retry_at": retry_at},
        )

    async def _keep_alive(
        self,
        ctx: ServiceContext,
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
                    "renewing the claim on workflow %r failed; retrying",
                    delivery.workflow,
                    extra=self.fields(ctx, delivery.workflow),
                )

    async def _release(self, ctx: ServiceContext, holder: Pass, fields: dict[str, object]) -> None:
        try:
            await self.durable.checkpointer.release(holder)
        except Exception:
            ctx.logger.exception(
                "releasing the claim on workflow %r failed", holder.workflow, extra=fields
            )

    async def _give_back(self, ctx: ServiceContext, delivery: Delivery) -> None:
        """Make a delivery this worker will not finish visible to other workers at once."""
        with contextlib.suppress(Exception):
            await self.durable.scheduler.extend(delivery, GIVE_BACK_SECONDS)
        ctx.logger.info(
            "gave workflow %r back", delivery.workflow, extra=self.fields(ctx, delivery.workflow)
        )


def _note(probe: PassProbe | None, outcome: str) -> None:
    """Note how a pass ended, for its span and the pass-outcome metric."""
    if probe is not None:
        probe.outcome = outcome


__all__ = [
    "CONTENDED_TRIES",
    "GIVE_BACK_SECONDS",
    "RECOVERED",
    "Body",
    "WorkflowService",
    "contended_wait",
]
