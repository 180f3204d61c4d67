"""How the App runs its workflows: `serve` over the engine's `Worker`, and
`run_until_idle` (for tests) over the same per-kind service, one pass at a time."""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from durably.app import _layout as layout
from durably.app import _tenancy as tenancy
from durably.app._core import Core
from durably.app._tasks import TASK_KEY
from durably.clock import ManualClock
from durably.engine import ServiceContext, Worker, WorkflowService
from durably.engine.schedules import tick
from durably.engine.service import retryable
from durably.engine.worker import LOGGER_NAME
from durably.errors import ConfigurationError, DurablyError, UnreadableRecordError
from durably.stores.catalog import Cataloguing
from durably.stores.gates import Gating
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.stores.work import QueuePolicy, WorkItem, WorkQueue

if TYPE_CHECKING:
    from durably.app._workflow import Workflow

SWEEP_LIMIT = 500
"""Workflows one round of the retention sweep removes at most."""
SWEEP_SECONDS = 60.0
"""Seconds between sweep rounds while `serve` runs."""
UNSERVED_LIMIT = 100
"""Statuses one round looks at for workflows whose kind has no body here."""
NOTE_SECONDS = 10.0
"""How long the claim that notes an unserved workflow in its status may last."""
UNFINISHED = (WorkflowStatus.SLEEPING, WorkflowStatus.BLOCKED, WorkflowStatus.RUNNING)

# A guard against a workflow that never stops being ready (a bug, not a test's intent).
MAX_PASSES = 100_000


