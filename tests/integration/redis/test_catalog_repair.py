"""The catalog's repair on a Redis server and a cluster: a status write whose second step
(the index, the catalog's lines and counts, the throughput ring; another slot) a killed
process never ran is brought by the repair, once, and the counts come out exact.

A kill is simulated by making the checkpointer's own step raise after the status script
ran (a wrapper around the store's call, never around Redis).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from durably.errors import Fenced, InvalidInputError
from durably.redis import RedisCheckpointer
from durably.redis.scripts import Script
from durably.stores.catalog import CatalogEntry, Line
from durably.stores.status import WorkflowStatus
from durably.stores.workflows import Pass
from tests.redis_service import namespace_for

pytestmark = pytest.mark.asyncio

KIND = "bill"


class Killed(Exception):
    """The process died here."""


def _kill_steps(
    monkeypatch: pytest.MonkeyPatch, checkpointer: RedisCheckpointer, doomed: set[str]
) -> list[str]:
    """Make the second step of the next status write of each workflow in ``doomed`` die
    (once each): the workflows whose step died."""
    indexing = checkpointer._indexing
    original = indexing.step
    died: list[str] = []

    async def step(workflow: str, *args: Any, **kwargs: Any) -> None:
        if workflow in doomed and workflow not in died:
            died.append(workflow)
            raise Killed
        await original(workflow, *args, **kwargs)

    monkeypatch.setattr(indexing, "step", step)
    return died


def _die_before_the_script(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next status write die after its intent landed, before its script ran."""
    original = Script.run_after

    async def run_after(self: Script, client: Any, before: tuple[str, ...], *rest: Any) -> Any:
        monkeypatch.setattr(Script, "run_after", original)
        await client.execute_command(*before)
        raise Killed

    monkeypatch.setattr(Script, "run_after", run_after)


async def _started(checkpointer: RedisCheckpointer, workflow: str, tenant: str) -> Pass:
    await checkpointer.catalog(workflow, CatalogEntry(tenant, KIND, 1))
    holder = await checkpointer.claim(workflow, 30, 30)
    assert holder is not None
    await checkpointer.set_status(holder, WorkflowStatus.RUNNING)
    return holder


async def _slept_unindexed(
    checkpointer: RedisCheckpointer, monkeypatch: pytest.MonkeyPatch
) -> Pass:
    """Workflow ``w`` of tenant ``acme``, running, then sleeping with the step of that
    report lost: its pass."""
    holder = await _started(checkpointer, "w", "acme")
    _kill_steps(monkeypatch, checkpointer, {"w"})
    await _report(checkpointer, holder, WorkflowStatus.SLEEPING)
    return holder


async def _report(checkpointer: RedisCheckpointer, holder: Pass, status: WorkflowStatus) -> None:
    try:
        await checkpointer.set_status(holder, status)
    except Killed:
        pass


async def _truth(checkpointer: RedisCheckpointer, workflows: list[str]) -> Counter[WorkflowStatus]:
    """The statuses the workflows themselves hold, counted."""
    infos = [await checkpointer.get_status(w) for w in workflows]
    return Counter(info.status for info in infos if info is not None)


async def _tally(checkpointer: RedisCheckpointer, tenant: str | None = None) -> Counter[Any]:
    return Counter(
        {status: n for (_, status), n in (await checkpointer.tally(tenant)).items() if n}
    )


async def _ended(checkpointer: RedisCheckpointer) -> tuple[int, int]:
    minutes = (await checkpointer.finished_per_minute()).get(KIND, [])
    return sum(m.completed for m in minutes), sum(m.failed for m in minutes)


