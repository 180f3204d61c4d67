"""The gates' repair pass on Redis, standalone and cluster: each step a killed process can
leave undone between the slots of a gate move is finished by the pass, once.

A kill is simulated by skipping the steps after the first (a wrapper around the
checkpointer's own call, never around Redis); what ran is read from a ledger the bodies
write in a step (so a replayed pass adds nothing) and from the gate's counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from durably.app import App, Context, Workflow, WorkflowHandle
from durably.clock import ManualClock
from durably.redis.checkpointer import RedisCheckpointer
from durably.stores.gates import GateCounts, gate_name
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import NOTE, fresh_id
from tests.redis_service import cluster_servers, flushed_database

REDIS_DB = 14  # a database index no other suite uses

pytestmark = pytest.mark.asyncio


class Killed(Exception):
    """The process died here."""


@pytest.fixture(params=["standalone", "cluster"])
async def dsn(request: pytest.FixtureRequest) -> str:
    if request.param == "standalone":
        return await flushed_database(REDIS_DB)
    return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in cluster_servers()) + "/"


@pytest.fixture
async def app(dsn: str) -> AsyncIterator[App]:
    made = App(dsn, clock=ManualClock())
    await made.stores()
    # The cluster is shared with other suites (a standalone database is flushed): what
    # their gates left for a repair (a master killed mid-move, say) is repaired first, so
    # each case counts its own repairs.
    for _ in range(5):
        if not await _repair(made):
            break
    try:
        yield made
    finally:
        await made.close()


async def _checkpointer(app: App) -> RedisCheckpointer:
    checkpointer = (await app.stores()).checkpointer
    assert isinstance(checkpointer, RedisCheckpointer)
    return checkpointer


@dataclass
class Gated:
    """A kind admitting one at a time, whose bodies note their run in a step (`ran`, so a
    replay adds nothing), then wait for a note; its workflows started, in order."""

    kind: Workflow[..., str]
    ran: list[str]
    started: list[WorkflowHandle[str]]


async def _gated(app: App, *names: str) -> Gated:
    """Start workflows ``names`` of a fresh gated kind and run until idle (the first
    admitted and waiting, the rest queued)."""
    ran: list[str] = []

    @app.workflow(name=f"gated-{fresh_id()}", concurrency=1)
    async def waits(ctx: Context, name: str) -> str:
        await ctx.step("ran", lambda: ran.append(name))
        return str(await ctx.recv(NOTE))

    started = [await waits.start(name) for name in names]
    await app.run_until_idle(advance=False)
    return Gated(waits, ran, started)


def _skip_once(
    monkeypatch: pytest.MonkeyPatch,
    owner: object,
    name: str,
    when: Callable[..., bool] = lambda *args, **kwargs: True,
    *,
    answer: object = None,
) -> list[object]:
    """Make ``owner.name`` do nothing once, for a call ``when`` picks (the process died
    before it, and its pass ends as a later process would end it): it answers ``answer``,
    or raises `Killed` if that is None. The calls skipped."""
    original = getattr(owner, name)
    skipped: list[object] = []

    async def skip(*args: Any, **kwargs: Any) -> Any:
        if not skipped and when(*args, **kwargs):
            skipped.append(args)
            if answer is None:
                raise Killed
            return answer
        return await original(*args, **kwargs)

    monkeypatch.setattr(owner, name, skip)
    return skipped


class LateMove:
    """The gate's next move waits until `go_on` is set (a process slow to run its step);
    the moves after it run at once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, checkpointer: RedisCheckpointer) -> None:
        self.entered, self.go_on = asyncio.Event(), asyncio.Event()
        gates = checkpointer._gates
        original = gates.move

        async def late(*args: Any, **kwargs: Any) -> Any:
            monkeypatch.setattr(gates, "move", original)
            self.entered.set()
            await self.go_on.wait()
            return await original(*args, **kwargs)

        monkeypatch.setattr(gates, "move", late)

    async def reached(self) -> None:
        await asyncio.wait_for(self.entered.wait(), 10)


async def _repair(app: App) -> int:
    """One round of the repair `serve` runs in its maintenance, over every gate."""
    return await app._driver.repair_gates(limit=10_000)