class Driver:
    """Serves or drives the workflows registered on one App."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self._dues: list[float] = []
        self._unserved_after: str | None = None

    def _kinds(self, names: Iterable[str] | None) -> list[str]:
        registered = self._core.workflows
        if names is None:
            return list(registered)
        kinds = list(names)
        unknown = [kind for kind in kinds if kind not in registered]
        if unknown:
            raise ConfigurationError(unknown_kinds(unknown, list(registered)))
        return kinds

    async def serve(
        self,
        workflows: Iterable[str] | None,
        queues: Iterable[str] | None,
        *,
        concurrency: int,
        grace: float,
        name: str | None = None,
        poll: float = 1.0,
        maintenance: float = 5.0,
        signals: bool = True,
    ) -> None:
        """Run a `Worker` for the kinds named (default: all) until it is stopped (with
        ``signals``, by SIGTERM/SIGINT too)."""
        names = None if queues is None else list(queues)
        kinds = self._kinds(workflows if workflows is not None or names is None else [])
        served = self._queues(names if names is not None or workflows is None else [])
        stores = await self._core.stores()
        worker = Worker(
            name=name,
            clock=self._core.clock,
            poll_seconds=poll,
            grace_seconds=grace,
            maintenance_seconds=maintenance,
        )
        for schedule in self._core.schedules.values():
            worker.schedule(stores.queue, schedule)
        for kind in kinds:
            workflow = self._core.workflows[kind]
            options = _options(workflow, self._core.lease)
            worker.workflow(
                kind, workflow.body, self._core.durable(kind), concurrency=concurrency, **options
            )
        for queue in served:
            worker.handle(
                stores.queue, self._task_handler(queue), name=queue, concurrency=concurrency
            )
        sweeping = asyncio.create_task(self._sweep_periodically())
        try:
            await worker.run(install_signal_handlers=signals)
        finally:
            sweeping.cancel()
            await asyncio.gather(sweeping, return_exceptions=True)

    def _queues(self, names: list[str] | None) -> list[str]:
        """The task queues to serve: ``names`` (each used by a registered task), or every
        queue a registered task uses."""
        used = list(dict.fromkeys(task.queue for task in self._core.tasks.values()))
        if names is None:
            return used
        unknown = [name for name in names if name not in used]
        if unknown:
            raise ConfigurationError(
                f"no registered task uses queue {unknown[0]!r}; task queues: "
                f"{', '.join(sorted(used)) or 'none'}"
            )
        return list(dict.fromkeys(names))

    def _task_handler(self, queue: str) -> Callable[[WorkItem], Awaitable[None]]:
        """The handler of task queue ``queue``: runs each item by the task it names."""
        tasks = self._core.tasks

        async def handle(item: WorkItem) -> None:
            name = item.payload.get(TASK_KEY)
            task = tasks.get(name) if name is not None else None
            if task is None:
                # Another deploy's task, perhaps: retried by the queue's policy, so a
                # worker that has it may take it.
                raise DurablyError(
                    f"no task {name!r} registered on this worker (queue {queue!r})",
                    retryable=True,
                )
            await task.run(item)

        return handle

    async def sweep(self, limit: int = SWEEP_LIMIT) -> int:
        """One bounded round of the retention sweep: up to ``limit`` workflows finished
        (completed, failed or cancelled) longer than the App's ``retention`` ago, with
        their wakeups; the number swept."""
        stores = await self._core.stores()
        before = datetime.now(UTC) - timedelta(seconds=self._core.retention)
        schedulers = [self._core.durable(kind).scheduler for kind in self._core.workflows]

        async def swept(workflow: str) -> None:
            for scheduler in schedulers:
                await scheduler.cancel(workflow)

        return await stores.checkpointer.sweep(finished_before=before, limit=limit, on_swept=swept)

    async def repair_gates(self, limit: int = SWEEP_LIMIT) -> int:
        """One bounded round of the gates' repair (a store whose gate moves are steps
        finishes the ones a killed process left undone): the number repaired."""
        checkpointer = (await self._core.stores()).checkpointer
        if not isinstance(checkpointer, Gating):
            return 0
        return await checkpointer.repair_gates(limit=limit)

    async def repair_catalog(self, limit: int = SWEEP_LIMIT) -> int:
        """One bounded round of the catalog's repair (a store whose status writes keep the
        catalog in a second step brings the ones a killed process left undone): the
        number of workflows repaired."""
        checkpointer = (await self._core.stores()).checkpointer
        if not isinstance(checkpointer, Cataloguing):
            return 0
        return await checkpointer.repair_catalog(limit=limit)

    async def unserved(self, limit: int = UNSERVED_LIMIT) -> list[tuple[str, str]]:
        """Up to ``limit`` more unfinished workflows (sleeping, blocked or running; a
        rolling look over every round) whose kind this App has no body for, as
        ``(id, kind)`` (the id within its tenant): nothing here will run them."""
        checkpointer = (await self._core.stores()).checkpointer
        found: list[tuple[str, str]] = []
        infos = await checkpointer.list_status(limit=limit, after=self._unserved_after)
        self._unserved_after = infos[-1].workflow if len(infos) == limit else None
        for info in infos:
            if info.status not in UNFINISHED:
                continue
            try:
                peeked = await checkpointer.peek(info.workflow, [layout.START])
            except UnreadableRecordError:
                continue  # a start record nobody can read: its pass parks it, saying why
            start = peeked.get(layout.START)
            kind = start.get("kind") if isinstance(start, dict) else None
            if isinstance(start, dict) and kind is not None and kind not in self._core.workflows:
                found.append((tenancy.scope(info.workflow, start)[1], str(kind)))
                await self._note_unserved(info, str(kind))
        return found

    async def _note_unserved(self, info: WorkflowInfo, kind: str) -> None:
        """Say in the workflow's status (its error, the status itself unchanged) that this
        App has no body for its kind, so `durably workflows list` shows why it stands still;
        a worker that has the body overwrites the note with its next report. Skipped while
        a pass holds the workflow: then something does run it."""
        note = f"no body registered for kind {kind!r} on a worker that looked for it"
        if info.last_error == note:
            return
        checkpointer = (await self._core.stores()).checkpointer
        holder = await checkpointer.claim(info.workflow, NOTE_SECONDS, NOTE_SECONDS)
        if holder is None:
            return
        try:
            await checkpointer.set_status(holder, info.status, attempts=info.attempts, error=note)
        finally:
            await checkpointer.release(holder)

    async def _sweep_periodically(self) -> None:
        logger = logging.getLogger(LOGGER_NAME)
        # The first round waits too: a worker starting up (often many at once, after a
        # deploy) serves its backlog before it sweeps.
        await asyncio.sleep(SWEEP_SECONDS)
        while True:
            try:
                for workflow, kind in await self.unserved():
                    logger.warning(
                        "workflow %r is of kind %r, which has no registered body here",
                        workflow,
                        kind,
                        extra={"workflow": workflow, "kind": kind},
                    )
            except Exception:
                logger.exception("looking for workflows without a body failed")
            try:
                repaired = await self.repair_gates()
                if repaired:
                    logger.info("repaired %d gated workflow(s) a stopped process left", repaired)
            except Exception:
                logger.exception("the workflow gates' repair failed; trying again later")
            try:
                repaired = await self.repair_catalog()
                if repaired:
                    logger.info(
                        "repaired the catalog of %d workflow(s) a stopped process left", repaired
                    )
            except Exception:
                logger.exception("the workflow catalog's repair failed; trying again later")
            try:
                swept = await self.sweep()
            except Exception:
                logger.exception("the retention sweep failed; trying again later")
                swept = 0
            if swept:
                logger.info("swept %d finished workflow(s)", swept)
            # A full round may have left more: go on at once, else wait for the next.
            await asyncio.sleep(0 if swept >= SWEEP_LIMIT else SWEEP_SECONDS)

    async def run_until_idle(self, *, advance: bool) -> int:
        """Run every ready workflow one pass at a time until none is; with ``advance`` and a
        `ManualClock`, move the clock to the next deadline noted and go on."""
        await self._core.stores()
        clock = self._core.clock
        ctx = ServiceContext(
            worker="run_until_idle",
            clock=clock,
            logger=logging.getLogger(LOGGER_NAME),
            poll_seconds=0.05,
            stopping=asyncio.Event(),
            note_due=self._dues.append,
            fatal=_raise,
            jitter=self._core.jitter,
        )
        services = [
            WorkflowService(
                kind,
                workflow.body,
                self._core.durable(kind),
                concurrency=1,
                **_options(workflow, self._core.lease),
            )
            for kind, workflow in self._core.workflows.items()
        ]
        queue = (await self._core.stores()).queue
        handlers = {name: self._task_handler(name) for name in self._queues(None)}
        passes = 0
        while passes < MAX_PASSES:
            now = clock.now()
            ran = False
            for schedule in self._core.schedules.values():
                await tick(queue, schedule, now=now)  # as a worker's maintenance does
            for service in services:
                scheduler = service.durable.scheduler
                await scheduler.wake_due(now)
                while (delivery := await scheduler.next_ready(0.0)) is not None:
                    await service.serve_one(ctx, delivery)
                    passes += 1
                    ran = True
            for name, handler in handlers.items():
                while (item := await queue.claim(worker=ctx.worker, queue=name)) is not None:
                    await self._run_task(queue, handler, item, ctx.worker)
                    passes += 1
                    ran = True
            if ran:
                continue
            self._dues.extend(self._core.task_dues)
            self._core.task_dues.clear()
            self._dues[:] = [due for due in self._dues if due > now]
            if not advance or not self._dues or not isinstance(clock, ManualClock):
                return passes
            clock.advance(min(self._dues) - now)
        raise RuntimeError(f"run_until_idle: still busy after {MAX_PASSES} passes")

    async def _run_task(
        self,
        queue: WorkQueue,
        handler: Callable[[WorkItem], Awaitable[None]],
        item: WorkItem,
        worker: str,
    ) -> None:
        """Run one claimed task item and settle it as a `Worker` would."""
        try:
            await handler(item)
        except Exception as exc:
            at = getattr(exc, "retry_at", None)
            timing: dict[str, float] = {"retry_at": at} if isinstance(at, float) else {}
            await queue.fail(
                item.id,
                tenant=item.tenant,
                worker=worker,
                error=repr(exc),
                retryable=retryable(exc),
                **timing,
            )
            if timing:
                self._dues.append(timing["retry_at"])
        else:
            await queue.complete(item.id, tenant=item.tenant, worker=worker)


LISTED_KINDS = 20
"""How many registered kinds the message about an unknown kind lists at most."""


def unknown_kinds(unknown: list[str], registered: list[str]) -> str:
    """What to say of kinds asked for that are not registered: each with the closest
    registered kind, if one is close (by its whole name or its last dotted part, which a
    default kind's function name is), then the registered kinds."""
    shorts: dict[str, str] = {}
    for kind in registered:
        shorts.setdefault(kind.rsplit(".", 1)[-1], kind)
    said = []
    for kind in unknown:
        close = difflib.get_close_matches(kind, [*registered, *shorts], n=1)
        hint = f" (did you mean {shorts.get(close[0], close[0])!r}?)" if close else ""
        said.append(f"unknown workflow kind {kind!r}{hint}")
    listed = ", ".join(sorted(registered)[:LISTED_KINDS]) or "none"
    more = len(registered) - LISTED_KINDS
    return f"{'; '.join(said)}; registered: {listed}{f' and {more} more' if more > 0 else ''}"


def _options(workflow: Workflow[Any, Any], lease: float) -> dict[str, Any]:
    """How the engine serves ``workflow``: its body retries (only with ``retry=``; a store
    error on the way is retried by the default policy), its crash recoveries, a pass's
    budget and liveness window."""
    retry = workflow.retry
    policy = (
        QueuePolicy()
        if retry is None
        else QueuePolicy(
            max_attempts=retry.max_attempts,
            backoff_seconds=max(retry.initial, 0.001),
            backoff_cap_seconds=max(retry.maximum, retry.initial, 0.001),
        )
    )
    return {
        "policy": policy,
        "max_recoveries": workflow.max_recovery_attempts,
        "budget": 3600.0,
        "alive": lease,
        "describe": layout.describe,
    }


def _raise(exc: BaseException) -> None:
    raise exc


__all__ = ["MAX_PASSES", "SWEEP_LIMIT", "SWEEP_SECONDS", "UNSERVED_LIMIT", "Driver"]
