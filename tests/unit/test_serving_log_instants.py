"""The worker's log lines show the instants a workflow waits until as UTC ISO 8601, not as
seconds since the epoch."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

import durably


async def test_a_sleeping_workflow_is_logged_with_its_wakeup_in_iso_8601(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = durably.App("memory://", clock=durably.ManualClock(0.0))

    @app.workflow
    async def napping(ctx: durably.Context) -> None:
        await ctx.sleep(timedelta(hours=1))

    await napping.start()
    with caplog.at_level(logging.INFO):
        await app.run_until_idle(advance=False)
    assert "until 1970-01-01T01:00:00.000+00:00" in caplog.text
    await app.close()
