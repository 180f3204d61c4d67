"""Cron schedules ticked by Worker maintenance under a `ManualClock`: one item per tick
however many workers tick, one catch-up run after downtime, time zones and DST."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from durably.clock import ManualClock
from durably.engine import Schedule, Worker, tick_of
from durably.errors import InvalidInputError
from durably.memory.queue import MemoryWorkQueue

START = datetime(2026, 1, 5, 12, 0, 30, tzinfo=UTC).timestamp()


async def drain(queue: MemoryWorkQueue) -> list[str]:
    ticks = []
    while (item := await queue.claim(worker="reader")) is not None:
        ticks.append(item.payload["tick"])
        await queue.complete(item.id, tenant=item.tenant, worker="reader")
    return ticks


async def test_three_workers_over_five_ticks_enqueue_exactly_five_items() -> None:
    clock = ManualClock(START)
    queue = MemoryWorkQueue(clock)
    workers = []
    for n in range(3):
        worker = Worker(name=f"w{n}", clock=clock)
        worker.schedule(queue, Schedule("every-minute", "* * * * *"))
        workers.append(worker)
    ran: list[str] = []
    for _ in range(5):
        for worker in workers:
            await worker.maintain()  # before the tick: the first round only takes the mark
        clock.advance(60)
        for worker in workers * 2:
            await worker.maintain()
        ran += await drain(queue)
    assert ran == [f"2026-01-05T12:0{minute}:00+00:00" for minute in range(1, 6)]


async def test_after_downtime_only_the_latest_missed_tick_runs() -> None:
    clock = ManualClock(START)
    queue = MemoryWorkQueue(clock)
    worker = Worker(name="w", clock=clock)
    worker.schedule(queue, Schedule("hourly", "0 * * * *"))
    await worker.maintain()
    clock.advance(5 * 3600)  # five ticks pass with no worker
    await worker.maintain()
    await worker.maintain()
    assert await drain(queue) == ["2026-01-05T17:00:00+00:00"]
    clock.advance(3600)
    await worker.maintain()
    assert await drain(queue) == ["2026-01-05T18:00:00+00:00"]


async def test_the_tick_item_carries_its_scheduled_time() -> None:
    clock = ManualClock(START)
    queue = MemoryWorkQueue(clock)
    worker = Worker(name="w", clock=clock)
    worker.schedule(queue, Schedule("s", "*/15 * * * *", tz="Europe/Berlin", queue="jobs"))
    await worker.maintain()
    clock.advance(15 * 60)
    await worker.maintain()
    item = await queue.claim(worker="reader", queue="jobs")
    assert item is not None
    assert tick_of(item) == datetime(2026, 1, 5, 12, 15, tzinfo=UTC)
    assert item.dedupe_key == item.id == "s@2026-01-05T12:15:00+00:00"


def test_daily_ticks_follow_wall_time_across_daylight_saving() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    daily = Schedule("daily", "30 2 * * *", tz="Europe/Berlin")

    def after(year: int, month: int, day: int, hour: int) -> datetime:
        instant = datetime(year, month, day, hour, tzinfo=berlin).timestamp()
        return datetime.fromtimestamp(daily.next_after(instant), berlin)

    # Spring forward: 02:30 does not exist on 29 March; the tick comes at 03:00.
    assert after(2026, 3, 28, 12).isoformat() == "2026-03-29T03:00:00+02:00"
    # Fall back: 02:30 happens twice on 25 October; both instants tick.
    first = after(2026, 10, 24, 12)
    second = datetime.fromtimestamp(daily.next_after(first.timestamp()), berlin)
    assert (first.isoformat(), second.isoformat()) == (
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:30:00+01:00",
    )


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "every day"}, "cron"),
        ({"cron": "* * * * *", "tz": "Mars/Olympus"}, "tz"),
        ({"cron": "* * * * *", "name": ""}, "name"),
        ({"cron": "* * * * *", "payload": {"tick": "x"}}, "payload"),
    ],
)
def test_bad_schedules_are_refused_naming_the_argument(
    kwargs: dict[str, object], argument: str
) -> None:
    fields: dict[str, object] = {"name": "s", **kwargs}
    with pytest.raises(InvalidInputError, match=argument):
        Schedule(**fields)  # type: ignore[arg-type]


def test_a_schedule_name_is_registered_once() -> None:
    worker = Worker(name="w")
    queue = MemoryWorkQueue()
    worker.schedule(queue, Schedule("s", "* * * * *"))
    with pytest.raises(ValueError, match="already registered"):
        worker.schedule(queue, Schedule("s", "0 * * * *"))
