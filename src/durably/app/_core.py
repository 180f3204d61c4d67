"""`Core`: what the App's parts share, built by `App` and taken by every helper.

The App's settings (clock, tenant, lease, retention, limits), its registry of workflows and
steps, its stores (opened on first use, on the event loop that uses them), the passes
running here (told of this process's cancels), and the status changes made outside a pass
(resume, the cancelled end of a workflow no pass will run). Workflows, handles and
the driver take a `Core`, never the `App`, so the App's own surface is only what users call.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from durably.app import _layout as layout
from durably.app import _tenancy as tenancy
from durably.app._cancels import Cancels
from durably.app._limits import Limits
from durably.app._loops import LoopStores
from durably.app._slots import release_slot
from durably.app._waiters import Waiters
from durably.clock import Clock
from durably.engine.schedules import Schedule
from durably.errors import ConfigurationError
from durably.stores.backoff import Jitter, full_jitter_seconds
from durably.stores.changes import AnnouncingSome
from durably.stores.dsn import describe
from durably.stores.opening import Stores, open_stores
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import Durable, Pass

if TYPE_CHECKING:
    from durably.app._steps import Step
    from durably.app._tasks import Task
    from durably.app._workflow import Workflow

_logger = logging.getLogger("durably.app")

CLAIM_WAIT = 5.0
"""How long `resume` and a parked or queued workflow's cancel wait for a claim another
worker holds (seconds of real time)."""
CLAIM_PAUSE = 0.05
"""The window of the first pause between two tries of a held claim (seconds)."""
CLAIM_PAUSE_CAP = 0.4
"""The widest window of a pause between two tries of a held claim (seconds)."""


def claim_pauses(jitter: Jitter) -> Iterator[float]:
    """The pauses between tries of a claim another worker holds.

    The pause after try ``n`` is ``uniform(0, min(CLAIM_PAUSE_CAP, CLAIM_PAUSE * 2 **
    (n - 1)))``, one draw of ``jitter`` scaling the whole window (full jitter, as a task's
    retries): callers waiting for one claim (a cancel and a resume, bulk calls from
    several processes) spread their tries instead of meeting the store together at every
    turn, and a claim held long is asked for less and less often.
    """
    for attempt in itertools.count(1):
        yield full_jitter_seconds(CLAIM_PAUSE, attempt, jitter, cap_seconds=CLAIM_PAUSE_CAP)


class Core:
    """The App's settings, registry and stores, shared by its workflows, handles and driver."""

    def __init__(
        self,
        dsn: SecretStr,
        *,
        clock: Clock,
        tenant: str,
        retention: float,
        lease: float,
        migrate: bool,
        limits: Limits | None = None,
    ) -> None:
        self.dsn = dsn
        """The DSN the stores open from, secret (its password never in a repr or a log)."""
        self.limits = limits or Limits()
        """What one workflow body may start (`Limits`)."""
        self.caps = self.limits.tenant_caps
        """The per-tenant caps the store applies at each start."""
        self.clock = clock
        self.tenant = tenant
        self.retention = retention
        self.lease = lease
        self.migrate = migrate
        self.jitter: Jitter = random.random
        """Where waits for a held claim draw their jitter (`claim_pauses`)."""
        self.workflows: dict[str, Workflow[Any, Any]] = {}
        self.steps: dict[str, Step[Any, Any]] = {}
        self.schedules: dict[str, Schedule] = {}
        """Cron schedules by name (`App.schedule`), ticked by every worker `serve` runs."""
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.task_dues: list[float] = []
        """When delayed task items queued here come due (`run_until_idle` advances a
        `ManualClock` to them)."""
        self.cancels = Cancels(self.stores)
        """What running passes ask whether a cancel arrived since they began."""
        self._stores = LoopStores(self._open, describe(dsn))
        self.waiters = Waiters()
        """The handles waiting in this process, behind one subscription to the store."""
        self._durables: dict[str, Durable[Any]] = {}
        self._durables_over: Stores | None = None
        self.older_layout = True
        """Whether the store may hold workflows keyed as before tenants scoped ids
        (`tenancy.older_layout`, read when the stores open), which lookups then try too."""

    def note_task_due(self, available_at: float | None) -> None:
        """Note that a task item queued here comes due at ``available_at`` (None: now)."""
        if available_at is not None:
            self.task_dues.append(available_at)

    def retarget(self, dsn: SecretStr) -> None:
        """Open the stores from ``dsn`` instead; refused once they are open."""
        if self._stores.current is not None:
            raise ConfigurationError("the App's stores are open: close it before changing its DSN")
        self.dsn = dsn

    async def stores(self) -> Stores:
        """The stores, opened (and the schema made ready) on first use on the running
        event loop (`LoopStores`: an App serves one loop after another)."""
        return await self._stores.get()

    async def _open(self) -> Stores:
        stores = await open_stores(self.dsn, clock=self.clock)
        if isinstance(stores.checkpointer, AnnouncingSome):
            stores.checkpointer.announce_records(layout.announced)
        try:
            await (stores.prepare() if self.migrate else stores.verify())
            self.older_layout = await tenancy.older_layout(stores.checkpointer, settle=True)
        except BaseException:
            await stores.close()
            raise
        _logger.info("opened %s", describe(self.dsn))
        return stores

    def durable(self, kind: str) -> Durable[Any]:
        """The `Durable` whose scheduler serves workflow kind ``kind`` (stores open)."""
        stores = self._stores.current
        if stores is None:
            raise RuntimeError("the App's stores are not open yet")
        if stores is not self._durables_over:  # opened afresh (on another event loop)
            self._durables, self._durables_over = {}, stores
        durable = self._durables.get(kind)
        if durable is None:
            durable = stores.durable(kind, lease=self.lease)
            self._durables[kind] = durable
        return durable

    async def resume(self, id: str, kind: str) -> bool:
        """Open a new generation of the workflow keyed ``id`` (a cancel from before no longer
        applies), reset its status and make it ready; False when a concurrent resume
        opened it first (nothing changes then)."""
        stores = await self.stores()
        checkpointer = stores.checkpointer
        stored = await checkpointer.load(id)
        marker = layout.occurrence(layout.RESUMES, layout.generation(stored) + 1)
        # A marker of this call's own, so only the resume whose marker landed goes on.
        if not (await checkpointer.supply(id, marker, uuid.uuid4().hex)).first:
            return False
        holder = await self._claim_briefly(id)
        if holder is not None:
            try:
                await checkpointer.set_status(holder, WorkflowStatus.PENDING)
            finally:
                await checkpointer.release(holder)
        await self.durable(kind).scheduler.make_ready(
            id, tenant=layout.tenant_of(stored), priority=layout.priority_of(stored)
        )
        return True

    async def end_cancelled(self, id: str, generation: int, *, seen: WorkflowStatus) -> bool:
        """End the workflow keyed ``id`` cancelled here, as its body's cancelled end would
        (the record of the end, the status, its parent woken), where no pass will run to
        see the cancel: it is parked, queued in its gate's line, or no pass of its
        generation ``generation`` has begun (pending); ``seen`` is the status the cancel
        read. Resumable, as any cancelled workflow.

        Done under the workflow's claim, so no pass runs meanwhile; the status is looked at
        again under it. A parked or queued workflow's claim is waited for (a worker that
        took its delivery holds it only while it reads the status); a pending one's is
        tried once: a pass holding it sees the cancel itself. False when nothing was ended
        here (a pass holds it or ran it, or a resume opened another generation)."""
        checkpointer = (await self.stores()).checkpointer
        parked = seen is WorkflowStatus.PARKED
        waits = parked or seen is WorkflowStatus.QUEUED
        holder = await (self._claim_briefly(id) if waits else checkpointer.claim(id, 30.0, 30.0))
        if holder is None:
            return False
        try:
            info = await checkpointer.get_status(id)
            status = WorkflowStatus.PENDING if info is None else info.status
            # A queued workflow admitted meanwhile is pending: ended the same way.
            unrun = (WorkflowStatus.PENDING, WorkflowStatus.QUEUED)
            if status not in ((WorkflowStatus.PARKED,) if parked else unrun):
                return False
            stored = await checkpointer.load(id)
            if layout.generation(stored) != generation:
                return False
            ended = layout.occurrence(layout.CANCELLED, generation)
            await checkpointer.record(holder, ended, "cancelled")
            start = stored.get(layout.START)
            if isinstance(start, dict):
                # Before the status: a cancel that fails here leaves the workflow
                # unfinished, and the pass that reports its recorded end lets go then.
                await release_slot((await self.stores()).queue, id, start)
            await checkpointer.set_status(
                holder,
                WorkflowStatus.CANCELLED,
                attempts=0 if info is None else info.attempts,
                error="cancelled",
            )
            kind = layout.recorded_kind(stored)
            if not parked and kind is not None:
                # Its wakeup from the start would only run a pass that reports this end.
                await self.durable(kind).scheduler.cancel(id)
            if isinstance(start, dict):
                await self.wake_parent(start)
        finally:
            await checkpointer.release(holder)
        return True

    async def wake_parent(self, start: Mapping[str, Any]) -> None:
        """Make ready the parent a child's start record names (it waits for the child's
        end, which was just recorded)."""
        parent, kind = layout.parent_key(start), start.get("parent_kind")
        if parent is not None and kind is not None:
            # A child runs for its parent's tenant: the parent wakes in that tenant's turn,
            # at its own priority: the one it was moved to since, else the one it had when
            # it started the child (kept in the child's start record).
            checkpointer = (await self.stores()).checkpointer
            priority = await layout.changed_priority(checkpointer, parent)
            if priority is None:
                priority = layout.start_priority(start, "parent_priority")
            scheduler = self.durable(str(kind)).scheduler
            await scheduler.make_ready(parent, tenant=start.get("tenant"), priority=priority)

    async def _claim_briefly(self, id: str) -> Pass | None:
        """A claim on workflow ``id`` for a status change made outside a pass, waiting up
        to `CLAIM_WAIT` seconds for one: a worker that took a delivery of a parked
        workflow holds the claim only while it reads the status. None when a pass holds
        it all that time (a running pass, which reports its own status)."""
        checkpointer = (await self.stores()).checkpointer
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLAIM_WAIT
        for pause in claim_pauses(self.jitter):
            holder = await checkpointer.claim(id, 30.0, 30.0)
            left = deadline - loop.time()
            if holder is not None or left <= 0:
                return holder
            await asyncio.sleep(min(pause, left))
        return None  # pragma: no cover - the pauses never run out

    async def close(self) -> None:
        """Close the stores and the schedulers made over them (idempotent); they open
        again if used later."""
        self._durables, self._durables_over = {}, None
        await self._stores.close()


__all__ = ["CLAIM_PAUSE", "CLAIM_PAUSE_CAP", "CLAIM_WAIT", "Core", "claim_pauses"]
