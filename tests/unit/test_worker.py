"""The Worker over the memory backing: concurrency, keep-alive, maintenance, retries,
graceful shutdown and structured logging."""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from durably import Clock, ManualClock, SystemClock, WorkflowStatus, WorkItem
from durably.engine.runtime import Execution
from durably.engine.worker import Worker, start_workflow
from durably.errors import ConfigurationError, DurablyError
from durably.memory import MemoryCheckpointer, MemoryDurable, MemoryScheduler, MemoryWorkQueue
from durably.stores import QueuePolicy


def quick(
    name: str | None = None,
    clock: Clock | None = None,
    grace_seconds: float = 30.0,
    maintenance_seconds: float = 0.02,
) -> Worker:
    """A worker that polls and maintains every 20 ms."""
    return Worker(
        name=name,
        clock=clock,
        poll_seconds=0.02,
        grace_seconds=grace_seconds,
        maintenance_seconds=maintenance_seconds,
    )


async def eventually(check: Callable[[], Awaitable[bool] | bool], timeout: float = 5.0) -> None:
    """Wait until ``check`` holds (polling a real condition, bounded by ``timeout``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


@asynccontextmanager
async def serving(worker: Worker) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(worker.run(install_signal_handlers=False))
    try:
        yield task
    finally:
        worker.stop()
        await asyncio.wait_for(task, timeout=10)


def memory_durable(kind: str = "default", lease: float = 5.0) -> MemoryDurable:
    return MemoryDurable(MemoryCheckpointer(), MemoryScheduler(lease=lease, namespace=kind))


def item(item_id: str, tenant: str = "acme", **payload: str) -> WorkItem:
    return WorkItem(id=item_id, tenant=tenant, payload=payload)


# --- work queues ---------------------------------------------------------------------------


async def test_a_worker_never_runs_more_handlers_than_its_concurrency_and_claims_only_into_free_slots() -> (  # noqa: E501
    None
):
    queue = MemoryWorkQueue(ManualClock())
    for n in range(12):
        await queue.enqueue(item(f"item-{n}"))
    gate = asyncio.Event()
    running = 0
    peak = 0
    handled: list[str] = []

    async def handler(work: WorkItem) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await gate.wait()
        running -= 1
        handled.append(work.id)

    worker = quick()
    worker.handle(queue, handler, concurrency=3)
    async with serving(worker):
        await eventually(lambda: running == 3)
        for _ in range(5):  # several claim-loop turns with every slot taken
            await asyncio.sleep(0.03)
            stats = await queue.stats()
            assert (stats.claimed, stats.depth) == (3, 9)
        gate.set()
        await eventually(lambda: len(handled) == 12)
    assert peak == 3
    stats = await queue.stats()
    assert (stats.depth, stats.claimed, stats.dead_lettered) == (0, 0, 0)


async def test_a_failing_handler_fails_its_item_with_its_repr_and_retryability() -> None:
    clock = ManualClock()
    queue = MemoryWorkQueue(clock, QueuePolicy(max_attempts=3, backoff_seconds=10))
    await queue.enqueue(item("flaky"))
    await queue.enqueue(item("broken"))
    seen: list[str] = []

    async def handler(work: WorkItem) -> None:
        seen.append(work.id)
        if work.id == "broken":
            raise DurablyError("cannot ever work", retryable=False)
        raise ValueError("try later")

    worker = quick(clock=clock)
    worker.handle(queue, handler)
    async with serving(worker):
        await eventually(lambda: sorted(seen) == ["broken", "flaky"])
        await eventually(lambda: _depth_and_dead(queue, (1, 1)))
        clock.advance(10)  # the flaky item's backoff
        await eventually(lambda: seen.count("flaky") == 2)
    dead = await queue.dead_letters(tenant="acme")
    assert [d.id for d in dead] == ["broken"]
    assert dead[0].failures == ("DurablyError('cannot ever work')",)
    assert dead[0].attempts == 1


class _Garbled(Exception):
    """An exception whose repr holds what no backing can store."""

    def __repr__(self) -> str:
        return "Garbled(\x00 \ud800)"


async def test_a_failure_whose_repr_no_backing_can_store_is_recorded_mended() -> None:
    clock = ManualClock()
    queue = MemoryWorkQueue(clock, QueuePolicy(max_attempts=1))
    await queue.enqueue(item("garbled"))

    async def handler(work: WorkItem) -> None:
        raise _Garbled

    worker = quick(clock=clock)
    worker.handle(queue, handler)
    async with serving(worker):
        await eventually(lambda: _depth_and_dead(queue, (0, 1)))
    dead = await queue.dead_letters(tenant="acme")
    assert [d.failures for d in dead] == [("Garbled(\ufffd \ufffd)",)]


async def test_a_handler_failing_before_it_returns_an_awaitable_fails_only_its_item() -> None:
    queue = MemoryWorkQueue(ManualClock(), QueuePolicy(max_attempts=1))
    for name in ("first", "bad", "last"):
        await queue.enqueue(item(name))
    done: list[str] = []

    def handler(work: WorkItem) -> Awaitable[None]:
        if work.id == "bad":
            raise RuntimeError("refused before starting")

        async def run() -> None:
            done.append(work.id)

        return run()

    worker = quick()
    worker.handle(queue, handler, concurrency=3)
    async with serving(worker):
        await eventually(lambda: sorted(done) == ["first", "last"])
        await eventually(lambda: _depth_and_dead(queue, (0, 1)))
    dead = await queue.dead_letters(tenant="acme")
    assert [(d.id, d.failures) for d in dead] == [
        ("bad", ("RuntimeError('refused before starting')",))
    ]


async def _depth_and_dead(queue: MemoryWorkQueue, expected: tuple[int, int]) -> bool:
    stats = await queue.stats()
    return (stats.depth, stats.dead_lettered) == expected


async def test_an_item_longer_than_one_lease_is_never_taken_over_while_its_worker_lives() -> None:
    # The store's lease must really pass here, so the clock is the system's.
    queue = MemoryWorkQueue(SystemClock(), QueuePolicy(lease_seconds=0.45))
    await queue.enqueue(item("long"))
    runs: list[str] = []

    async def handler(work: WorkItem) -> None:
        runs.append(work.id)
        await asyncio.sleep(1.35)  # three leases

    first, second = quick(name="first"), quick(name="second")
    first.handle(queue, handler)
    second.handle(queue, handler)
    async with serving(first):
        await eventually(lambda: runs == ["long"])
        async with serving(second):  # claims and reaps every 20 ms meanwhile
            await eventually(lambda: _depth_and_claimed(queue, (0, 0)))
    assert runs == ["long"]
    stats = await queue.stats()
    assert (stats.reaped, stats.dead_lettered) == (0, 0)


async def _depth_and_claimed(queue: MemoryWorkQueue, expected: tuple[int, int]) -> bool:
    stats = await queue.stats()
    return (stats.depth, stats.claimed) == expected


async def test_a_handler_whose_lease_is_lost_is_cancelled_and_its_item_not_settled() -> None:
    clock = ManualClock()
    queue = MemoryWorkQueue(clock, QueuePolicy(lease_seconds=0.15))
    await queue.enqueue(item("stuck"))
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def handler(work: WorkItem) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    worker = Worker(clock=clock, poll_seconds=0.02, maintenance_seconds=60)
    worker.handle(queue, handler)
    async with serving(worker):
        await started.wait()
        clock.advance(1.0)  # the lease lapses before the next heartbeat
        await asyncio.wait_for(cancelled.wait(), timeout=5)
        stats = await queue.stats()
        assert (stats.claimed, stats.dead_lettered) == (1, 0)  # left for reap


async def test_a_handler_raising_cancelled_error_itself_fails_its_item_rather_than_holding_it() -> (
    None
):
    queue = MemoryWorkQueue(policy=QueuePolicy(max_attempts=2, backoff_seconds=0.01))
    await queue.enqueue(item("flaky"))
    await queue.enqueue(item("doomed"))
    calls: list[str] = []

    async def handler(work: WorkItem) -> None:
        calls.append(work.id)
        if work.id == "doomed" or calls.count(work.id) == 1:
            raise asyncio.CancelledError  # not the worker's cancel: the handler's own

    worker = quick()
    worker.handle(queue, handler, concurrency=2)
    async with serving(worker):
        await eventually(lambda: calls.count("flaky") == 2 and calls.count("doomed") == 2)
        await eventually(lambda: _stats_are(queue, depth=0, claimed=0, dead_lettered=1), timeout=5)
    (dead,) = await queue.dead_letters(tenant="acme")
    assert dead.id == "doomed"
    assert len(dead.failures) == 2
    assert all(failure.startswith("StrayCancellationError(") for failure in dead.failures)


async def _stats_are(queue: MemoryWorkQueue, **expected: int) -> bool:
    stats = await queue.stats()
    return all(getattr(stats, name) == value for name, value in expected.items())


async def test_a_handler_swallowing_the_cancel_of_a_lost_lease_never_settles_a_newer_attempt() -> (
    None
):
    swallowed = asyncio.Event()

    async def first(second_started: asyncio.Event) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            swallowed.set()  # and carries on: returns once the next attempt runs
        await second_started.wait()

    # The heartbeat (every 0.05 s here) sees the lapse and cancels before the reap.
    lapsed = functools.partial(asyncio.wait_for, swallowed.wait(), 5)
    await _a_second_attempt_runs_alone(lease=0.15, first=first, lapsed=lapsed)


async def test_an_item_reaped_and_claimed_again_by_its_own_worker_stops_the_older_attempt() -> None:
    # Its heartbeat never sees the lapse (it beats every 10 s of real time here): the
    # reap and the new claim come first, and the new claim is what stops it.
    cancelled = asyncio.Event()

    async def first(second_started: asyncio.Event) -> None:
        try:
            await second_started.wait()  # then returns, as if its work were done
        except asyncio.CancelledError:
            cancelled.set()
            raise

    await _a_second_attempt_runs_alone(lease=30, first=first)
    assert cancelled.is_set()


async def _a_second_attempt_runs_alone(
    lease: float,
    first: Callable[[asyncio.Event], Awaitable[None]],
    lapsed: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Serve one item whose first attempt runs ``first(second_started)``; let its lease
    lapse (then await ``lapsed``), reap the item and let this worker claim it again; check
    that the first attempt settles nothing while the second runs, and that the second
    completes it."""
    clock = ManualClock()
    queue = MemoryWorkQueue(clock, QueuePolicy(lease_seconds=lease, backoff_seconds=1))
    await queue.enqueue(item("stuck"))
    first_started, second_started, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def handler(work: WorkItem) -> None:
        if not first_started.is_set():
            first_started.set()
            await first(second_started)
            return
        second_started.set()
        await release.wait()

    worker = Worker(clock=clock, poll_seconds=0.02, maintenance_seconds=60, grace_seconds=1)
    worker.handle(queue, handler)
    async with serving(worker):
        try:
            await first_started.wait()
            clock.advance(lease * 4)  # the lease lapses
            if lapsed is not None:
                await lapsed()
            assert [reaped.id for reaped in await queue.reap()] == ["stuck"]
            clock.advance(2.0)  # past the reap's backoff: this worker claims it again
            await asyncio.wait_for(second_started.wait(), timeout=5)
            await asyncio.sleep(0.2)  # the first attempt has ended meanwhile
            assert await _stats_are(queue, claimed=1)  # still the second attempt's
        finally:
            release.set()
        await eventually(lambda: _stats_are(queue, depth=0, claimed=0, dead_lettered=0))


