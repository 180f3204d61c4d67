"""`PostgresGates`: the PostgreSQL checkpointer's workflow gates (`durably.stores.gates`)."""

from __future__ import annotations

from durably.postgres import statements
from durably.postgres.executor import Session
from durably.postgres.scheduler import Readying
from durably.postgres.schema import StateTables
from durably.stores.gates import GateCounts, WorkflowGate, throttled_until
from durably.stores.runs import run_state
from durably.stores.status import WorkflowStatus

_TEMPLATES = statements.load("gates.sql", fragments_from=("checkpointer.sql",))
QUEUED, HELD, FREE = "queued", "held", "free"


class PostgresGates:
    """The gates' statements, run on a session inside the transaction of the write that
    moves a gated workflow: the gate's row is locked first, so a gate's writes take turns
    and a freed slot and its next holder move in one commit."""

    def __init__(self, tables: StateTables) -> None:
        self._sql = statements.render_all(_TEMPLATES, tables.names)
        self._readying = Readying(tables)

    async def admit(self, session: Session, workflow: str, tenant: str, gate: WorkflowGate) -> bool:
        """Take ``workflow`` (its first start, just written) through ``gate``; True when
        it is queued (its status written QUEUED)."""
        await session.fetch(self._sql["lock_gate"], gate.name, gate.limit)
        # A limit raised since the last start admits from the line up to it first.
        admitted, most = await self._admit_next(session, gate.name)
        queued = admitted >= most or bool(await session.fetch(self._sql["next_in_line"], gate.name))
        state = QUEUED if queued else HELD
        await session.fetch(
            self._sql["mark"], workflow, gate.name, tenant, gate.namespace, state, gate.priority
        )
        if queued:
            await self._write_status(session, workflow, WorkflowStatus.QUEUED)
        else:
            await session.fetch(self._sql["serve"], gate.name, tenant)
        return queued

    async def queued(self, session: Session, workflow: str) -> bool:
        """Whether ``workflow`` waits in a gate's line."""
        rows = await session.fetch(self._sql["marked"], workflow)
        return bool(rows) and rows[0][1] == QUEUED

    async def moved(self, session: Session, workflow: str, finished: bool) -> None:
        """``workflow``'s status now says ``finished`` (or not): a finished one frees its
        slot (or leaves the line), and the line's next take it; an unfinished one that
        held none takes one (a resume, even past the limit)."""
        rows = await session.fetch(self._sql["marked"], workflow)
        if not rows:
            return
        gate = str(rows[0][0])
        await session.fetch(self._sql["relock_gate"], gate)
        state = (await session.fetch(self._sql["marked"], workflow))[0][1]  # under the lock
        if finished:
            if state == FREE:
                return
            await session.fetch(self._sql["move_mark"], workflow, FREE)
            if state == HELD:
                await session.fetch(self._sql["move_admitted"], gate, -1)
                await self._admit_next(session, gate)
        elif state != HELD:
            await session.fetch(self._sql["move_mark"], workflow, HELD)
            await session.fetch(self._sql["move_admitted"], gate, 1)

    async def forget(self, session: Session, workflow: str) -> None:
        """``workflow`` was deleted: its slot or its place in line goes with it."""
        await self.moved(session, workflow, True)
        await session.fetch(self._sql["unmark"], workflow)

    async def rerank(self, session: Session, workflow: str, gate: str, priority: int) -> bool:
        """Move ``workflow``, queued in ``gate``'s line, to ``priority``'s place in its
        tenant's line, under the gate's lock (a gate's writes take turns); False when it
        is not queued there."""
        if not await session.fetch(self._sql["relock_gate"], gate):
            return False
        return bool(await session.fetch(self._sql["rerank"], workflow, gate, priority))

    async def counts(self, session: Session, gate: str) -> GateCounts:
        """Gate ``gate``'s admitted and queued workflows."""
        rows = await session.fetch(self._sql["counts"], gate)
        return GateCounts(int(rows[0][0]), int(rows[0][1])) if rows else GateCounts()

    async def throttle(
        self, session: Session, key: str, now: float, interval: float, burst: int
    ) -> float:
        """Reserve the next start slot of throttle ``key``: when the start may begin."""
        tat = (await session.fetch(self._sql["lock_throttle"], key))[0][0]
        begins, after = throttled_until(None if tat is None else float(tat), now, interval, burst)
        await session.fetch(self._sql["set_throttle"], key, after)
        return begins

    async def _write_status(self, session: Session, workflow: str, status: WorkflowStatus) -> None:
        """Store ``status`` for ``workflow``; its catalog entry and run record follow."""
        state = run_state(status).value
        await session.fetch(self._sql["write_status"], workflow, status.value, state)

    async def _admit_next(self, session: Session, gate: str) -> tuple[int, int]:
        """Admit from ``gate``'s line while it has room: its admitted count and limit."""
        row = (await session.fetch(self._sql["relock_gate"], gate))[0]
        admitted, most = int(row[0]), int(row[1])
        while admitted < most:
            rows = await session.fetch(self._sql["next_in_line"], gate)
            if not rows:
                break
            admitted += 1
            workflow, tenant, namespace, priority = rows[0]
            await session.fetch(self._sql["move_mark"], workflow, HELD)
            await session.fetch(self._sql["serve"], gate, tenant)
            await self._write_status(session, str(workflow), WorkflowStatus.PENDING)
            await self._readying.make_ready_on(
                session, str(namespace), str(workflow), str(tenant), int(priority)
            )
        return admitted, most


__all__ = ["PostgresGates"]
