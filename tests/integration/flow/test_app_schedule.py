"""`App.schedule`: a cron schedule registered on the App is ticked by `serve`'s worker and
enqueues one item per tick on the App's queue (the App wiring a task decorator builds on)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime

import pytest

from durably import App, ManualClock
from durably.engine import tick_of
from durably.errors import ConfigurationError, InvalidInputError

START = datetime(2027, 1, 15, 8, 0, 30, tzinfo=UTC).timestamp()


async def test_a_schedule_on_the_app_enqueues_one_item_a_tick_while_it_serves() -> None:
    clock = ManualClock(START)
    app = App("memory://", clock=clock)
    app.schedule("minutely", cron="* * * * *", queue="cron")
    serving = asyncio.create_task(app.serve(signals=False, maintenance=0.01, poll=0.01))
    try:
        stores = await app.stores()
        ticks = []
        for _ in range(3):
            await asyncio.sleep(0.1)  # a few maintenance rounds: the mark, then nothing
            clock.advance(60)
            for _ in range(200):
                item = await stores.queue.claim(worker="reader", queue="cron")
                if item is not None:
                    break
                await asyncio.sleep(0.01)
            assert item is not None
            ticks.append(tick_of(item))
            await stores.queue.complete(item.id, tenant=item.tenant, worker="reader")
        await asyncio.sleep(0.1)
        assert await stores.queue.claim(worker="reader", queue="cron") is None
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        await app.close()
    assert ticks == [datetime(2027, 1, 15, 8, minute, tzinfo=UTC) for minute in (1, 2, 3)]


def test_bad_schedules_are_refused_at_registration() -> None:
    app = App("memory://")
    with pytest.raises(InvalidInputError, match="cron"):
        app.schedule("bad", cron="61 * * * *")
    with pytest.raises(InvalidInputError, match="tz"):
        app.schedule("bad", cron="* * * * *", tz="Mars/Olympus")
    app.schedule("once", cron="* * * * *")
    with pytest.raises(ConfigurationError, match="once"):
        app.schedule("once", cron="0 * * * *")