async def test_a_lapsed_item_of_a_dead_worker_is_reaped_and_served_again() -> None:
    clock = ManualClock()
    queue = MemoryWorkQueue(clock, QueuePolicy(lease_seconds=30, backoff_seconds=5))
    await queue.enqueue(item("orphan"))
    assert await queue.claim(worker="gone") is not None
    served: list[WorkItem] = []

    async def handler(work: WorkItem) -> None:
        served.append(work)

    worker = quick(clock=clock)
    worker.handle(queue, handler)
    async with serving(worker):
        clock.advance(31)
        await eventually(lambda: _reaped(queue))
        clock.advance(5)
        await eventually(lambda: len(served) == 1)
    assert served[0].attempts == 1
    assert served[0].failures == ("lease expired",)


async def _reaped(queue: MemoryWorkQueue) -> bool:
    return (await queue.stats()).reaped == 1


async def test_items_a_restarted_worker_of_the_same_name_held_are_adopted_at_start() -> None:
    clock = ManualClock()
    queue = MemoryWorkQueue(clock)
    await queue.enqueue(item("held-before-restart"))
    assert await queue.claim(worker="node-1") is not None
    served: list[str] = []

    async def handler(work: WorkItem) -> None:
        served.append(work.id)

    worker = quick(name="node-1", clock=clock)
    worker.handle(queue, handler)
    async with serving(worker):
        await eventually(lambda: served == ["held-before-restart"])


