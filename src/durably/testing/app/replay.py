"""`AppReplay`: what a body may rely on when it is re-run from the top (replay, keys
and determinism; errors, retries and timeouts)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from durably.app import App, Context, Retry
from durably.errors import StepFailedError
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import AppFixtures, Ticket


class AppReplay(AppFixtures):
    """Patches, quiet replays, inline steps, opted-in body retries, unencodable results."""

    async def test_patched_is_false_for_a_workflow_already_past_the_change(self, app: App) -> None:
        deployed = {"patch": False}
        answers: list[bool] = []

        @app.step
        async def greet() -> str:
            return "hello"

        @app.workflow
        async def greeter(ctx: Context) -> str:
            if deployed["patch"]:
                answers.append(await ctx.patched("polite"))
            greeting = await greet()
            await ctx.sleep(60)
            return greeting

        in_flight = await greeter.start()
        await app.run_until_idle(advance=False)
        deployed["patch"] = True  # a deploy adds a patched branch before recorded work
        fresh = await greeter.start()
        await app.run_until_idle()
        assert (await in_flight.result(timeout=5), await fresh.result(timeout=5)) == (
            "hello",
            "hello",
        )
        # The in-flight workflow, already past the change, answered False; the fresh one
        # True, on its first pass and again from the record on its second.
        assert sorted(answers) == [False, True, True]

    async def test_the_logger_is_quiet_while_the_body_replays(
        self, app: App, caplog: pytest.LogCaptureFixture
    ) -> None:
        @app.step
        async def work() -> int:
            return 1

        @app.workflow
        async def chatty(ctx: Context) -> int:
            ctx.logger.info("starting")
            value = await work()
            await ctx.sleep(timedelta(hours=1))
            ctx.logger.info("woke up")
            return value

        with caplog.at_level(logging.INFO, logger="durably.workflow"):
            handle = await chatty.start()
            await app.run_until_idle()
        assert await handle.result(timeout=5) == 1
        messages = [r.getMessage() for r in caplog.records if r.name.startswith("durably.workflow")]
        assert messages == ["starting", "woke up"]

    async def test_an_inline_step_keeps_the_engine_form(self, app: App) -> None:
        calls: list[int] = []

        @app.workflow
        async def inline(ctx: Context) -> int:
            def effect() -> int:
                calls.append(1)
                return 41

            value = await ctx.step("answer", effect)
            await ctx.sleep(1)
            return value + 1

        handle = await inline.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 42
        assert calls == [1]

    async def test_a_workflow_that_opts_in_retries_its_body(self, app: App) -> None:
        passes: list[int] = []

        @app.workflow(retry=Retry(max_attempts=3, initial=1, maximum=1))
        async def second_time_lucky(ctx: Context) -> int:
            passes.append(1)
            if len(passes) < 2:
                raise RuntimeError("transient")
            return len(passes)

        handle = await second_time_lucky.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 2
        assert (await handle.status()).attempts == 1

    async def test_an_unencodable_step_result_fails_the_step_once(self, app: App) -> None:
        calls: list[int] = []

        @app.step(retry=Retry(max_attempts=3, initial=0, maximum=0))
        async def sloppy() -> Ticket:
            calls.append(1)
            return {"no": "title"}  # type: ignore[return-value]

        @app.workflow
        async def uses(ctx: Context) -> str:
            try:
                await sloppy()
            except StepFailedError as exc:
                return exc.error_type
            return "encoded"

        handle = await uses.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "StepResultError"
        assert calls == [1]  # its effect ran; no retry repeats it

    async def test_a_body_returning_what_its_annotation_refuses_fails(self, app: App) -> None:
        @app.workflow
        async def wrong(ctx: Context) -> int:
            return "not a number"  # type: ignore[return-value]

        handle = await wrong.start()
        await app.run_until_idle()
        assert (await handle.status()).status is WorkflowStatus.FAILED


__all__ = ["AppReplay"]