async def test_an_ended_workflow_whose_gate_move_was_lost_frees_its_slot_on_repair(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer = await _checkpointer(app)
    gated = await _gated(app, "w0", "w1")
    waits, ran, (first, second) = gated.kind, gated.ran, gated.started
    skipped = _skip_once(monkeypatch, checkpointer._gates, "move", answer=(False, []))
    await first.send(NOTE, "done")
    await app.run_until_idle(advance=False)
    assert skipped
    assert await first.result(timeout=5) == "done"
    assert (await second.status()).status is WorkflowStatus.QUEUED
    assert await checkpointer.gate_counts(gate_name(waits.kind)) == GateCounts(admitted=1, queued=1)
    assert await _repair(app) == 1
    assert await _repair(app) == 0  # taken once
    await app.run_until_idle(advance=False)
    assert ran == ["w0", "w1"]
    assert (await second.status()).status is WorkflowStatus.BLOCKED
    assert await checkpointer.gate_counts(gate_name(waits.kind)) == GateCounts(admitted=1)


@pytest.mark.parametrize("lost", ["status", "wakeup"])
async def test_an_admitted_workflow_never_made_pending_or_ready_runs_after_repair(
    app: App, monkeypatch: pytest.MonkeyPatch, lost: str
) -> None:
    checkpointer = await _checkpointer(app)
    gated = await _gated(app, "w0", "w1")
    ran, (first, second) = gated.ran, gated.started
    woken = _skip_once(monkeypatch, checkpointer, "_wake", answer=False)
    if lost == "status":  # died before the PENDING status, so before the wakeup too
        pending = _skip_once(
            monkeypatch,
            checkpointer,
            "_gated_status",
            lambda workflow, status, **kwargs: status is WorkflowStatus.PENDING,
            answer=False,
        )
        assert not pending
    await first.send(NOTE, "done")
    await app.run_until_idle(advance=False)
    assert woken
    assert ran == ["w0"]
    expected = WorkflowStatus.QUEUED if lost == "status" else WorkflowStatus.PENDING
    assert (await second.status()).status is expected
    assert await _repair(app) == 1
    await app.run_until_idle(advance=False)
    assert ran == ["w0", "w1"]
    assert (await second.status()).status is WorkflowStatus.BLOCKED
    assert await _repair(app) == 0  # a scheduled workflow is left where it is


async def test_a_start_killed_before_its_gate_decided_is_taken_through_it_when_repeated(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer = await _checkpointer(app)
    gated = await _gated(app, "w0")
    waits, ran, (first,) = gated.kind, gated.ran, gated.started
    lost = _skip_once(monkeypatch, checkpointer._gates, "admit")
    with pytest.raises(Killed):  # after the record, before the gate's decision
        await waits.start("w1", id="again")
    assert lost
    assert await checkpointer.gate_counts(gate_name(waits.kind)) == GateCounts(admitted=1)
    await app.run_until_idle(advance=False)
    assert ran == ["w0"]  # no gate knows it, no worker sees it
    again = await waits.start("w1", id="again")
    assert (await again.status()).status is WorkflowStatus.QUEUED
    assert await checkpointer.gate_counts(gate_name(waits.kind)) == GateCounts(admitted=1, queued=1)
    await first.send(NOTE, "done")
    await app.run_until_idle(advance=False)
    assert ran == ["w0", "w1"]


async def test_a_repair_racing_a_normal_end_frees_the_slot_once(
    app: App, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer = await _checkpointer(app)
    gated = await _gated(app, "w0", "w1", "w2")
    waits, ran, (first, *rest) = gated.kind, gated.ran, gated.started
    late = LateMove(monkeypatch, checkpointer)
    await first.send(NOTE, "done")
    ending = asyncio.create_task(app.run_until_idle(advance=False))
    await late.reached()  # the end's move waits; the repairs' moves go first
    other = App(dsn, clock=ManualClock())  # another process repairing at once
    try:
        repairs: list[Awaitable[int]] = [_repair(app), _repair(other), _repair(other)]
        assert sum(await asyncio.gather(*repairs)) == 1
    finally:
        await other.close()
    late.go_on.set()
    await asyncio.wait_for(ending, 30)
    await app.run_until_idle(advance=False)
    assert ran == ["w0", "w1"]
    assert [(await h.status()).status for h in rest] == [
        WorkflowStatus.BLOCKED,
        WorkflowStatus.QUEUED,
    ]
    assert await checkpointer.gate_counts(gate_name(waits.kind)) == GateCounts(admitted=1, queued=1)


async def test_a_repair_that_read_an_end_before_a_resume_does_not_free_the_resumed_slot(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer = await _checkpointer(app)
    gated = await _gated(app, "w0", "w1")
    waits, ran, (first, second) = gated.kind, gated.ran, gated.started
    _skip_once(monkeypatch, checkpointer._gates, "move", answer=(False, []))
    await first.cancel()
    await app.run_until_idle(advance=False)
    assert (await first.status()).status is WorkflowStatus.CANCELLED
    late = LateMove(monkeypatch, checkpointer)
    repairing = asyncio.create_task(_repair(app))
    await late.reached()  # the repair read the end; its move waits
    assert await first.resume()
    late.go_on.set()
    assert await asyncio.wait_for(repairing, 10) == 0  # an older crossing than the resume
    await app.run_until_idle(advance=False)
    assert ran == ["w0"]
    assert (await first.status()).status is WorkflowStatus.BLOCKED
    assert (await second.status()).status is WorkflowStatus.QUEUED
    assert await checkpointer.gate_counts(gate_name(waits.kind)) == GateCounts(admitted=1, queued=1)


async def test_an_id_started_again_after_a_delete_whose_gate_move_was_lost_is_counted(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer = await _checkpointer(app)
    gated = await _gated(app)
    waits, ran = gated.kind, gated.ran
    first = await waits.start("w0", id="same")
    await app.run_until_idle(advance=False)
    await first.send(NOTE, "done")
    await app.run_until_idle(advance=False)
    assert await first.result(timeout=5) == "done"
    lost = _skip_once(monkeypatch, checkpointer._gates, "move", answer=(False, []))
    assert await (await app.stores()).durable(waits.kind).delete(first._key) > 0
    assert lost  # the gate still has the deleted workflow's mark and its crossing
    again = await waits.start("w1", id="same")
    other = await waits.start("w2")
    await app.run_until_idle(advance=False)
    assert await checkpointer.gate_counts(gate_name(waits.kind)) == GateCounts(admitted=1, queued=1)
    await again.send(NOTE, "done")  # its first crossing: the earlier one's is forgotten
    await app.run_until_idle(advance=False)
    assert ran == ["w0", "w1", "w2"]
    assert (await other.status()).status is WorkflowStatus.BLOCKED