# --- workflows -----------------------------------------------------------------------------


async def test_a_started_workflow_runs_to_completion_and_reports_completed() -> None:
    durable = memory_durable("greet")

    async def body(run: Execution) -> str:
        name = await run.awaiting("input", str)
        return await run.step("greeting", lambda: f"hello {name}")

    worker = quick()
    worker.workflow("greet", body, durable)
    async with serving(worker):
        await start_workflow(durable, "wf: {1}", "ada")
        await eventually(lambda: _status_is(durable, "wf: {1}", WorkflowStatus.COMPLETED))
    assert (await durable.checkpointer.load("wf: {1}"))["greeting"] == "hello ada"


async def _status_is(durable: MemoryDurable, workflow: str, status: WorkflowStatus) -> bool:
    info = await durable.checkpointer.get_status(workflow)
    return info is not None and info.status is status


async def test_a_workflow_pass_longer_than_alive_keeps_its_claim() -> None:
    durable = memory_durable("slow", lease=0.45)
    effects: list[str] = []
    in_step = asyncio.Event()

    async def body(run: Execution) -> None:
        async def long_effect() -> str:
            effects.append(run.workflow)
            in_step.set()
            await asyncio.sleep(1.35)  # three liveness windows
            return "done"

        await run.step("long", long_effect)

    first, second = quick(name="first"), quick(name="second")
    first.workflow("slow", body, durable, alive=0.45)
    second.workflow("slow", body, durable, alive=0.45)
    async with serving(first), serving(second):
        await start_workflow(durable, "wf")
        await in_step.wait()
        for _ in range(4):
            await asyncio.sleep(0.25)
            assert await durable.checkpointer.claim("wf", 5.0, 0.45) is None
        await eventually(lambda: _status_is(durable, "wf", WorkflowStatus.COMPLETED))
    assert effects == ["wf"]


