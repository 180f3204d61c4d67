"""The `Worker`: serves work queues and workflow kinds over any backing, with concurrency
limits, keep-alive, periodic maintenance and a graceful shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import os
import secrets
import signal
import socket
import threading
from collections.abc import Iterable
from typing import Any

from durably.clock import Clock, SystemClock
from durably.engine.queue_service import Handler, QueueService
from durably.engine.service import Service, ServiceContext
from durably.engine.workflow_service import Body, WorkflowService
from durably.otel import instruments
from durably.otel.api import metrics_on
from durably.otel.passes import Describe
from durably.otel.readers import read_queues, read_workflows_by_status
from durably.stores.work import DEFAULT_QUEUE, QueuePolicy, WorkQueue
from durably.stores.workflows import Durable
from durably.validation import identifier, non_negative, positive

LOGGER_NAME = "durably.worker"


class Worker:
    """Serves any mix of work queues (a handler per queue) and workflow kinds (a body per
    kind) until `stop()` or SIGTERM/SIGINT.

    Each registration has its own concurrency limit and claims only while a slot is free.
    A running item is heartbeaten and a running pass renews its claim, so work longer than
    one lease is never taken over while this worker is alive. Every ``maintenance_seconds``
    the worker reaps lapsed items, wakes sleeping workflows that are due (on ``clock``) and
    reclaims deliveries abandoned by dead workers.
    """

    def __init__(
        self,
        *,
        name: str | None = None,
        clock: Clock | None = None,
        poll_seconds: float = 1.0,
        grace_seconds: float = 30.0,
        maintenance_seconds: float = 5.0,
        logger: logging.Logger | None = None,
    ) -> None:
        self._name = (
            identifier(name, "name")
            if name is not None
            else f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        )
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._poll_seconds = positive(poll_seconds, "poll_seconds")
        self._grace_seconds = non_negative(grace_seconds, "grace_seconds")
        self._maintenance_seconds = positive(maintenance_seconds, "maintenance_seconds")
        self._logger = logger if logger is not None else logging.getLogger(LOGGER_NAME)
        self._queues: list[QueueService] = []
        self._workflows: list[WorkflowService] = []
        self._stopping = asyncio.Event()
        self._forced = asyncio.Event()
        self._poke = asyncio.Event()
        self._dues: list[float] = []
        self._fatal: BaseException | None = None
        self._running = False

    @property
    def name(self) -> str:
        """This worker's identity: the holder named on every item it claims."""
        return self._name

    @property
    def running(self) -> bool:
        """Whether `run` is in progress."""
        return self._running

    def handle(
        self,
        queue: WorkQueue,
        handler: Handler,
        *,
        name: str = DEFAULT_QUEUE,
        concurrency: int = 10,
    ) -> None:
        """Serve work queue ``name`` of ``queue`` with ``handler``, at most ``concurrency``
        items at once.

        The handler's return completes the item; an exception fails it
        (``retryable=exc.retryable`` for a durably error, else True) with its repr; a lost
        lease cancels the handler and settles nothing. Raises `ValueError` for a bad
        argument or a queue name registered twice, `RuntimeError` while running.
        """
        identifier(name, "name")
        self._refuse_while_running()
        if any(s.queue is queue and s.name == name for s in self._queues):
            raise ValueError(f"work queue {name!r} of this queue is already handled")
        self._queues.append(QueueService(queue, handler, name, concurrency))

    def workflow(
        self,
        kind: str,
        body: Body,
        durable: Durable[Any],
        *,
        concurrency: int = 10,
        policy: QueuePolicy | None = None,
        budget: float = 3600.0,
        alive: float = 30.0,
        max_recoveries: int | None = None,
        describe: Describe | None = None,
    ) -> None:
        """Serve workflows of ``kind`` from ``durable.scheduler`` (whose namespace is the
        kind) with ``body``, at most ``concurrency`` passes at once.

        Each pass claims the workflow for ``budget`` seconds, renewed every ``alive``/3
        seconds. A body that raises is retried with ``policy``'s backoff (default
        `QueuePolicy()`) and marked failed past its ``max_attempts``. With
        ``max_recoveries``, a pass that ended without reporting (its worker died or lost
        its claim) counts as an attempt and the workflow is parked past that many; a pass
        given back at shutdown counts nothing. ``describe`` reads a workflow's tenant and
        the trace context its start stored from its records, for traces and metrics (the
        App passes its own). Raises `ValueError`
        for a bad argument, a kind registered twice or a scheduler of another namespace,
        `RuntimeError` while running.
        """
        identifier(kind, "kind")
        positive(budget, "budget")
        positive(alive, "alive")
        self._refuse_while_running()
        if any(s.kind == kind for s in self._workflows):
            raise ValueError(f"workflow kind {kind!r} is already served")
        namespace = getattr(durable.scheduler, "namespace", kind)
        if namespace != kind:
            raise ValueError(
                f"workflow kind {kind!r} needs a scheduler with namespace {kind!r}, "
                f"got {namespace!r}"
            )
        self._workflows.append(
            WorkflowService(
                kind,
                body,
                durable,
                concurrency=concurrency,
                policy=policy if policy is not None else QueuePolicy(),
                budget=budget,
                alive=alive,
                max_recoveries=max_recoveries,
                describe=describe,
            )
        )

    def stop(self) -> None:
        """Stop claiming and begin the graceful shutdown; `run` returns when it is over.

        Safe to call from the event loop's thread at any time, more than once.
        """
        self._stopping.set()
        self._poke.set()
        for service in self._services():
            service.nudge()

    async def run(self, *, install_signal_handlers: bool = True) -> None:
        """Serve until `stop()` or SIGTERM/SIGINT, then shut down gracefully.

        On stop: no new claims; in-flight work gets ``grace_seconds`` to finish; the rest is
        cancelled and given back (items through `adopt`, workflows by releasing the claim
        and making the delivery visible at once). A second signal skips the grace. Raises
        `ValueError` with nothing registered, `RuntimeError` if already running, and a
        `ConfigurationError` a store raised (after shutting down).
        """
        if not self._queues and not self._workflows:
            raise ValueError("nothing to serve: call handle() or workflow() first")
        if self._running:
            raise RuntimeError(f"worker {self._name!r} is already running")
        self._running = True
        self._fatal = None
        signals = self._install_signals() if install_signal_handlers else []
        try:
            await self._serve()
        finally:
            for signum in signals:
                asyncio.get_running_loop().remove_signal_handler(signum)
            self._running = False
            # Fresh events, so this worker can run again (possibly on another event loop).
            self._stopping = asyncio.Event()
            self._forced = asyncio.Event()
            self._poke = asyncio.Event()
            for service in self._services():
                service.reset()
        if self._fatal is not None:
            raise self._fatal

    async def maintain(self) -> None:
        """One round of maintenance now: `reap` every queue, `wake_due` (on this worker's
        clock) and `reclaim` every scheduler. Store errors are logged, not raised."""
        for queue in self._distinct_queues():
            try:
                reaped = await queue.reap()
            except Exception:
                self._logger.exception("reaping failed", extra={"worker": self._name})
            else:
                if reaped:
                    self._logger.info(
                        "reaped %d lapsed work item(s): %s",
                        len(reaped),
                        _named(item.id for item in reaped),
                        extra={"worker": self._name},
                    )
        now = self._clock.now()
        for service in self._workflows:
            fields = {"worker": self._name, "kind": service.kind}
            scheduler = service.durable.scheduler
            try:
                woken = await scheduler.wake_due(now)
                # A pass cannot outlive its budget, so a delivery older than that (plus the
                # scheduler's own lease) belongs to a worker that is gone.
                reclaimed = await scheduler.reclaim(service.budget + scheduler.lease)
            except Exception:
                self._logger.exception("workflow maintenance failed", extra=fields)
                continue
            if woken:
                self._logger.info("woke %d sleeping workflow(s)", woken, extra=fields)
            if reclaimed:
                self._logger.info(
                    "reclaimed %d abandoned delivery(ies): %s",
                    len(reclaimed),
                    _named(reclaimed),
                    extra=fields,
                )
        while self._dues and self._dues[0] <= now:
            heapq.heappop(self._dues)
        if metrics_on():
            await self._sample()

    async def _sample(self) -> None:
        """Read what the gauges show from the stores and this worker's slots, and publish
        it (`durably.otel.read_gauges`)."""
        try:
            queues = await read_queues((service.queue, service.name) for service in self._queues)
            # Statuses are the store's, whatever the kind: one checkpointer tells them all.
            by_status = (
                await read_workflows_by_status(self._workflows[0].durable.checkpointer)
                if self._workflows
                else {}
            )
        except Exception:
            self._logger.exception("reading metrics failed", extra={"worker": self._name})
            return
        instruments.publish(
            self._name,
            instruments.Gauges(
                queues=queues,
                workflows_by_status=by_status,
                running_items={s.name: len(s.inflight) for s in self._queues},
                running_passes={s.kind: len(s.inflight) for s in self._workflows},
            ),
        )

    # --- internals -------------------------------------------------------------------------

    def _services(self) -> list[Service]:
        return [*self._queues, *self._workflows]

    def _distinct_queues(self) -> list[WorkQueue]:
        seen: dict[int, WorkQueue] = {}
        for service in self._queues:
            seen.setdefault(id(service.queue), service.queue)
        return list(seen.values())

    def _refuse_while_running(self) -> None:
        if self._running:
            raise RuntimeError("register handlers and workflows before run()")

    def _context(self) -> ServiceContext:
        return ServiceContext(
            worker=self._name,
            clock=self._clock,
            logger=self._logger,
            poll_seconds=self._poll_seconds,
            stopping=self._stopping,
            note_due=self._note_due,
            fatal=self._fail_fatally,
        )

    def _note_due(self, when: float) -> None:
        # Lets maintenance run at a deadline sooner than its next period.
        heapq.heappush(self._dues, when)
        self._poke.set()

    def _fail_fatally(self, exc: BaseException) -> None:
        if self._fatal is None:
            self._fatal = exc
            self._logger.error(
                "stopping: the store is misconfigured: %s", exc, extra={"worker": self._name}
            )
        self.stop()

    def _install_signals(self) -> list[int]:
        if threading.current_thread() is not threading.main_thread():
            return []
        loop = asyncio.get_running_loop()
        installed: list[int] = []
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(signum, self._on_signal, signum)
            except (NotImplementedError, RuntimeError):  # not on this platform
                continue
            installed.append(signum)
        return installed

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self._stopping.is_set():
            self._logger.warning(
                "%s again: cancelling in-flight work now", name, extra={"worker": self._name}
            )
            self._forced.set()
            return
        self._logger.info(
            "%s: stopping (grace %.1fs)", name, self._grace_seconds, extra={"worker": self._name}
        )
        self.stop()

    async def _serve(self) -> None:
        ctx = self._context()
        await self._start(ctx)
        loops = [asyncio.create_task(service.serve(ctx)) for service in self._services()]
        maintenance = asyncio.create_task(self._maintain_periodically())
        instruments.ensure_instruments()
        self._logger.info(
            "worker %s started: %d queue(s), %d workflow kind(s)",
            self._name,
            len(self._queues),
            len(self._workflows),
            extra={"worker": self._name},
        )
        try:
            await self._stopping.wait()
        except asyncio.CancelledError:
            # Cancelled from outside: no grace, give everything back, then re-raise.
            self._forced.set()
            self.stop()
            await self._shut_down(loops, maintenance)
            raise
        await self._shut_down(loops, maintenance)

    async def _start(self, ctx: ServiceContext) -> None:
        for queue in self._distinct_queues():
            # A worker of this name that died held these; this instance holds nothing yet.
            adopted = await queue.adopt(worker=self._name)
            if adopted:
                self._logger.info(
                    "adopted %d item(s) held by an earlier worker of this name: %s",
                    len(adopted),
                    _named(item.id for item in adopted),
                    extra={"worker": self._name},
                )
        for service in self._workflows:
            await service.durable.scheduler.prepare()

    async def _maintain_periodically(self) -> None:
        while not self._stopping.is_set():
            await self.maintain()
            wait = self._maintenance_seconds
            if self._dues:
                wait = min(wait, max(0.0, self._dues[0] - self._clock.now()))
            self._poke.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), timeout=wait)

    async def _shut_down(
        self, loops: list[asyncio.Task[None]], maintenance: asyncio.Task[None]
    ) -> None:
        maintenance.cancel()
        # Claim loops see the stop flag after their current wait (at most ~poll_seconds).
        if not self._forced.is_set():
            await asyncio.wait(loops, timeout=self._poll_seconds * 2)
        for claiming in loops:
            claiming.cancel()
        await asyncio.gather(maintenance, *loops, return_exceptions=True)
        await self._drain()
        await self._give_back_items()
        instruments.publish(self._name, None)
        self._logger.info("worker %s stopped", self._name, extra={"worker": self._name})

    async def _drain(self) -> None:
        inflight: set[asyncio.Task[None]] = set()
        for service in self._services():
            inflight |= service.inflight
        if not inflight:
            return
        self._logger.info(
            "waiting up to %.1fs for %d in-flight task(s)",
            self._grace_seconds,
            len(inflight),
            extra={"worker": self._name},
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._grace_seconds
        forced = asyncio.ensure_future(self._forced.wait())
        try:
            pending = set(inflight)
            while pending and not self._forced.is_set():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                await asyncio.wait(
                    {*pending, forced}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
                pending = {task for task in pending if not task.done()}
        finally:
            forced.cancel()
        if pending:
            self._logger.warning(
                "cancelling %d task(s) still running after the grace period",
                len(pending),
                extra={"worker": self._name},
            )
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _give_back_items(self) -> None:
        for queue in self._distinct_queues():
            try:
                adopted = await queue.adopt(worker=self._name)
            except Exception:
                self._logger.exception(
                    "could not give work items back", extra={"worker": self._name}
                )
                continue
            if adopted:
                self._logger.info(
                    "gave back %d unfinished work item(s): %s",
                    len(adopted),
                    _named(item.id for item in adopted),
                    extra={"worker": self._name},
                )


def _named(ids: Iterable[str], shown: int = 10) -> str:
    """Ids for a log line: the first ``shown`` (repr, so odd characters stay visible)."""
    listed = list(ids)
    head = ", ".join(repr(i) for i in listed[:shown])
    return head if len(listed) <= shown else f"{head} and {len(listed) - shown} more"


async def start_workflow(
    durable: Durable[Any], workflow: str, input: object = None, *, tenant: str | None = None
) -> None:
    """Start (or nudge) ``workflow``: supply its ``"input"`` (first writer wins) and make it
    ready for ``tenant`` (served in that tenant's turn; None: the default tenant), in one
    `Durable.arrive`. The body reads it with ``await run.awaiting("input")``."""
    identifier(workflow, "workflow")
    await durable.arrive(workflow, "input", input, tenant=tenant)


__all__ = ["LOGGER_NAME", "Worker", "start_workflow"]
