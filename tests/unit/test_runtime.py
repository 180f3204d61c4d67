"""The stepwise runtime over the in-memory checkpointer."""

from __future__ import annotations

import asyncio
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from durably import ManualClock
from durably.engine.runtime import Execution, advance, resume
from durably.errors import Contended, Fenced, InputNeeded, Swallowed
from durably.memory import MemoryCheckpointer, MemoryDurable, MemoryEffectKit, MemoryScheduler
from durably.stores import Blocked, Completed, Pass, Sleeping


async def claimed(checkpointer: MemoryCheckpointer, workflow: str = "wf") -> Pass:
    holder = await checkpointer.claim(workflow, 60.0, 30.0)
    assert holder is not None
    return holder


async def once(
    checkpointer: MemoryCheckpointer, body: Any, *, clock: ManualClock | None = None
) -> Any:
    """One pass: claim, resume, release (the release is what lets the next pass claim)."""
    holder = await claimed(checkpointer)
    try:
        return await resume(holder, checkpointer, body, clock=clock)
    finally:
        await checkpointer.release(holder)


class SlowWrites(MemoryCheckpointer):
    """A memory checkpointer whose `record` waits for a gate: lets a test cancel mid-write."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.writing = asyncio.Event()

    async def record(self, holder: Pass, key: str, value: object) -> Any:
        self.writing.set()
        await self.gate.wait()
        return await super().record(holder, key, value)


async def test_a_recorded_step_never_reruns_its_effect() -> None:
    checkpointer = MemoryCheckpointer()
    calls: list[str] = []

    async def body(run: Execution) -> int:
        async def paid() -> int:
            calls.append("paid")
            return 42

        return await run.step("paid", paid)

    first = await once(checkpointer, body)
    second = await once(checkpointer, body)
    assert first == Completed(42)
    assert second == Completed(42)
    assert calls == ["paid"]


async def test_a_step_returns_the_parsed_recorded_value_on_every_pass() -> None:
    checkpointer = MemoryCheckpointer()

    async def body(run: Execution) -> tuple[int, int]:
        def as_pair(value: object) -> tuple[int, int]:
            assert isinstance(value, list)
            return (value[0], value[1])

        return await run.step("pair", lambda: (1, 2), parse=as_pair)

    assert await once(checkpointer, body) == Completed((1, 2))
    assert await once(checkpointer, body) == Completed((1, 2))


async def test_a_step_name_used_twice_in_one_pass_is_a_value_error() -> None:
    checkpointer = MemoryCheckpointer()

    async def body(run: Execution) -> None:
        await run.step("a", lambda: 1)
        await run.step("a", lambda: 2)

    with pytest.raises(ValueError, match="twice"):
        await once(checkpointer, body)


async def test_a_step_name_in_the_inbox_key_space_is_a_value_error() -> None:
    checkpointer = MemoryCheckpointer()

    async def body(run: Execution) -> None:
        await run.step("inbox:00000000000000000001", lambda: 1)

    with pytest.raises(ValueError, match="inbox"):
        await once(checkpointer, body)
    assert await checkpointer.load("wf") == {}


async def test_reserve_and_commit_record_once_and_replay_from_the_record() -> None:
    checkpointer = MemoryCheckpointer()
    effects: list[int] = []

    async def body(run: Execution) -> object:
        if run.reserve("paid"):
            return ("replayed", run.recorded["paid"])
        effects.append(1)
        return ("ran", await run.commit("paid", {"n": 1}))

    assert await once(checkpointer, body) == Completed(("ran", {"n": 1}))
    assert await once(checkpointer, body) == Completed(("replayed", {"n": 1}))
    assert effects == [1]
    assert await checkpointer.load("wf") == {"paid": {"n": 1}}


async def test_reserve_refuses_a_key_used_twice_as_step_does() -> None:
    checkpointer = MemoryCheckpointer()

    async def body(run: Execution) -> None:
        await run.step("a", lambda: 1)
        run.reserve("a")

    with pytest.raises(ValueError, match="twice"):
        await once(checkpointer, body)


@pytest.mark.parametrize("case", ["never reserved", "recorded", "committed twice"])
async def test_commit_refuses_a_key_reserve_did_not_take_fresh(case: str) -> None:
    checkpointer = MemoryCheckpointer()
    holder = await claimed(checkpointer)
    await checkpointer.record(holder, "old", 1)

    async def body(run: Execution) -> None:
        if case == "recorded":
            assert run.reserve("old")
            await run.commit("old", 2)
        elif case == "committed twice":
            assert not run.reserve("new")
            await run.commit("new", 1)
            await run.commit("new", 2)
        else:
            await run.commit("new", 1)

    with pytest.raises(ValueError, match="not reserved fresh"):
        await resume(holder, checkpointer, body)
    expected = {"old": 1, "new": 1} if case == "committed twice" else {"old": 1}
    assert await checkpointer.load("wf") == expected


@pytest.mark.parametrize("cancellations", [1, 2])
async def test_a_step_cancelled_after_its_effect_returned_still_records_it(
    cancellations: int,
) -> None:
    checkpointer = SlowWrites()
    holder = await claimed(checkpointer)
    effects: list[int] = []

    async def body(run: Execution) -> object:
        def paid() -> str:
            effects.append(1)
            return "done"

        return await run.step("paid", paid)

    task = asyncio.create_task(resume(holder, checkpointer, body))
    await checkpointer.writing.wait()
    for _ in range(cancellations):
        task.cancel()
        await asyncio.sleep(0)
    assert not task.done()
    checkpointer.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert effects == [1]
    assert await checkpointer.load("wf") == {"paid": "done"}


async def test_sleep_records_the_deadline_and_reports_sleeping_until_it_passes() -> None:
    checkpointer = MemoryCheckpointer()
    clock = ManualClock(1000.0)

    async def body(run: Execution) -> str:
        await run.sleep("nap", 3600)
        return "awake"

    outcome = await once(checkpointer, body, clock=clock)
    assert outcome == Sleeping("nap", 4600.0)
    assert await checkpointer.load("wf") == {"nap": 4600.0}
    clock.advance(3599)
    assert await once(checkpointer, body, clock=clock) == Sleeping("nap", 4600.0)
    clock.advance(1)
    outcome = await once(checkpointer, body, clock=clock)
    assert outcome == Completed("awake")


async def test_sleep_refuses_a_non_positive_duration() -> None:
    checkpointer = MemoryCheckpointer()

    async def body(run: Execution) -> None:
        await run.sleep("nap", 0)

    with pytest.raises(ValueError, match="duration"):
        await once(checkpointer, body)


async def test_several_deadlines_report_the_earliest() -> None:
    checkpointer = MemoryCheckpointer()
    clock = ManualClock(0.0)

    async def body(run: Execution) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(run.sleep("long", 50))
            group.create_task(run.sleep("short", 5))
            group.create_task(run.sleep("middle", 20))

    outcome = await once(checkpointer, body, clock=clock)
    assert outcome == Sleeping("short", 5.0)


async def test_awaiting_blocks_until_a_value_arrives_from_outside() -> None:
    durable = MemoryDurable(MemoryCheckpointer(), MemoryScheduler())
    checkpointer = durable.checkpointer

    async def body(run: Execution) -> str:
        approval = await run.awaiting("approval", parse=str)
        return f"approved by {approval}"

    outcome = await once(checkpointer, body)
    assert outcome == Blocked(waiting=frozenset({"approval"}), listening=frozenset())
    await durable.arrive("wf", "approval", "ana")
    outcome = await once(checkpointer, body)
    assert outcome == Completed("approved by ana")


async def test_receive_returns_new_messages_and_replays_the_same_batch() -> None:
    durable = MemoryDurable(MemoryCheckpointer(), MemoryScheduler())
    checkpointer = durable.checkpointer
    seen: list[list[object]] = []

    async def body(run: Execution) -> list[object]:
        first = await run.receive("first", limit=2)
        seen.append([entry.value for entry in first])
        second = await run.receive("second")
        return [entry.value for entry in first + second]

    outcome = await once(checkpointer, body)
    assert outcome == Blocked(waiting=frozenset(), listening=frozenset({"first"}))
    for message in ("a", "b", "c"):
        await durable.deliver("wf", message)
    assert await once(checkpointer, body) == Completed(["a", "b", "c"])
    await durable.deliver("wf", "d")
    # The recorded batches are replayed; the later message does not join them.
    assert await once(checkpointer, body) == Completed(["a", "b", "c"])
    assert seen == [["a", "b"], ["a", "b"]]


async def test_receive_waits_when_every_message_was_already_received() -> None:
    durable = MemoryDurable(MemoryCheckpointer(), MemoryScheduler())
    checkpointer = durable.checkpointer
    await durable.deliver("wf", "only")

    async def body(run: Execution) -> None:
        await run.receive("one")
        await run.receive("two")

    outcome = await once(checkpointer, body)
    assert outcome == Blocked(waiting=frozenset(), listening=frozenset({"two"}))


async def test_pending_names_the_keys_without_a_value_and_never_suspends() -> None:
    durable = MemoryDurable(MemoryCheckpointer(), MemoryScheduler())
    await durable.arrive("wf", "a", 1)

    async def body(run: Execution) -> frozenset[str]:
        return run.pending("a", "b", "c")

    outcome = await once(durable.checkpointer, body)
    assert outcome == Completed(frozenset({"b", "c"}))


async def test_suspensions_inside_nested_task_groups_are_reported() -> None:
    checkpointer = MemoryCheckpointer()

    async def inner(run: Execution) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(run.awaiting("x"))
            group.create_task(run.receive("y"))

    async def body(run: Execution) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(inner(run))
            group.create_task(run.awaiting("z"))

    outcome = await once(checkpointer, body)
    assert outcome == Blocked(waiting=frozenset({"x", "z"}), listening=frozenset({"y"}))


async def test_a_suspension_absorbed_by_gather_is_reported_as_swallowed() -> None:
    checkpointer = MemoryCheckpointer()

    async def body(run: Execution) -> str:
        results = await asyncio.gather(run.awaiting("approval"), return_exceptions=True)
        assert isinstance(results[0], InputNeeded)
        return "carried on"

    with pytest.raises(Swallowed) as caught:
        await once(checkpointer, body)
    assert [s.key for s in caught.value.suspensions] == ["approval"]


async def test_a_suspension_caught_by_except_exception_is_not_absorbed() -> None:
    checkpointer = MemoryCheckpointer()

    async def body(run: Execution) -> str:
        try:
            await run.awaiting("approval")
        except Exception:  # the point: this cannot catch a suspension
            return "absorbed"
        return "unreachable"

    outcome = await once(checkpointer, body)
    assert outcome == Blocked(waiting=frozenset({"approval"}), listening=frozenset())


async def test_a_task_group_that_both_suspends_and_fails_reports_the_failure() -> None:
    checkpointer = MemoryCheckpointer()

    async def broken() -> None:
        # Fails in the same loop turn as the suspension, so the group sees both.
        raise RuntimeError("tool crashed")

    async def body(run: Execution) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(run.awaiting("approval"))
            group.create_task(broken())

    with pytest.raises(RuntimeError, match="tool crashed"):
        await once(checkpointer, body)


async def test_fenced_surfaces_bare_from_inside_a_task_group() -> None:
    checkpointer = MemoryCheckpointer()
    stale = await claimed(checkpointer)
    await checkpointer.discard("wf")  # raises the fence past the stale pass

    async def body(run: Execution) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(run.step("a", lambda: 1))
            group.create_task(run.awaiting("b"))

    with pytest.raises(Fenced) as caught:
        await resume(stale, checkpointer, body)
    assert caught.value.token == stale.token


async def test_a_fence_absorbed_by_gather_still_surfaces_bare() -> None:
    # The pass was superseded; the body's gather kept the refusal as a result and the body
    # returned. The pass must not be reported Completed: its caller would act on a result
    # of a workflow another pass now owns.
    checkpointer = MemoryCheckpointer()
    stale = await claimed(checkpointer)
    await checkpointer.discard("wf")

    async def body(run: Execution) -> str:
        results = await asyncio.gather(run.step("a", lambda: 1), return_exceptions=True)
        assert isinstance(results[0], Fenced)
        return "carried on"

    with pytest.raises(Fenced) as caught:
        await resume(stale, checkpointer, body)
    assert caught.value.token == stale.token


async def test_contended_surfaces_bare_when_another_pass_holds_the_workflow() -> None:
    checkpointer = MemoryCheckpointer()
    await claimed(checkpointer)

    async def body(run: Execution) -> int:
        return 1

    with pytest.raises(Contended):
        await advance("wf", checkpointer, body)


async def test_contended_raised_inside_a_task_group_surfaces_bare() -> None:
    checkpointer = MemoryCheckpointer()

    async def body(run: Execution) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(run.awaiting("b"))
            group.create_task(advance("other", checkpointer, _holds_forever))

    await claimed(checkpointer, "other")
    with pytest.raises(Contended):
        await once(checkpointer, body)


async def _holds_forever(run: Execution) -> None:
    await asyncio.Event().wait()


async def test_advance_claims_runs_and_releases_so_the_next_pass_can_claim() -> None:
    checkpointer = MemoryCheckpointer()

    async def body(run: Execution) -> int:
        return await run.step("one", lambda: 1)

    assert await advance("wf", checkpointer, body) == Completed(1)
    assert await checkpointer.claim("wf", 10, 5) is not None


async def test_a_transacted_step_commits_its_effect_once_across_passes() -> None:
    checkpointer = MemoryCheckpointer()
    kit = MemoryEffectKit(checkpointer)

    async def body(run: Execution) -> object:
        return await run.transact("pay", kit.bump("payments", "paid"), parse=_upper)

    assert await once(checkpointer, body) == Completed("PAID")
    assert await once(checkpointer, body) == Completed("PAID")
    assert await kit.count("payments") == 1
    assert await checkpointer.load("wf") == {"pay": "paid"}


async def test_a_failing_transacted_effect_records_nothing_and_reruns_next_pass() -> None:
    checkpointer = MemoryCheckpointer()
    kit = MemoryEffectKit(checkpointer)
    effects = iter([kit.bump_then_fail("payments"), kit.bump("payments", "paid")])

    async def body(run: Execution) -> object:
        return await run.transact("pay", next(effects))

    with pytest.raises(RuntimeError):
        await once(checkpointer, body)
    assert await checkpointer.load("wf") == {}
    assert await once(checkpointer, body) == Completed("paid")
    assert await kit.count("payments") == 1


@pytest.mark.parametrize("kind", ["step", "transact", "sleep", "awaiting", "receive"])
@pytest.mark.parametrize("key", ["inbox:7", "", "nul\x00inside", "lone\ud800surrogate"])
async def test_every_kind_of_step_refuses_an_inbox_or_unusable_name(kind: str, key: str) -> None:
    checkpointer = MemoryCheckpointer()
    kit = MemoryEffectKit(checkpointer)
    effects: list[str] = []

    def effect() -> int:
        effects.append(key)
        return 1

    async def body(run: Execution) -> object:
        if kind == "step":
            return await run.step(key, effect)
        if kind == "transact":
            return await run.transact(key, kit.bump("n", 1))
        if kind == "sleep":
            await run.sleep(key, 5)
            return None
        if kind == "awaiting":
            return await run.awaiting(key)
        return await run.receive(key)

    with pytest.raises(ValueError):
        await once(checkpointer, body)
    assert (effects, await kit.count("n"), await checkpointer.load("wf")) == ([], 0, {})


async def test_a_name_used_by_two_kinds_of_step_in_one_pass_is_a_value_error() -> None:
    checkpointer = MemoryCheckpointer()

    async def body(run: Execution) -> None:
        await run.step("same", lambda: 1)
        await run.sleep("same", 5)

    with pytest.raises(ValueError, match="twice"):
        await once(checkpointer, body)
    assert await checkpointer.load("wf") == {"same": 1}


async def test_receive_after_a_key_skips_the_messages_up_to_it() -> None:
    durable = MemoryDurable(MemoryCheckpointer(), MemoryScheduler())
    entries = [await durable.deliver("wf", message) for message in ("a", "b", "c")]

    async def body(run: Execution) -> list[object]:
        return [entry.value for entry in await run.receive("late", after=entries[0].key)]

    assert await once(durable.checkpointer, body) == Completed(["b", "c"])


def test_blocked_with_nothing_to_wait_for_cannot_be_built() -> None:
    with pytest.raises(ValueError):
        Blocked(waiting=frozenset(), listening=frozenset())
    assert Blocked(waiting=frozenset({"a"}), listening=frozenset()).waiting == {"a"}
    assert Blocked(waiting=frozenset(), listening=frozenset({"b"})).listening == {"b"}


def _upper(value: object) -> str:
    assert isinstance(value, str)
    return value.upper()


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
async def test_every_duration_of_the_runtime_is_refused_by_name_when_not_positive(
    bad: float,
) -> None:
    checkpointer = MemoryCheckpointer()

    async def body(run: Execution) -> None:
        await run.sleep("nap", bad)

    with pytest.raises(ValueError, match="duration"):
        await once(checkpointer, body)
    with pytest.raises(ValueError, match="budget"):
        await advance("wf", checkpointer, body, budget=bad)
    with pytest.raises(ValueError, match="alive"):
        await advance("wf", checkpointer, body, alive=bad)
    assert await checkpointer.load("wf") == {}


def _approval_window_body() -> Any:
    """The "give up waiting at a deadline" body of docs/concepts.md, exactly as written."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "concepts.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if "window" in b)
    namespace: dict[str, Any] = {"Execution": Execution}
    exec(compile(textwrap.dedent(block), "docs/concepts.md", "exec"), namespace)
    return namespace["body"]


async def test_the_documented_approval_window_times_out_at_its_deadline() -> None:
    checkpointer = MemoryCheckpointer()
    clock = ManualClock(0.0)
    body = _approval_window_body()
    assert await once(checkpointer, body, clock=clock) == Sleeping("approval window", 86_400.0)
    clock.advance(86_400)
    assert await once(checkpointer, body, clock=clock) == Completed("timed out")


async def test_the_documented_approval_window_takes_an_approval_arriving_in_time() -> None:
    durable = MemoryDurable(MemoryCheckpointer(), MemoryScheduler())
    clock = ManualClock(0.0)
    body = _approval_window_body()
    assert await once(durable.checkpointer, body, clock=clock) == Sleeping(
        "approval window", 86_400.0
    )
    await durable.arrive("wf", "approval", "ana")
    assert await once(durable.checkpointer, body, clock=clock) == Completed("ana")