async def test_a_workflow_held_by_a_dead_pass_runs_once_its_claim_lapses_not_a_lease_later() -> (
    None
):
    durable = memory_durable("orphan", lease=60.0)

    async def body(run: Execution) -> str:
        return await run.step("work", lambda: "done")

    # A pass whose worker died: its claim lives 0.5 s more, never renewed.
    assert await durable.checkpointer.claim("wf", 0.5, 0.5) is not None
    worker = quick()
    worker.workflow("orphan", body, durable, alive=1.0)
    async with serving(worker):
        await start_workflow(durable, "wf")
        # Refused while the dead claim lives, the delivery comes back within a tenth of
        # `alive`, not after the scheduler's 60 s lease.
        await eventually(lambda: _status_is(durable, "wf", WorkflowStatus.COMPLETED), 10.0)


async def test_a_sleeping_workflow_runs_again_after_its_deadline_on_the_workers_clock() -> None:
    clock = ManualClock()
    durable = memory_durable("nap")
    passes: list[float] = []

    async def body(run: Execution) -> str:
        passes.append(run.clock.now())
        await run.sleep("a day", 86_400)
        return "rested"

    worker = quick(clock=clock)
    worker.workflow("nap", body, durable)
    async with serving(worker):
        await start_workflow(durable, "sleeper")
        await eventually(lambda: _status_is(durable, "sleeper", WorkflowStatus.SLEEPING))
        clock.advance(86_399)
        await asyncio.sleep(0.1)  # five maintenance rounds, one second early
        assert len(passes) == 1
        clock.advance(1)
        await eventually(lambda: _status_is(durable, "sleeper", WorkflowStatus.COMPLETED))
    assert len(passes) == 2


async def test_a_wait_for_approval_with_a_timeout_in_a_task_group_runs_again_at_the_timeout() -> (
    None
):
    clock = ManualClock()
    start = clock.now()
    durable = memory_durable("approve")
    passes: list[float] = []
    timeout = 3600.0

    async def body(run: Execution) -> str:
        passes.append(run.clock.now())
        if run.clock.now() >= start + timeout and run.pending("approval"):
            return "timed out"
        async with asyncio.TaskGroup() as group:
            approval = group.create_task(run.awaiting("approval", str))
            group.create_task(run.sleep("timeout", timeout))
        return approval.result()

    worker = quick(clock=clock)
    worker.workflow("approve", body, durable)
    async with serving(worker):
        await start_workflow(durable, "ask")
        await eventually(lambda: _status_is(durable, "ask", WorkflowStatus.BLOCKED))
        clock.advance(timeout - 1)
        await asyncio.sleep(0.1)  # five maintenance rounds, one second early
        assert passes == [start]
        clock.advance(1)
        await eventually(lambda: _status_is(durable, "ask", WorkflowStatus.COMPLETED))
    assert passes == [start, start + timeout]
    assert (await durable.checkpointer.load("ask")).get("timeout") == start + timeout


