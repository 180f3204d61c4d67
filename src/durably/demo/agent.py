"""The demo's agent, written on the application layer: a ``@app.workflow`` that alternates
paid model calls and tool calls (``@app.step``), keeps its `RunRecord` (state, tokens,
cost) up to date, waits for a human approval on a `durably.Topic` and sleeps durably.

Served by ``durably worker durably.demo.agent:app --dsn sqlite:///durably-demo.db``.

The demo also notes in its ledger which steps ran and which a pass answered from the
record. Those notes are the demo's own observation (to print its table), not workflow
state; an application's body would not write them.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Literal

from pydantic import BaseModel

import durably
from durably.demo.ledger import Ledger, StepOutcome
from durably.demo.provider import SimulatedModel, use_tool
from durably.errors import ConfigurationError, StateConflictError
from durably.sqlite import Database, SqliteStateStore, Transaction
from durably.stores.runs import RunState, StateDelta, StateKey, Usage

KIND = "demo-agent"
"""The workflow kind the demo's runs are started and served under."""

LEASE = 2.0
"""Seconds a dead worker keeps its workflows before another worker takes them over."""
WORKER_ENV = "DURABLY_DEMO_WORKER"
"""The name a demo worker process notes in the ledger (set by the demo when it spawns it)."""

app = durably.App(os.environ.get("DURABLY_DSN") or "sqlite:///durably-demo.db", lease=LEASE)

APPROVAL = durably.Topic("approval", str)
"""Who approved the run's pending action (sent with ``handle.send``)."""


class Action(BaseModel):
    """One action of a run's plan; each follows a model call."""

    kind: Literal["tool", "approval", "sleep"]
    tool: str = ""
    arg: str = ""
    seconds: float = 0.0


class Brief(BaseModel):
    """What a run is started with."""

    batch: int
    tenant: str
    run_id: str
    task: str
    plan: list[Action]


class Reply(BaseModel):
    """What the model answered, what it cost, and the step key it was recorded under."""

    step: str
    text: str
    input_tokens: int
    output_tokens: int
    cost_micros: int


class ToolResult(BaseModel):
    """What a tool returned, and the step key it was recorded under."""

    step: str
    output: dict[str, object]


class Answer(BaseModel):
    """The run's result."""

    answer: str


# --- steps: the paid model call, the tools, the run record's state ---------------------


@app.step(name="model")
async def think(batch: int, prompt: str) -> Reply:
    """A paid model call: the provider bills it when it answers."""
    step = durably.context()
    ledger = await _ledger()
    reply = await SimulatedModel(ledger, worker=_worker()).complete(
        batch, step.workflow, step.step, prompt
    )
    await ledger.record_step(batch, step.workflow, step.step, "ran", _worker(), time.time())
    return Reply(
        step=step.step,
        text=reply.text,
        input_tokens=reply.input_tokens,
        output_tokens=reply.output_tokens,
        cost_micros=reply.cost_micros,
    )


@app.step(name="tool", retry=durably.Retry(max_attempts=3, initial=0.5, maximum=2.0))
async def call_tool(batch: int, tool: str, arg: str) -> ToolResult:
    """A tool call; the weather tool fails on its first attempt and is retried."""
    step = durably.context()
    ledger = await _ledger()
    try:
        output = await use_tool(tool, arg, first_try=step.attempt == 1)
    except Exception:
        await ledger.record_step(batch, step.workflow, step.step, "failed", _worker(), time.time())
        raise
    await ledger.record_step(batch, step.workflow, step.step, "ran", _worker(), time.time())
    return ToolResult(step=step.step, output=output)


@app.step(name="run-state")
async def set_state(tenant: str, run_id: str, state: RunState, awaiting: str | None) -> None:
    """Set the `RunRecord`'s state (idempotent, so running it again is harmless)."""
    store = (await app.stores()).state
    key = StateKey(tenant=tenant, id=run_id)
    for _ in range(10):
        record = await store.get_run(key)
        if record is None or (record.state, record.awaiting_approval) == (state, awaiting):
            return
        try:
            await store.put_run(
                record.model_copy(update={"state": state, "awaiting_approval": awaiting})
            )
            return
        except StateConflictError:
            continue


