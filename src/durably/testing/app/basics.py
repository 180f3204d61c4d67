"""`AppBasics`: starting, typed values, steps, replay, messages and events."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from durably.app import App, Context, Retry, context
from durably.clock import ManualClock
from durably.errors import (
    InvalidInputError,
    NonRetryable,
    StepFailedError,
    WorkflowCancelledError,
    WorkflowConflictError,
    WorkflowFailedError,
    WorkflowNotFoundError,
)
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import (
    APPROVAL,
    NOTE,
    AppFactory,
    AppFixtures,
    Colour,
    Everything,
    Point,
    Ticket,
    fresh_id,
)


class AppBasics(AppFixtures):
    """The everyday promises of `durably.App`."""

    async def test_a_workflow_returns_its_typed_result_to_its_handle(self, app: App) -> None:
        @app.step
        async def summarise(ticket: Ticket) -> Ticket:
            return Ticket(title=ticket.title.upper(), priority=ticket.priority + 1)

        @app.workflow
        async def triage(ctx: Context, ticket: Ticket) -> Ticket:
            return await summarise(ticket)

        handle = await triage.start(Ticket(title="disk full"))
        assert handle.created
        await app.run_until_idle()
        assert await handle.result(timeout=5) == Ticket(title="DISK FULL", priority=2)
        info = await handle.status()
        assert (info.status, info.kind, info.tenant, info.parent) == (
            WorkflowStatus.COMPLETED,
            triage.kind,
            "default",
            None,
        )

    async def test_a_recorded_step_runs_once_across_passes(self, app: App) -> None:
        calls: list[str] = []

        @app.step
        def charge(amount: int) -> str:  # a plain def runs in a thread
            calls.append(context().step)
            return f"receipt-{amount}"

        @app.workflow
        async def billing(ctx: Context, amount: int) -> str:
            receipt = await charge(amount)
            await ctx.sleep(timedelta(days=7))
            return receipt

        handle = await billing.start(42)
        passes = await app.run_until_idle()
        assert passes == 2
        assert await handle.result(timeout=5) == "receipt-42"
        assert calls == [f"{charge.name}#1"]

    async def test_starting_an_existing_id_starts_nothing_and_the_first_arguments_win(
        self, app: App
    ) -> None:
        @app.workflow
        async def echo(ctx: Context, text: str) -> str:
            return text

        workflow = fresh_id()
        first = await echo.start("first", id=workflow)
        second = await echo.start("second", id=workflow)
        assert (first.created, second.created) == (True, False)
        assert await app.run_until_idle() == 1
        assert await second.result(timeout=5) == "first"

    async def test_a_hundred_concurrent_starts_of_one_id_create_one_workflow(
        self, app_factory: AppFactory
    ) -> None:
        kind = f"once-{fresh_id()}"
        apps = [await app_factory(ManualClock()) for _ in range(4 if self.shares_stores else 1)]
        for app in apps:  # separate Apps: separate connections racing

            @app.workflow(name=kind)
            async def once(ctx: Context, n: int) -> int:
                return n

        workflow = fresh_id()
        starts = [apps[n % len(apps)].workflows[kind].start(n, id=workflow) for n in range(100)]
        handles = await asyncio.gather(*starts)
        assert sum(handle.created for handle in handles) == 1
        assert sum([await app.run_until_idle() for app in apps]) == 1
        first = next(n for n, handle in enumerate(handles) if handle.created)
        assert await handles[0].result(timeout=5) == first

    async def test_identical_starts_at_one_instant_report_one_creation(self, app: App) -> None:
        @app.workflow
        async def same(ctx: Context, n: int) -> int:
            return n

        workflow = fresh_id()  # the clock stands still: the records differ by nothing else
        handles = await asyncio.gather(*(same.start(7, id=workflow) for _ in range(20)))
        assert sum(handle.created for handle in handles) == 1
        assert await app.run_until_idle() == 1

    async def test_the_same_id_under_another_kind_is_a_conflict(self, app: App) -> None:
        @app.workflow
        async def one(ctx: Context) -> None:
            return None

        @app.workflow
        async def other(ctx: Context) -> None:
            return None

        workflow = fresh_id()
        await one.start(id=workflow)
        with pytest.raises(WorkflowConflictError):
            await other.start(id=workflow)
        with pytest.raises(WorkflowConflictError):
            await other.get_handle(workflow)

    async def test_a_body_that_raises_fails_the_workflow_without_retrying(self, app: App) -> None:
        passes: list[int] = []

        @app.workflow
        async def broken(ctx: Context) -> None:
            passes.append(1)
            raise ValueError("no such ticket")

        handle = await broken.start()
        await app.run_until_idle()
        with pytest.raises(WorkflowFailedError) as failed:
            await handle.result(timeout=5)
        assert "no such ticket" in str(failed.value.error)
        assert passes == [1]
        assert (await handle.status()).status is WorkflowStatus.FAILED

    async def test_a_failing_step_takes_the_same_branch_on_every_pass(self, app: App) -> None:
        calls: list[int] = []

        @app.step(retry=Retry(max_attempts=3, initial=0.0, maximum=0.0))
        async def flaky(n: int) -> int:
            calls.append(n)
            raise RuntimeError("upstream down")

        @app.workflow
        async def careful(ctx: Context) -> str:
            try:
                await flaky(1)
            except StepFailedError as exc:
                branch = f"failed:{exc.error_type}"
            else:
                branch = "ok"
            await ctx.sleep(60)
            return branch

        handle = await careful.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "failed:RuntimeError"
        assert calls == [1, 1, 1]

    async def test_a_non_retryable_error_stops_retries_at_once(self, app: App) -> None:
        calls: list[int] = []

        @app.step(retry=Retry(max_attempts=5, initial=0.0, maximum=0.0))
        async def refuse(n: int) -> int:
            calls.append(n)
            raise NonRetryable("bad request")

        @app.workflow
        async def asks(ctx: Context) -> int:
            return await refuse(1)

        handle = await asks.start()
        await app.run_until_idle()
        with pytest.raises(WorkflowFailedError):
            await handle.result(timeout=5)
        assert calls == [1]

    async def test_a_replay_with_other_arguments_parks_then_resumes_after_a_fix(
        self, app: App
    ) -> None:
        deployed = {"argument": 1}
        calls: list[int] = []

        @app.step
        async def fetch(n: int) -> int:
            calls.append(n)
            return n * 10

        @app.workflow
        async def changing(ctx: Context) -> int:
            value = await fetch(deployed["argument"])
            await ctx.sleep(60)
            return value

        handle = await changing.start()
        await app.run_until_idle(advance=False)
        deployed["argument"] = 2  # a deploy changes the call under the sleeping workflow
        await app.run_until_idle()
        info = await handle.status()
        assert info.status is WorkflowStatus.PARKED
        assert "NondeterminismError" in str(info.last_error)
        deployed["argument"] = 1  # the fix
        assert await handle.resume()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 10
        assert calls == [1]

    async def test_gather_of_one_step_replays_each_result_to_its_own_call(self, app: App) -> None:
        @app.step
        async def square(n: int) -> int:
            await asyncio.sleep(0.001 * (5 - n))  # finish out of call order
            return n * n

        @app.workflow
        async def fan(ctx: Context) -> list[int]:
            values = await asyncio.gather(*(square(n) for n in range(5)))
            keyed = await asyncio.gather(*(square.keyed(f"k{n}")(n) for n in range(3)))
            await ctx.sleep(1)
            return [*values, *keyed]

        handle = await fan.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == [0, 1, 4, 9, 16, 0, 1, 4]

    async def test_now_uuid_and_patched_are_recorded(self, app: App) -> None:
        seen: list[tuple[datetime, uuid.UUID, bool]] = []

        @app.workflow
        async def stamps(ctx: Context) -> str:
            now = await ctx.now()
            made = await ctx.uuid()
            patched = await ctx.patched("v2")
            seen.append((now, made, patched))
            await ctx.sleep(timedelta(hours=1))
            return made.hex

        handle = await stamps.start()
        await app.run_until_idle()
        assert len(seen) == 2
        assert seen[0] == seen[1]
        assert seen[0][2] is True
        assert seen[0][0].tzinfo is UTC
        assert await handle.result(timeout=5) == seen[0][1].hex

    async def test_recv_returns_a_message_sent_before_its_timeout(self, app: App) -> None:
        @app.workflow
        async def approve(ctx: Context) -> bool | None:
            await ctx.set_event("stage", "waiting")
            return await ctx.recv(APPROVAL, timeout=timedelta(hours=24))

        handle = await approve.start()
        await app.run_until_idle(advance=False)
        assert await handle.get_event("stage", timeout=5) == "waiting"
        assert (await handle.status()).status is WorkflowStatus.SLEEPING
        await handle.send(APPROVAL, True)
        await app.run_until_idle(advance=False)
        assert await handle.result(timeout=5) is True

    async def test_recv_times_out_with_none_and_a_late_message_goes_to_the_next_recv(
        self, app: App
    ) -> None:
        @app.workflow
        async def waits(ctx: Context) -> list[str | None]:
            first = await ctx.recv(NOTE, timeout=60)
            second = await ctx.recv(NOTE)
            return [first, second]

        handle = await waits.start()
        await app.run_until_idle()  # advances to the deadline: the first recv times out
        assert (await handle.status()).status is WorkflowStatus.BLOCKED
        await handle.send(NOTE, "late")
        await app.run_until_idle()
        assert await handle.result(timeout=5) == [None, "late"]

    async def test_messages_are_received_per_topic_in_send_order(self, app: App) -> None:
        @app.workflow
        async def reads(ctx: Context) -> list[str | bool | None]:
            return [await ctx.recv(NOTE), await ctx.recv(APPROVAL), await ctx.recv(NOTE)]

        handle = await reads.start()
        await handle.send(APPROVAL, False)
        await handle.send(NOTE, "a")
        await handle.send(NOTE, "b")
        await app.run_until_idle()
        assert await handle.result(timeout=5) == ["a", False, "b"]

    async def test_bad_sends_are_refused_with_typed_errors(self, app: App) -> None:
        @app.workflow
        async def quick(ctx: Context) -> int:
            return 1

        handle = await quick.start()
        with pytest.raises(InvalidInputError, match="approval"):
            await handle.send(APPROVAL, {"not": "a bool"})
        await app.run_until_idle()
        await handle.result(timeout=5)
        with pytest.raises(InvalidInputError, match="completed"):
            await handle.send(APPROVAL, True)
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle(fresh_id())

    async def test_arguments_that_do_not_fit_are_refused_before_any_io(self, app: App) -> None:
        @app.workflow
        async def typed(ctx: Context, ticket: Ticket) -> None:
            return None

        workflow = fresh_id()
        with pytest.raises(InvalidInputError, match="ticket"):
            await typed.start({"priority": "high"}, id=workflow)
        with pytest.raises(InvalidInputError):
            await typed.start(Ticket(title="x"), Ticket(title="y"), id=workflow)
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle(workflow)

    async def test_cancel_during_a_sleep_ends_the_workflow_cancelled(self, app: App) -> None:
        cleaned: list[str] = []

        @app.step
        async def clean_up(what: str) -> str:
            cleaned.append(what)
            return what

        @app.workflow
        async def long(ctx: Context) -> None:
            try:
                await ctx.sleep(timedelta(days=1))
            finally:
                await clean_up("temp files")

        handle = await long.start()
        await app.run_until_idle(advance=False)
        assert await handle.cancel()
        await app.run_until_idle(advance=False)
        with pytest.raises(WorkflowCancelledError, match="was cancelled") as ended:
            await handle.result(timeout=5)
        assert not ended.value.timed_out
        assert (await handle.status()).status is WorkflowStatus.CANCELLED
        assert cleaned == ["temp files"]
        assert not await handle.cancel()  # a finished workflow changes nothing

    async def test_typed_values_round_trip_and_the_first_run_sees_decoded_values(
        self, app: App
    ) -> None:
        seen: list[object] = []
        value = Everything(
            when=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
            day=date(2026, 1, 2),
            id=uuid.uuid4(),
            amount=Decimal("12.3400"),
            colour=Colour.BLUE,
            point=Point(1.5, -2.0),
            tags=["a", "b"],
            pair=(1, "one"),
            table={"x": 1},
            maybe=None,
        )

        @app.step
        async def same(item: Everything) -> Everything:
            return item

        @app.step
        async def stamp() -> datetime:
            return datetime(2026, 5, 6, tzinfo=UTC)

        @app.workflow
        async def carries(ctx: Context, item: Everything) -> Everything:
            back = await same(item)
            when = await stamp()
            seen.append((back, when, type(back.point), type(back.pair)))
            await ctx.sleep(1)
            return back

        handle = await carries.start(value)
        await app.run_until_idle()
        assert await handle.result(timeout=5) == value
        assert seen[0] == seen[1] == (value, datetime(2026, 5, 6, tzinfo=UTC), Point, tuple)

    async def test_a_result_of_an_unknown_id_is_not_found(self, app: App) -> None:
        @app.workflow
        async def nothing(ctx: Context) -> None:
            return None

        with pytest.raises(WorkflowNotFoundError):
            await nothing.get_handle(fresh_id())

    async def test_run_until_idle_runs_a_week_long_sleep_in_no_time(self, app: App) -> None:
        @app.workflow
        async def weekly(ctx: Context) -> int:
            for _ in range(7):
                await ctx.sleep(timedelta(days=1))
            return 7

        handle = await weekly.start()
        loop = asyncio.get_running_loop()
        began = loop.time()
        assert await app.run_until_idle() == 8
        assert await handle.result(timeout=5) == 7
        assert loop.time() - began < 30

    async def test_serve_runs_workflows_until_stopped(self, app_factory: AppFactory) -> None:
        app = await app_factory(ManualClock())

        @app.workflow
        async def served(ctx: Context, n: int) -> int:
            return n + 1

        serving = asyncio.create_task(app.serve())
        try:
            handle = await served.start(1)
            assert await handle.result(timeout=30) == 2
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)


__all__ = ["AppBasics"]