async def test_a_blocked_workflow_runs_again_when_its_value_arrives() -> None:
    durable = memory_durable("approve")

    async def body(run: Execution) -> object:
        await run.awaiting("input")
        return await run.awaiting("approval")

    worker = quick()
    worker.workflow("approve", body, durable)
    async with serving(worker):
        await start_workflow(durable, "ask")
        await eventually(lambda: _status_is(durable, "ask", WorkflowStatus.BLOCKED))
        await durable.arrive("ask", "approval", "yes")
        await eventually(lambda: _status_is(durable, "ask", WorkflowStatus.COMPLETED))


async def test_a_failing_body_is_retried_with_backoff_then_failed_with_its_error_kept() -> None:
    clock = ManualClock()
    durable = memory_durable("doomed")
    attempts: list[float] = []

    async def body(run: Execution) -> None:
        attempts.append(run.clock.now())
        raise RuntimeError(f"boom #{len(attempts)}")

    worker = quick(clock=clock)
    policy = QueuePolicy(max_attempts=3, backoff_seconds=10)
    worker.workflow("doomed", body, durable, policy=policy)
    async with serving(worker):
        await start_workflow(durable, "wf")
        await eventually(lambda: _attempts_are(durable, "wf", 1, WorkflowStatus.SLEEPING))
        clock.advance(9)
        await asyncio.sleep(0.1)
        assert len(attempts) == 1  # backoff_for(1) = 10 s has not passed
        clock.advance(1)
        await eventually(lambda: _attempts_are(durable, "wf", 2, WorkflowStatus.SLEEPING))
        clock.advance(20)  # backoff_for(2)
        await eventually(lambda: _attempts_are(durable, "wf", 3, WorkflowStatus.FAILED))
        await asyncio.sleep(0.1)
    assert len(attempts) == 3
    assert [b - a for a, b in itertools.pairwise(attempts)] == [10, 20]
    info = await durable.checkpointer.get_status("wf")
    assert info is not None
    assert info.last_error == "RuntimeError('boom #3')"
    failed = await durable.checkpointer.list_status(status=WorkflowStatus.FAILED)
    assert [f.workflow for f in failed] == ["wf"]


async def _attempts_are(
    durable: MemoryDurable, workflow: str, attempts: int, status: WorkflowStatus
) -> bool:
    info = await durable.checkpointer.get_status(workflow)
    return info is not None and (info.attempts, info.status) == (attempts, status)


async def test_a_body_failing_with_a_non_retryable_error_fails_at_once() -> None:
    durable = memory_durable("strict")

    async def body(run: Execution) -> None:
        raise ConfigurationError("no such model")

    worker = quick()
    worker.workflow("strict", body, durable)
    async with serving(worker):
        await start_workflow(durable, "wf")
        await eventually(lambda: _attempts_are(durable, "wf", 1, WorkflowStatus.FAILED))


async def test_a_body_raising_cancelled_error_itself_is_a_failed_attempt_not_a_loop() -> None:
    durable = memory_durable("confused")
    passes: list[int] = []

    async def body(run: Execution) -> None:
        passes.append(len(passes) + 1)
        raise asyncio.CancelledError  # nobody cancelled the pass

    worker = quick()
    policy = QueuePolicy(max_attempts=2, backoff_seconds=0.01)
    worker.workflow("confused", body, durable, policy=policy)
    async with serving(worker):
        await start_workflow(durable, "wf")
        await eventually(lambda: _attempts_are(durable, "wf", 2, WorkflowStatus.FAILED))
        await asyncio.sleep(0.1)
    assert passes == [1, 2]
    info = await durable.checkpointer.get_status("wf")
    assert info is not None
    assert info.last_error is not None
    assert info.last_error.startswith("StrayCancellationError(")


