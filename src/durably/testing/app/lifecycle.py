"""`AppLifecycle`: children, cancellation, timeouts, retries and parking."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from durably.app import App, Context, Retry
from durably.clock import ManualClock
from durably.errors import (
    ChildWorkflowFailedError,
    StepFailedError,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowNotFoundError,
)
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import (
    NOTE,
    AppFactory,
    AppFixtures,
    Reply,
    ReplyWithDefault,
    ReplyWithScore,
    fresh_id,
    parent_of_a_sleeper,
)


class AppLifecycle(AppFixtures):
    """How workflows start each other, end, stop early and come back."""

    async def test_a_child_returns_its_result_and_inherits_the_tenant(self, app: App) -> None:
        @app.workflow
        async def square(ctx: Context, n: int) -> int:
            return n * n

        @app.workflow
        async def parent(ctx: Context, n: int) -> int:
            return await ctx.child(square, n) + 1

        handle = await parent.start(7, tenant="acme")
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 50
        child_id = f"{handle.id}/child:{square.kind}#1"
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle(child_id)  # the App's tenant has no such workflow
        child = await app.get_handle(child_id, tenant="acme")
        info = await child.status()
        assert (info.workflow, info.tenant, info.parent, info.status) == (
            child_id,
            "acme",
            handle.id,
            WorkflowStatus.COMPLETED,
        )

    async def test_twenty_children_in_gather_each_return_their_own_result(self, app: App) -> None:
        @app.workflow
        async def square(ctx: Context, n: int) -> int:
            return n * n

        @app.workflow
        async def fan_out(ctx: Context) -> list[int]:
            return list(await asyncio.gather(*(ctx.child(square, n) for n in range(20))))

        handle = await fan_out.start()
        await app.run_until_idle()
        assert await handle.result(timeout=10) == [n * n for n in range(20)]

    async def test_start_child_fans_out_without_waiting(self, app: App) -> None:
        @app.workflow
        async def echo(ctx: Context, text: str) -> str:
            return text

        @app.workflow
        async def spread(ctx: Context) -> list[str]:
            handles = [await ctx.start_child(echo, text) for text in ("a", "b")]
            return [handle.id for handle in handles]

        handle = await spread.start()
        await app.run_until_idle()
        ids = await handle.result(timeout=5)
        assert [await (await echo.get_handle(i)).result(timeout=5) for i in ids] == ["a", "b"]

    async def test_a_failed_child_raises_in_its_parent(self, app: App) -> None:
        @app.workflow
        async def broken(ctx: Context) -> int:
            raise RuntimeError("child broke")

        @app.workflow
        async def parent(ctx: Context) -> str:
            try:
                await ctx.child(broken)
            except ChildWorkflowFailedError as exc:
                return f"caught {exc.workflow.rsplit('/', 1)[-1]}: {exc.error}"
            return "no error"

        handle = await parent.start()
        await app.run_until_idle()
        result = await handle.result(timeout=5)
        assert result.startswith(f"caught child:{broken.kind}#1:")
        assert "child broke" in result

    async def test_cancelling_a_parent_cancels_its_children(self, app: App) -> None:
        slow, parent = parent_of_a_sleeper(app)
        handle = await parent.start()
        await app.run_until_idle(advance=False)
        child = await slow.get_handle(f"{handle.id}/child:{slow.kind}#1")
        assert (await child.status()).status is WorkflowStatus.SLEEPING
        assert await handle.cancel()
        await app.run_until_idle(advance=False)
        with pytest.raises(WorkflowCancelledError):
            await handle.result(timeout=5)
        with pytest.raises(WorkflowCancelledError):
            await child.result(timeout=5)

    async def test_a_body_that_cancels_another_workflow_is_not_cancelled_itself(
        self, app: App
    ) -> None:
        @app.workflow
        async def waits(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        @app.step
        async def tidy_up() -> str:
            return "tidied"

        @app.workflow
        async def stopper(ctx: Context, target: str) -> str:
            other = await app.get_handle(target)
            changed = await other.cancel()
            await ctx.sleep(1)  # a later pass replays the recorded cancel, then goes on
            return f"cancelled the other: {changed}, {await tidy_up()}"

        victim = await waits.start()
        await app.run_until_idle(advance=False)
        handle = await stopper.start(victim.id)
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "cancelled the other: True, tidied"
        assert (await handle.status()).status is WorkflowStatus.COMPLETED
        with pytest.raises(WorkflowCancelledError):
            await victim.result(timeout=5)

    async def test_cancel_during_a_recv_wakes_the_workflow_to_see_it(self, app: App) -> None:
        @app.workflow
        async def listens(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        handle = await listens.start()
        await app.run_until_idle()
        assert (await handle.status()).status is WorkflowStatus.BLOCKED
        assert await handle.cancel()
        await app.run_until_idle()
        assert (await handle.status()).status is WorkflowStatus.CANCELLED

    async def test_a_running_step_finishes_and_the_cancel_lands_at_the_next_one(
        self, app: App
    ) -> None:
        calls: list[str] = []
        ids: dict[str, str] = {}

        @app.step
        async def first() -> str:
            calls.append("first")
            await (await app.get_handle(ids["workflow"])).cancel()  # lands while it runs
            return "done"

        @app.step
        async def second() -> str:
            calls.append("second")
            return "never"

        @app.workflow
        async def two_steps(ctx: Context) -> str:
            value = await first()
            try:
                return value + await second()
            except asyncio.CancelledError:
                calls.append("cancelled after " + value)
                raise

        handle = await two_steps.start()
        ids["workflow"] = handle.id
        await app.run_until_idle()
        assert (await handle.status()).status is WorkflowStatus.CANCELLED
        assert calls == ["first", "cancelled after done"]

    async def test_a_body_that_swallows_the_cancel_completes(self, app: App) -> None:
        @app.workflow
        async def stubborn(ctx: Context) -> str:
            try:
                await ctx.sleep(timedelta(hours=1))
            except asyncio.CancelledError:
                return "kept going"
            return "slept"

        handle = await stubborn.start()
        await app.run_until_idle(advance=False)
        await handle.cancel()
        await app.run_until_idle(advance=False)
        assert await handle.result(timeout=5) == "kept going"

    async def test_a_workflow_timeout_cancels_it_at_the_deadline(self, app: App) -> None:
        @app.workflow(timeout=timedelta(hours=2))
        async def waits_forever(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        handle = await waits_forever.start()
        clock = app.clock
        assert isinstance(clock, ManualClock)
        began = clock.now()
        await app.run_until_idle()
        with pytest.raises(WorkflowCancelledError, match="timed out") as ended:
            await handle.result(timeout=5)
        assert ended.value.timed_out  # told apart from a cancel asked for
        assert "timed out" in ((await handle.status()).last_error or "")
        assert clock.now() - began == pytest.approx(7200)

    async def test_a_long_backoff_is_a_durable_sleep(self, app: App) -> None:
        attempts: list[int] = []

        @app.step(retry=Retry(max_attempts=3, initial=600, maximum=3600, jitter=0))
        async def flaky() -> str:
            attempts.append(len(attempts) + 1)
            if len(attempts) < 3:
                raise ConnectionError("try later")
            return "ok"

        @app.workflow
        async def patient(ctx: Context) -> str:
            return await flaky()

        handle = await patient.start()
        clock = app.clock
        assert isinstance(clock, ManualClock)
        began = clock.now()
        assert await app.run_until_idle() == 3  # each backoff ends a pass
        assert await handle.result(timeout=5) == "ok"
        assert attempts == [1, 2, 3]
        assert clock.now() - began == pytest.approx(600 + 1200)

    async def test_a_step_attempt_over_its_timeout_fails_with_step_timeout(self, app: App) -> None:
        @app.step(timeout=0.05)
        async def hangs() -> None:
            await asyncio.sleep(30)

        @app.workflow
        async def impatient(ctx: Context) -> str:
            try:
                await hangs()
            except StepFailedError as exc:
                return exc.error_type
            return "no timeout"

        handle = await impatient.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "StepTimeoutError"

    async def test_a_step_raising_cancelled_error_itself_is_a_failed_attempt_and_retried(
        self, app: App
    ) -> None:
        attempts: list[int] = []

        @app.step(retry=Retry(max_attempts=2, initial=0, jitter=0))
        async def interrupted() -> str:
            attempts.append(len(attempts) + 1)
            if len(attempts) == 1:
                raise asyncio.CancelledError  # nobody cancelled it: a library's doing
            return "second try"

        @app.step
        async def always_interrupted() -> None:
            raise asyncio.CancelledError

        @app.workflow
        async def resilient(ctx: Context) -> list[str]:
            first = await interrupted()
            try:
                await always_interrupted()
            except StepFailedError as exc:
                return [first, exc.error_type]
            return [first, "no failure"]

        handle = await resilient.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == ["second try", "StrayCancellationError"]
        assert attempts == [1, 2]

    async def test_a_body_raising_cancelled_error_itself_fails_rather_than_cancels(
        self, app: App
    ) -> None:
        @app.workflow
        async def confused(ctx: Context) -> None:
            raise asyncio.CancelledError

        handle = await confused.start()
        await app.run_until_idle()
        with pytest.raises(WorkflowFailedError) as failed:
            await handle.result(timeout=5)
        assert "StrayCancellationError" in str(failed.value.error)
        assert (await handle.status()).status is WorkflowStatus.FAILED

    async def test_app_calls_inside_a_body_are_recorded(self, app: App) -> None:
        @app.workflow
        async def inbox(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        @app.workflow
        async def sender(ctx: Context) -> str:
            handle = await inbox.start()
            await handle.send(NOTE, "hello")
            await ctx.sleep(60)  # a second pass replays both calls
            return handle.id

        handle = await sender.start()
        await app.run_until_idle()
        started = await handle.result(timeout=5)
        assert started == f"{handle.id}/start:{inbox.kind}#1"
        assert await (await inbox.get_handle(started)).result(timeout=5) == "hello"

    async def test_the_retention_sweep_removes_finished_workflows_and_frees_their_ids(
        self, app_factory: AppFactory
    ) -> None:
        app = await app_factory(ManualClock())
        app._core.retention = 0.001  # everything finished is old enough

        @app.workflow
        async def quick(ctx: Context, n: int) -> int:
            return n

        @app.workflow
        async def waiting(ctx: Context) -> str | None:
            return await ctx.recv(NOTE)

        done = await quick.start(1)
        cancelled = await waiting.start()
        kept = await waiting.start()
        await app.run_until_idle()
        await cancelled.cancel()
        await app.run_until_idle()
        await asyncio.sleep(0.01)
        swept = 0
        while swept < 100_000 and (round_swept := await app.sweep()):
            swept += round_swept  # a store other tests share may hold more than one round
        assert swept >= 2
        for gone in (done, cancelled):
            with pytest.raises(WorkflowNotFoundError):
                await gone.result(timeout=5)
        assert (await kept.status()).status is WorkflowStatus.BLOCKED
        again = await quick.start(2, id=done.id)
        assert again.created
        await app.run_until_idle()
        assert await again.result(timeout=5) == 2

    async def test_a_workflow_whose_kind_has_no_body_is_reported(
        self, app_factory: AppFactory
    ) -> None:
        if not self.shares_stores:
            pytest.skip("needs two Apps over one store")
        old = await app_factory(ManualClock())

        @old.workflow(name=f"retired-{fresh_id()}")
        async def retired(ctx: Context) -> None:
            await ctx.sleep(60)

        handle = await retired.start()
        await old.run_until_idle(advance=False)
        new = await app_factory(ManualClock())  # a deploy that dropped the kind
        found: list[tuple[str, str]] = []
        for _ in range(100):  # each call looks at the next page of statuses
            found += await new.unserved()
            if (handle.id, retired.kind) in found:
                break
        assert (handle.id, retired.kind) in found
        # Its status says why it stands still, and is otherwise as it was.
        info = await handle.status()
        assert info.status is WorkflowStatus.SLEEPING
        assert info.last_error is not None
        assert repr(retired.kind) in info.last_error

    async def test_a_model_gaining_a_required_field_parks_and_resumes_after_a_fix(
        self, app_factory: AppFactory
    ) -> None:
        if not self.shares_stores:
            pytest.skip("needs two Apps over one store")
        kind = f"deploy-{fresh_id()}"

        def deploy(app: App, model: type[Reply | ReplyWithScore | ReplyWithDefault]) -> None:
            async def reply() -> Reply:
                return model(text="hi", score=1.0)  # type: ignore[return-value]

            reply.__annotations__["return"] = model  # this deploy's version of the model
            step = app.step(name="reply")(reply)

            @app.workflow(name=kind)
            async def answers(ctx: Context) -> str:
                value = await step()
                await ctx.sleep(60)
                return value.text

        old = await app_factory(ManualClock())
        deploy(old, Reply)
        handle = await old.workflows[kind].start()
        await old.run_until_idle(advance=False)

        broken = await app_factory(ManualClock(old.clock.now() + 120))
        deploy(broken, ReplyWithScore)
        await broken.run_until_idle()
        info = await handle.status()
        assert info.status is WorkflowStatus.PARKED
        assert "IncompatibleRecordError" in str(info.last_error)
        assert "reply#1" in str(info.last_error)

        fixed = await app_factory(ManualClock(old.clock.now() + 120))
        deploy(fixed, ReplyWithDefault)
        assert await (await fixed.get_handle(handle.id)).resume()
        await fixed.run_until_idle()
        assert await (await fixed.get_handle(handle.id)).result(timeout=5) == "hi"


__all__ = ["AppLifecycle"]
