"""`AppFailures`: a failed workflow's error carries its type, message and failing step, to
its handle and to a parent awaiting it; a failure recorded as text alone still reads."""

from __future__ import annotations

import pytest

from durably.app import App, Context, Retry
from durably.errors import ChildWorkflowFailedError, NonRetryable, WorkflowFailedError
from durably.testing.app.fixtures import AppFixtures, fresh_id, write_earlier


class PaymentDeclined(NonRetryable):
    """What a payment provider says of a card it refuses."""


class AppFailures(AppFixtures):
    """What a failure tells the code that waits for it."""

    async def test_a_failed_step_ends_the_workflow_with_its_type_message_and_key(
        self, app: App
    ) -> None:
        attempts: list[int] = []

        @app.step(name=f"charge-{fresh_id()}", retry=Retry(max_attempts=3))
        async def charge(cents: int) -> str:
            attempts.append(cents)
            raise PaymentDeclined(f"card declined for {cents}")

        @app.workflow
        async def checkout(ctx: Context, cents: int) -> str:
            return await charge(cents)

        handle = await checkout.start(4999)
        await app.run_until_idle()
        with pytest.raises(WorkflowFailedError) as failed:
            await handle.result(timeout=5)
        error = failed.value
        assert (error.type, error.message, error.step) == (
            "PaymentDeclined",
            "card declined for 4999",
            f"{charge.name}#1",
        )
        assert "card declined for 4999" in str(error.error)
        assert attempts == [4999]

    async def test_a_body_that_raises_gives_its_own_type_and_no_step(self, app: App) -> None:
        @app.workflow
        async def triage(ctx: Context, ticket: str) -> None:
            raise LookupError(f"no such ticket {ticket}")

        handle = await triage.start("t-404")
        await app.run_until_idle()
        with pytest.raises(WorkflowFailedError) as failed:
            await handle.result(timeout=5)
        assert (failed.value.type, failed.value.message, failed.value.step) == (
            "LookupError",
            "no such ticket t-404",
            None,
        )

    async def test_a_parent_sees_its_failed_childs_type_message_and_step(self, app: App) -> None:
        @app.step(name=f"refund-{fresh_id()}")
        async def refund(cents: int) -> None:
            raise PaymentDeclined("refund window closed")

        @app.workflow
        async def child(ctx: Context, cents: int) -> None:
            await refund(cents)

        @app.workflow
        async def parent(ctx: Context) -> list[str | None]:
            try:
                await ctx.child(child, 100)
            except ChildWorkflowFailedError as exc:
                return [exc.workflow, exc.type, exc.message, exc.step]
            return []

        handle = await parent.start()
        await app.run_until_idle()
        [workflow, kind, message, step] = await handle.result(timeout=5)
        assert workflow == f"{handle.id}/child:{child.kind}#1"
        assert (kind, message, step) == (
            "PaymentDeclined",
            "refund window closed",
            f"{refund.name}#1",
        )

    async def test_a_failure_recorded_as_text_alone_still_gives_its_text(self, app: App) -> None:
        @app.workflow(name=f"earlier-{fresh_id()}")
        async def earlier(ctx: Context) -> None:
            return None

        # How a release before failures kept their type recorded one: its repr alone.
        workflow = await write_earlier(
            app, earlier.kind, {}, {"durably:failed#1": "ValueError('old')"}
        )
        await app.run_until_idle()
        with pytest.raises(WorkflowFailedError) as failed:
            await (await earlier.get_handle(workflow)).result(timeout=5)
        assert "ValueError('old')" in str(failed.value.error)
        assert (failed.value.type, failed.value.message, failed.value.step) == (None, None, None)


__all__ = ["AppFailures"]