async def test_a_workflow_deleted_during_its_pass_is_dropped_quietly() -> None:
    durable = memory_durable("gone")
    in_step = asyncio.Event()
    finish = asyncio.Event()

    async def body(run: Execution) -> None:
        async def effect() -> int:
            in_step.set()
            await finish.wait()
            return 1

        await run.step("one", effect)

    worker = quick()
    worker.workflow("gone", body, durable)
    async with serving(worker):
        await start_workflow(durable, "wf")
        await in_step.wait()
        await durable.delete("wf")
        finish.set()
        await asyncio.sleep(0.1)
    assert await durable.checkpointer.load("wf") == {}
    assert await durable.checkpointer.get_status("wf") is None


# --- shutdown ------------------------------------------------------------------------------


async def test_stop_lets_in_flight_work_finish_within_the_grace_and_claims_nothing_more() -> None:
    queue = MemoryWorkQueue(ManualClock())
    await queue.enqueue(item("in-flight"))
    started = asyncio.Event()
    release = asyncio.Event()
    done: list[str] = []

    async def handler(work: WorkItem) -> None:
        started.set()
        await release.wait()
        done.append(work.id)

    worker = quick(grace_seconds=5)
    worker.handle(queue, handler)
    running = asyncio.create_task(worker.run(install_signal_handlers=False))
    await started.wait()
    worker.stop()
    await queue.enqueue(item("after-stop"))
    await asyncio.sleep(0.1)
    assert not running.done()
    release.set()
    await asyncio.wait_for(running, timeout=5)
    assert done == ["in-flight"]
    stats = await queue.stats()
    assert (stats.depth, stats.claimed) == (1, 0)


async def test_work_outliving_the_grace_is_given_back_and_another_worker_finishes_it() -> None:
    queue = MemoryWorkQueue(ManualClock())
    durable = memory_durable("job")
    await queue.enqueue(item("item"))
    who: list[tuple[str, str]] = []
    both_started = asyncio.Event()
    hang = True

    async def handler(work: WorkItem) -> None:
        who.append(("item", worker_name()))
        if len(who) == 2:
            both_started.set()
        if hang:
            await asyncio.Event().wait()

    async def body(run: Execution) -> str:
        async def effect() -> str:
            who.append(("workflow", worker_name()))
            if len(who) == 2:
                both_started.set()
            if hang:
                await asyncio.Event().wait()
            return "ok"

        return await run.step("only", effect)

    first = quick(name="first", grace_seconds=0.1)
    first.handle(queue, handler)
    first.workflow("job", body, durable)
    current: dict[str, str] = {"name": "first"}

    def worker_name() -> str:
        return current["name"]

    running = asyncio.create_task(first.run(install_signal_handlers=False))
    await start_workflow(durable, "wf")
    await asyncio.wait_for(both_started.wait(), timeout=5)
    first.stop()
    await asyncio.wait_for(running, timeout=5)
    stats = await queue.stats()
    assert (stats.depth, stats.claimed) == (1, 0)  # adopted: queued again at once

    hang = False
    current["name"] = "second"
    second = quick(name="second")
    second.handle(queue, handler)
    second.workflow("job", body, durable)
    async with serving(second):
        await eventually(lambda: _status_is(durable, "wf", WorkflowStatus.COMPLETED))
        await eventually(lambda: ("item", "second") in who)
    assert sorted(who) == [
        ("item", "first"),
        ("item", "second"),
        ("workflow", "first"),
        ("workflow", "second"),
    ]


async def test_sigterm_stops_a_worker_gracefully() -> None:
    queue = MemoryWorkQueue(ManualClock())

    async def handler(work: WorkItem) -> None:
        return None

    worker = quick()
    worker.handle(queue, handler)
    running = asyncio.create_task(worker.run())
    await eventually(lambda: worker.running)
    await asyncio.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(running, timeout=5)
    assert not worker.running


# --- logging and arguments -----------------------------------------------------------------