# --- the workflow ------------------------------------------------------------------------


@app.workflow(name=KIND)
async def agent(ctx: durably.Context, brief: Brief) -> Answer:
    """Think, act, think again; an approval waits for a message, a sleep frees the worker."""
    await set_state(brief.tenant, brief.run_id, RunState.RUNNING, None)
    notes = [brief.task]
    for action in brief.plan:
        reply = await _think(ctx, brief, " / ".join(notes))
        notes.append(reply.text)
        if action.kind == "approval":
            await set_state(brief.tenant, brief.run_id, RunState.SUSPENDED, action.tool)
            approver = await ctx.recv(APPROVAL)
            await set_state(brief.tenant, brief.run_id, RunState.RUNNING, None)
            notes.append(f"approved by {approver}")
        elif action.kind == "sleep":
            await set_state(brief.tenant, brief.run_id, RunState.SUSPENDED, None)
            await ctx.sleep(action.seconds)
            await set_state(brief.tenant, brief.run_id, RunState.RUNNING, None)
            continue
        result = await _act(ctx, brief, action)
        notes.append(str(result.output))
    final = await _think(ctx, brief, " / ".join(notes))
    await set_state(brief.tenant, brief.run_id, RunState.COMPLETED, None)
    return Answer(answer=final.text)


async def _think(ctx: durably.Context, brief: Brief, prompt: str) -> Reply:
    """A paid model call, then its tokens and cost added to the run record in the same
    commit as that addition's own record: a replay neither calls the model nor charges
    the run again."""
    replaying = ctx.replaying
    reply = await think(brief.batch, prompt)
    if replaying:
        await _note(brief.batch, ctx.id, reply.step, "replayed")
    delta = StateDelta(
        usage=Usage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens, requests=1),
        cost_micros=reply.cost_micros,
        iterations=1,
    )
    await _charge(ctx, brief, f"usage:{reply.step}", delta)
    return reply


async def _act(ctx: durably.Context, brief: Brief, action: Action) -> ToolResult:
    """A tool call, then one tool call added to the run's usage, counted once."""
    replaying = ctx.replaying
    result = await call_tool(brief.batch, action.tool, action.arg)
    if replaying:
        await _note(brief.batch, ctx.id, result.step, "replayed")
    await _charge(ctx, brief, f"usage:{result.step}", StateDelta(usage=Usage(tool_calls=1)))
    return result


async def _charge(ctx: durably.Context, brief: Brief, key: str, delta: StateDelta) -> None:
    """``ctx.transact``: the patch of the run record commits with its step record."""
    stores = await app.stores()
    state, database = stores.state, stores.database
    if not isinstance(state, SqliteStateStore) or not isinstance(database, Database):
        raise ConfigurationError("the demo agent runs over SQLite: use a sqlite:/// DSN")
    run = StateKey(tenant=brief.tenant, id=brief.run_id)

    def patch(cursor: sqlite3.Cursor) -> int:
        state.bound(Transaction(database, cursor.connection)).patch_run(run, delta)
        return delta.cost_micros

    first = not ctx.replaying
    await ctx.transact(key, patch)
    await _note(brief.batch, ctx.id, key, "ran" if first else "replayed")


async def _ledger() -> Ledger:
    return Ledger((await app.stores()).database)


async def _note(batch: int, workflow: str, step: str, outcome: StepOutcome) -> None:
    await (await _ledger()).record_step(batch, workflow, step, outcome, _worker(), time.time())


def _worker() -> str:
    return os.environ.get(WORKER_ENV) or f"pid-{os.getpid()}"


__all__ = [
    "APPROVAL",
    "KIND",
    "LEASE",
    "WORKER_ENV",
    "Action",
    "Answer",
    "Brief",
    "Reply",
    "ToolResult",
    "agent",
    "app",
]
