"""What a workflow does with values no store can keep and calls that cannot work: typed
errors, never a workflow left running or a value silently changed, on every backing."""

from __future__ import annotations

import logging
import math
import uuid
from typing import Any

import pytest

from durably.app import App, Context, Topic
from durably.errors import (
    ChildWorkflowFailedError,
    InvalidInputError,
    StepFailedError,
    StepResultError,
    ValueTypeWarning,
    WorkflowFailedError,
    WorkflowNotFoundError,
)
from durably.stores.status import WorkflowStatus
from durably.testing.app.fixtures import AppFixtures, fresh_id

TOO_LARGE = "x" * (2 << 20)
"""Over every backing's default ``max_value_bytes`` (memory, SQLite and PostgreSQL 1 MiB,
Redis 256 KiB)."""


class AppRefusals(AppFixtures):
    async def test_a_result_too_large_to_store_fails_the_workflow(self, app: App) -> None:
        @app.workflow
        async def huge(ctx: Context) -> str:
            return TOO_LARGE

        handle = await huge.start()
        await app.run_until_idle()
        # Failed at once, not left running for passes that can never report.
        assert (await handle.status()).status is WorkflowStatus.FAILED
        with pytest.raises(WorkflowFailedError, match="result was not stored"):
            await handle.result(timeout=5)

    async def test_a_child_whose_result_is_too_large_fails_its_parent_s_wait(
        self, app: App
    ) -> None:
        @app.workflow
        async def big(ctx: Context) -> str:
            return TOO_LARGE

        @app.workflow
        async def waiting(ctx: Context) -> str:
            try:
                await ctx.child(big)
            except ChildWorkflowFailedError as exc:
                return str(exc)
            return "the child's result arrived"

        handle = await waiting.start()
        await app.run_until_idle()
        assert "result was not stored" in await handle.result(timeout=5)

    async def test_nan_and_infinity_are_refused_before_any_io(self, app: App) -> None:
        with pytest.warns(ValueTypeWarning):  # Any: its values come back as plain JSON

            @app.workflow
            async def anything(ctx: Context, value: Any) -> Any:
                return value

        @app.workflow
        async def number(ctx: Context, value: float) -> float:
            return value

        workflow = fresh_id()
        # Inside an Any, pydantic alone would have stored null in place of the number.
        with pytest.raises(InvalidInputError, match="argument 'value'"):
            await anything.start({"reading": [math.inf]}, id=workflow)
        with pytest.raises(InvalidInputError, match="argument 'value'"):
            await number.start(math.nan, id=workflow)
        with pytest.raises(WorkflowNotFoundError):
            await app.get_handle(workflow)
        handle = await number.start(1.5)
        with pytest.raises(InvalidInputError, match="reading"):
            await handle.send(Topic("reading", float), -math.inf)
        await app.run_until_idle()
        assert await handle.result(timeout=5) == 1.5

    async def test_arguments_the_store_refuses_name_the_workflow_and_store_nothing(
        self, app: App
    ) -> None:
        @app.workflow(name="echo")
        async def echo(ctx: Context, text: str) -> str:
            return text

        for text in (TOO_LARGE, "a\x00b"):  # over the size limit; a NUL no backing keeps
            workflow = fresh_id()
            with pytest.raises(InvalidInputError, match="workflow 'echo'"):
                await echo.start(text, id=workflow)
            with pytest.raises(WorkflowNotFoundError):
                await app.get_handle(workflow)

    async def test_a_step_returning_nan_records_a_step_result_error(self, app: App) -> None:
        @app.step
        async def measure() -> float:
            return math.nan

        @app.workflow
        async def measuring(ctx: Context) -> str:
            try:
                await measure()
            except StepFailedError as exc:
                return exc.error_type
            return "no error"

        handle = await measuring.start()
        await app.run_until_idle()
        assert await handle.result(timeout=5) == "StepResultError"

    async def test_an_event_of_nan_fails_the_workflow_naming_the_event(self, app: App) -> None:
        @app.workflow
        async def publishing(ctx: Context) -> None:
            await ctx.set_event("progress", {"done": math.nan})

        handle = await publishing.start()
        await app.run_until_idle()
        with pytest.raises(WorkflowFailedError, match="progress"):
            await handle.result(timeout=5)

    async def test_a_step_result_too_large_to_record_is_a_step_result_error(self, app: App) -> None:
        @app.step
        async def dump() -> str:
            return TOO_LARGE

        @app.workflow
        async def dumping(ctx: Context) -> str:
            try:
                await dump()
            except StepResultError as exc:
                return str(exc)
            return "recorded"

        handle = await dumping.start()
        await app.run_until_idle()
        message = await handle.result(timeout=5)
        assert "too large to record" in message
        assert "dump" in message

    async def test_secrets_in_failure_text_are_masked_wherever_it_is_kept(
        self, app: App, caplog: pytest.LogCaptureFixture
    ) -> None:
        secret = f"hunter2-{uuid.uuid4().hex}"

        @app.step
        async def login(user: str) -> int:
            raise RuntimeError(f"login of {user} failed: password={secret}")

        @app.workflow
        async def logging_in(ctx: Context) -> int:
            return await login("ada")

        handle = await logging_in.start()
        with caplog.at_level(logging.DEBUG):
            await app.run_until_idle()
        with pytest.raises(WorkflowFailedError) as failed:
            await handle.result(timeout=5)
        assert "password=[secret]" in str(failed.value)
        assert secret not in str(failed.value)
        assert secret not in ((await handle.status()).last_error or "")
        assert secret not in caplog.text
        stored = await (await app.stores()).checkpointer.load(handle.id)
        assert secret not in repr(stored)

    async def test_a_workflow_cannot_wait_for_itself_as_its_child(self, app: App) -> None:
        @app.workflow
        async def looping(ctx: Context) -> int:
            result: int = await ctx.child(looping, id=ctx.id)
            return result

        handle = await looping.start()
        await app.run_until_idle()
        with pytest.raises(WorkflowFailedError, match="the workflow itself or its parent"):
            await handle.result(timeout=5)

    async def test_recv_and_child_refuse_what_is_not_a_topic_or_a_workflow(self, app: App) -> None:
        @app.step
        async def plain() -> int:
            return 1

        @app.workflow
        async def misusing(ctx: Context, which: str) -> str:
            try:
                if which == "recv":
                    await ctx.recv("approval")  # type: ignore[arg-type]
                else:
                    await ctx.child(plain)  # type: ignore[call-overload]
            except InvalidInputError as exc:
                return str(exc)
            return "accepted"

        by_recv, by_child = await misusing.start("recv"), await misusing.start("child")
        await app.run_until_idle()
        assert "recv needs a durably.Topic, got str" in await by_recv.result(timeout=5)
        assert "ctx.child needs a workflow" in await by_child.result(timeout=5)


__all__ = ["AppRefusals"]