async def test_the_worker_logs_through_durably_worker_with_structured_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="durably.worker")
    queue = MemoryWorkQueue(ManualClock())
    durable = memory_durable("kind")
    await queue.enqueue(item("logged", tenant="t1"))
    done = asyncio.Event()

    async def handler(work: WorkItem) -> None:
        done.set()

    async def body(run: Execution) -> int:
        return 1

    worker = quick(name="w-1")
    worker.handle(queue, handler, name="default")
    worker.workflow("kind", body, durable)
    async with serving(worker):
        await start_workflow(durable, "wf-logged")
        await done.wait()
        await eventually(lambda: _status_is(durable, "wf-logged", WorkflowStatus.COMPLETED))
    records = [r for r in caplog.records if r.name == "durably.worker"]
    completed = [r for r in records if getattr(r, "item", None) == "logged"]
    assert completed
    assert {completed[-1].worker, completed[-1].queue, completed[-1].tenant} == {  # type: ignore[attr-defined]
        "w-1",
        "default",
        "t1",
    }
    passes = [r for r in records if getattr(r, "workflow", None) == "wf-logged"]
    assert passes
    assert (passes[-1].worker, passes[-1].kind) == ("w-1", "kind")  # type: ignore[attr-defined]


async def test_registration_refuses_bad_arguments() -> None:
    queue = MemoryWorkQueue()
    durable = memory_durable("right")

    async def handler(work: WorkItem) -> None:
        return None

    async def body(run: Execution) -> None:
        return None

    worker = Worker()
    with pytest.raises(ValueError, match="concurrency"):
        worker.handle(queue, handler, concurrency=0)
    with pytest.raises(ValueError, match="namespace"):
        worker.workflow("wrong", body, durable)
    with pytest.raises(ValueError, match="alive"):
        worker.workflow("right", body, durable, alive=0)
    worker.workflow("right", body, durable)
    with pytest.raises(ValueError, match="already"):
        worker.workflow("right", body, durable)
    worker.handle(queue, handler)
    with pytest.raises(ValueError, match="already"):
        worker.handle(queue, handler)
    with pytest.raises(ValueError, match="poll_seconds"):
        Worker(poll_seconds=0)
    with pytest.raises(ValueError, match="nothing to serve"):
        await Worker().run()


def test_a_default_worker_name_is_unique_per_instance() -> None:
    assert Worker().name != Worker().name
    assert Worker(name="fixed").name == "fixed"


async def test_a_pass_that_outlives_its_budget_is_cancelled_and_run_again() -> None:
    durable = memory_durable("capped", lease=5.0)
    tries: list[str] = []
    cancelled = asyncio.Event()

    async def body(run: Execution) -> str:
        async def effect() -> str:
            tries.append(run.workflow)
            if len(tries) == 1:
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    cancelled.set()
                    raise
            return "ok"

        return await run.step("work", effect)

    worker = quick()
    worker.workflow("capped", body, durable, budget=0.3, alive=0.15)
    async with serving(worker):
        await start_workflow(durable, "wf")
        await asyncio.wait_for(cancelled.wait(), timeout=5)
        await eventually(lambda: _status_is(durable, "wf", WorkflowStatus.COMPLETED))
    assert tries == ["wf", "wf"]


class MisconfiguredQueue(MemoryWorkQueue):
    """A queue whose table is missing: every claim is a configuration error."""

    async def claim(
        self, *, worker: str, queue: str = "default", lease_seconds: float | None = None
    ) -> WorkItem | None:
        raise ConfigurationError("table durably_work is missing; run migrate")


async def test_a_misconfigured_store_stops_the_worker_and_run_raises_it() -> None:
    async def handler(work: WorkItem) -> None:
        return None

    worker = quick()
    worker.handle(MisconfiguredQueue(), handler)
    with pytest.raises(ConfigurationError, match="migrate"):
        await asyncio.wait_for(worker.run(install_signal_handlers=False), timeout=5)


async def test_a_failed_item_is_logged_with_its_secrets_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = MemoryWorkQueue(SystemClock(), QueuePolicy(max_attempts=1))
    worker = quick()
    failed: list[str] = []

    async def handler(item: WorkItem) -> None:
        failed.append(item.id)
        raise RuntimeError("upstream said: password=hunter2 Authorization: Bearer abcdefgh12345")

    worker.handle(queue, handler, name="default")
    await queue.enqueue(WorkItem(id="job", tenant="t"))
    with caplog.at_level(logging.WARNING):
        async with serving(worker):
            await eventually(lambda: bool(failed))
            await eventually(lambda: "work item 'job' of tenant 't' failed" in caplog.text)
    assert "hunter2" not in caplog.text
    assert "abcdefgh12345" not in caplog.text
    assert "password=[secret]" in caplog.text
