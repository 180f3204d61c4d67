"""The demo's agent: a durable workflow that alternates paid model calls and tool calls,
keeps its `RunRecord` (state, tokens, cost) up to date, waits for a human approval and
sleeps durably, as its brief says.

Served by ``durably worker durably.demo.agent:serve --dsn sqlite:///durably-demo.db``.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from durably.cli.stores import UsageError
from durably.demo.ledger import Ledger, StepOutcome
from durably.demo.provider import Reply, SimulatedModel, use_tool
from durably.errors import StateConflictError
from durably.runs import RunState, StateDelta, StateKey, Usage
from durably.runtime import Run
from durably.sqlite import Database, SqliteStateStore, Transaction
from durably.stores import Stores
from durably.work import QueuePolicy

KIND = "demo-agent"
"""The workflow kind (and scheduler namespace) the demo's runs are served under."""

SCHEDULER_LEASE = 2.0
"""Seconds a delivery stays hidden: how soon a dead worker's workflows come back."""
ALIVE = 1.0
"""Seconds a pass's claim outlives its last renewal: how soon another worker may claim."""
POLICY = QueuePolicy(max_attempts=3, backoff_seconds=0.5, backoff_cap_seconds=2.0)
"""Retries of a failing pass: 3 attempts, 0.5 s then 1 s apart."""


class Agent:
    """The workflow body, bound to the stores and the worker serving it."""

    def __init__(self, stores: Stores, ledger: Ledger, worker: str) -> None:
        if not isinstance(stores.state, SqliteStateStore) or not isinstance(
            stores.database, Database
        ):
            raise UsageError("the demo agent runs over SQLite: use --dsn sqlite:///durably-demo.db")
        self._stores = stores
        self._state = stores.state
        self._database = stores.database
        self._ledger = ledger
        self._worker = worker
        self._model = SimulatedModel(ledger, worker=worker)

    async def __call__(self, run: Run) -> object:
        brief = await run.awaiting("input", _brief)
        batch = int(brief["batch"])
        key = StateKey(tenant=str(brief["tenant"]), id=str(brief["run_id"]))
        await self._set_state(key, RunState.RUNNING)
        notes: list[str] = [str(brief["task"])]
        for i, action in enumerate(brief["plan"]):
            reply = await self._think(run, batch, key, f"model:{i}", " / ".join(notes))
            notes.append(reply.text)
            kind = action["kind"]
            if kind == "approval":
                if run.pending("approval"):
                    await self._set_state(key, RunState.SUSPENDED, awaiting=str(action["tool"]))
                approval: object = await run.awaiting("approval")
                await self._set_state(key, RunState.RUNNING)
                notes.append(f"approved by {approval}")
            elif kind == "sleep":
                if run.pending(f"sleep:{i}"):
                    await self._set_state(key, RunState.SUSPENDED)
                await run.sleep(f"sleep:{i}", float(action["seconds"]))
                await self._set_state(key, RunState.RUNNING)
                continue
            result = await self._tool(run, batch, key, f"tool:{i}:{action['tool']}", action)
            notes.append(str(result))
        final = await self._think(run, batch, key, "model:final", " / ".join(notes))
        await self._set_state(key, RunState.COMPLETED)
        return {"answer": final.text}

    async def _think(self, run: Run, batch: int, key: StateKey, step: str, prompt: str) -> Reply:
        """A paid model call (a step), then its tokens and cost added to the run record in
        the same commit as a second step's record, so a replay neither calls the model nor
        charges the run again."""
        await self._replayed(run, batch, step)

        async def call() -> dict[str, object]:
            reply = await self._model.complete(batch, run.workflow, step, prompt)
            await self._note(batch, run.workflow, step, "ran")
            return reply.as_record()

        reply = await run.step(step, call, Reply.parse)
        delta = StateDelta(
            usage=Usage(
                input_tokens=reply.input_tokens, output_tokens=reply.output_tokens, requests=1
            ),
            cost_micros=reply.cost_micros,
            iterations=1,
        )
        state, database = self._state, self._database

        def charge(cursor: sqlite3.Cursor) -> dict[str, int]:
            # The patch commits with this step's record: a run is charged once per call.
            bound = state.bound(Transaction(database, cursor.connection))
            bound.patch_run(key, delta)
            return {"cost_micros": reply.cost_micros}

        await self._counted(run, batch, f"usage:{step}", charge)
        return reply

    async def _counted(self, run: Run, batch: int, step: str, effect: object) -> object:
        """``run.transact(step, effect)``, noted in the ledger as the runtime counts it (ran
        in this pass, or replayed from the record), so the demo's figures are the worker's."""
        await self._replayed(run, batch, step)
        first = run.pending(step)
        value: object = await run.transact(step, effect)
        if first:
            await self._note(batch, run.workflow, step, "ran")
        return value

    async def _tool(
        self, run: Run, batch: int, key: StateKey, step: str, action: dict[str, Any]
    ) -> dict[str, object]:
        await self._replayed(run, batch, step)

        async def call() -> dict[str, object]:
            info = await self._stores.checkpointer.get_status(run.workflow)
            first_try = info is None or info.attempts == 0
            try:
                result = await use_tool(
                    str(action["tool"]), str(action.get("arg", "")), first_try=first_try
                )
            except Exception:
                await self._note(batch, run.workflow, step, "failed")
                raise
            await self._note(batch, run.workflow, step, "ran")
            return result

        result: object = await run.step(step, call)
        assert isinstance(result, dict)
        state, database = self._state, self._database

        def count_call(cursor: sqlite3.Cursor) -> int:
            # One tool call on the run's usage, committed with this record: counted once.
            bound = state.bound(Transaction(database, cursor.connection))
            bound.patch_run(key, StateDelta(usage=Usage(tool_calls=1)))
            return 1

        await self._counted(run, batch, f"usage:{step}", count_call)
        return result

    async def _replayed(self, run: Run, batch: int, step: str) -> None:
        if not run.pending(step):
            await self._note(batch, run.workflow, step, "replayed")

    async def _note(self, batch: int, workflow: str, step: str, outcome: StepOutcome) -> None:
        await self._ledger.record_step(batch, workflow, step, outcome, self._worker, time.time())

    async def _set_state(
        self, key: StateKey, state: RunState, *, awaiting: str | None = None
    ) -> None:
        """Set the run's state (idempotent: a replayed pass sets the same state again)."""
        for _ in range(10):
            record = await self._stores.state.get_run(key)
            if record is None:
                return
            if record.state == state and record.awaiting_approval == awaiting:
                return
            try:
                await self._stores.state.put_run(
                    record.model_copy(update={"state": state, "awaiting_approval": awaiting})
                )
                return
            except StateConflictError:
                continue


def _brief(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"a demo run's input is a dict, got {value!r}")
    return value


async def serve(worker: Any, stores: Stores) -> None:
    """``durably worker`` setup: serve the demo agent's workflows (SQLite only)."""
    if stores.backing != "sqlite":
        raise UsageError("the demo agent runs over SQLite: use --dsn sqlite:///durably-demo.db")
    ledger = Ledger(stores.database)
    await ledger.prepare()
    worker.workflow(
        KIND,
        Agent(stores, ledger, worker.name),
        stores.durable(KIND, lease=SCHEDULER_LEASE),
        concurrency=4,
        policy=POLICY,
        budget=60.0,
        alive=ALIVE,
    )


__all__ = ["ALIVE", "KIND", "POLICY", "SCHEDULER_LEASE", "Agent", "serve"]