async def test_statuses_whose_catalog_step_died_are_counted_exactly_after_the_repair(
    any_redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer = RedisCheckpointer(any_redis, key_prefix=namespace_for(any_redis))
    workflows = [f"w{n}" for n in range(12)]
    holders = [await _started(checkpointer, w, f"t{n % 2}") for n, w in enumerate(workflows)]
    died = _kill_steps(monkeypatch, checkpointer, set(workflows[1::2]))
    ends = [WorkflowStatus.COMPLETED, WorkflowStatus.FAILED, WorkflowStatus.SLEEPING]
    for n, holder in enumerate(holders):
        await _report(checkpointer, holder, ends[n % 3])
    assert len(died) == 6
    truth = await _truth(checkpointer, workflows)
    assert await _tally(checkpointer) != truth  # the lost steps show
    assert await checkpointer.listed(Line(status=WorkflowStatus.RUNNING), limit=100) != []

    assert await checkpointer.repair_catalog(limit=100, grace=0) == 6

    assert await _tally(checkpointer) == truth
    for tenant in ("t0", "t1"):
        mine = [w for n, w in enumerate(workflows) if n % 2 == int(tenant[1])]
        assert await _tally(checkpointer, tenant) == await _truth(checkpointer, mine)
    assert await checkpointer.listed(Line(status=WorkflowStatus.RUNNING), limit=100) == []
    assert await checkpointer.list_status(status=WorkflowStatus.RUNNING) == []
    assert await _ended(checkpointer) == (4, 4)
    # A second round finds nothing and counts nothing twice.
    assert await checkpointer.repair_catalog(limit=100, grace=0) == 0
    assert await _ended(checkpointer) == (4, 4)


async def test_the_next_write_alone_brings_the_counts_back_and_a_late_repair_adds_nothing(
    any_redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer = RedisCheckpointer(any_redis, key_prefix=namespace_for(any_redis))
    holder = await _slept_unindexed(checkpointer, monkeypatch)
    assert await _tally(checkpointer) == Counter({WorkflowStatus.RUNNING: 1})
    await checkpointer.set_status(holder, WorkflowStatus.COMPLETED)
    assert await _tally(checkpointer) == Counter({WorkflowStatus.COMPLETED: 1})
    assert await checkpointer.repair_catalog(limit=10, grace=0) == 1
    assert await _tally(checkpointer) == Counter({WorkflowStatus.COMPLETED: 1})
    assert await _ended(checkpointer) == (1, 0)


async def test_a_repair_that_read_before_a_newer_write_does_not_put_the_old_status_back(
    any_redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer = RedisCheckpointer(any_redis, key_prefix=namespace_for(any_redis))
    holder = await _slept_unindexed(checkpointer, monkeypatch)
    indexing = checkpointer._indexing
    read: Callable[[list[str]], Awaitable[Any]] = indexing._reported

    async def read_then_write(workflows: list[str]) -> Any:
        found = await read(workflows)  # SLEEPING, read before the write below lands
        await checkpointer.set_status(holder, WorkflowStatus.COMPLETED)
        return found

    monkeypatch.setattr(indexing, "_reported", read_then_write)
    assert await checkpointer.repair_catalog(limit=10, grace=0) == 1
    assert await _tally(checkpointer) == Counter({WorkflowStatus.COMPLETED: 1})
    assert [r.workflow for r in await checkpointer.listed(Line(status=WorkflowStatus.COMPLETED))]
    assert await checkpointer.listed(Line(status=WorkflowStatus.SLEEPING)) == []
    assert await _ended(checkpointer) == (1, 0)


async def test_a_write_still_in_flight_is_left_to_its_writer(
    any_redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer = RedisCheckpointer(any_redis, key_prefix=namespace_for(any_redis))
    holder = await _started(checkpointer, "w", "acme")
    _die_before_the_script(monkeypatch)  # or not run yet: the intent alone
    await _report(checkpointer, holder, WorkflowStatus.COMPLETED)
    assert await checkpointer.repair_catalog(limit=10) == 0  # younger than the grace
    unindexed = checkpointer._indexing._unindexed
    assert await any_redis.zcard(unindexed) == 1
    assert await checkpointer.repair_catalog(limit=10, grace=0) == 1
    assert await any_redis.zcard(unindexed) == 0
    assert await _tally(checkpointer) == Counter({WorkflowStatus.RUNNING: 1})


async def test_a_deleted_workflow_whose_step_died_leaves_every_line_and_count_on_repair(
    any_redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer = RedisCheckpointer(any_redis, key_prefix=namespace_for(any_redis))
    await _started(checkpointer, "gone", "acme")
    await _started(checkpointer, "kept", "acme")
    _kill_steps(monkeypatch, checkpointer, {"gone"})
    with pytest.raises(Killed):
        await checkpointer.discard("gone")
    assert await _tally(checkpointer) == Counter({WorkflowStatus.RUNNING: 2})
    assert await checkpointer.repair_catalog(limit=10, grace=0) == 1
    assert await _tally(checkpointer) == Counter({WorkflowStatus.RUNNING: 1})
    assert [r.workflow for r in await checkpointer.listed(Line(), limit=10)] == ["kept"]


async def test_a_start_without_a_status_yet_keeps_its_entry_on_repair(
    any_redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer = RedisCheckpointer(any_redis, key_prefix=namespace_for(any_redis))
    await checkpointer.supply("w", "durably:start", {"kind": KIND})
    await checkpointer.catalog("w", CatalogEntry("acme", KIND, 1))
    holder = await checkpointer.claim("w", 30, 30)
    assert holder is not None
    _die_before_the_script(monkeypatch)
    await _report(checkpointer, holder, WorkflowStatus.RUNNING)
    assert await checkpointer.get_status("w") is None
    assert await checkpointer.repair_catalog(limit=10, grace=0) == 1
    assert await _tally(checkpointer) == Counter({WorkflowStatus.PENDING: 1})
    assert [r.workflow for r in await checkpointer.listed(Line(), limit=10)] == ["w"]
    assert await any_redis.zcard(checkpointer._indexing._unindexed) == 0


async def test_repairs_in_two_processes_beside_new_writes_leave_exact_counts(
    any_redis: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = namespace_for(any_redis)
    writer = RedisCheckpointer(any_redis, key_prefix=ns)
    workflows = [f"w{n:02d}" for n in range(40)]
    holders = {w: await _started(writer, w, f"t{n % 3}") for n, w in enumerate(workflows)}
    died = _kill_steps(monkeypatch, writer, set(workflows[::2]))
    for n, workflow in enumerate(workflows):
        ending = WorkflowStatus.COMPLETED if n % 4 == 0 else WorkflowStatus.SLEEPING
        await _report(writer, holders[workflow], ending)
    assert len(died) == 20
    repairers = [RedisCheckpointer(any_redis, key_prefix=ns) for _ in range(2)]
    # Workflows that slept (some with their step lost) wake and sleep again meanwhile.
    sleepers = [w for n, w in enumerate(workflows) if n % 4 == 2]

    async def wake(workflow: str) -> None:
        await writer.set_status(holders[workflow], WorkflowStatus.RUNNING)
        await writer.set_status(holders[workflow], WorkflowStatus.BLOCKED)

    async def repair(checkpointer: RedisCheckpointer) -> int:
        total = 0
        for _ in range(4):
            total += await checkpointer.repair_catalog(limit=3, grace=0)
        return total

    repaired = asyncio.gather(*(repair(r) for r in repairers))
    woken = asyncio.gather(*map(wake, sleepers))
    assert sum(await repaired) >= 1
    await woken
    while await repairers[0].repair_catalog(limit=100, grace=0):
        pass
    assert await _tally(writer) == await _truth(writer, workflows)
    for tenant in ("t0", "t1", "t2"):
        mine = [w for n, w in enumerate(workflows) if n % 3 == int(tenant[1])]
        assert await _tally(writer, tenant) == await _truth(writer, mine)
    assert await _ended(writer) == (10, 0)


async def test_a_fenced_report_leaves_no_intent_behind(any_redis: Any) -> None:
    checkpointer = RedisCheckpointer(any_redis, key_prefix=namespace_for(any_redis))
    holder = await _started(checkpointer, "w", "acme")
    await checkpointer.discard("w")
    with pytest.raises(Fenced):
        await checkpointer.set_status(holder, WorkflowStatus.COMPLETED)
    assert await any_redis.zcard(checkpointer._indexing._unindexed) == 0


async def test_a_bad_repair_is_refused_before_any_read(any_redis: Any) -> None:
    checkpointer = RedisCheckpointer(any_redis, key_prefix=namespace_for(any_redis))
    with pytest.raises(InvalidInputError, match="limit"):
        await checkpointer.repair_catalog(limit=0)
    with pytest.raises(InvalidInputError, match="grace"):
        await checkpointer.repair_catalog(grace=-1)
