"""Cron schedules: a `Schedule` enqueues one work item per tick of its cron expression,
however many workers tick it.

The store keeps each schedule's last fired tick. A worker's maintenance (`tick`) reads it;
when a later tick is due (the latest at or before now), it enqueues the tick's item, whose
id and dedupe key name the tick, and only then moves the mark on. Workers that fire one
tick together enqueue one item (the second enqueue finds the first), and a worker killed
between the enqueue and the move leaves the tick to the next round, which finds the item
there: no tick is lost and none fires twice. A worker whose clock lags sees its due tick
already marked and fires nothing. After a spell with no worker, the latest tick that
passed fires once: at most one catch-up run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from durably.errors import ConfigurationError, InvalidInputError
from durably.stores.work import (
    DEFAULT_QUEUE,
    FlowFields,
    WorkItem,
    WorkQueue,
    checked_item,
    payload_text,
)
from durably.validation import finite, identifier

if TYPE_CHECKING:
    from croniter import croniter

TICK_KEY = "tick"
"""The payload key that carries a tick's scheduled instant (ISO 8601, UTC)."""


def _croniter() -> type[croniter]:
    try:
        from croniter import croniter as parser
    except ImportError:  # pragma: no cover - the extra is installed in the test environment
        raise ConfigurationError(
            "cron schedules need the croniter package: pip install 'durably[cron]'"
        ) from None
    return parser


@dataclass(frozen=True, slots=True)
class Schedule:
    """Enqueue one item on ``queue`` at every tick of ``cron`` in the time zone ``tz``.

    Args:
        name: The schedule's id: one schedule of a name, however many workers run it.
        cron: A five-field cron expression (minute hour day month weekday), e.g.
            ``"*/15 * * * *"``.
        tz: An IANA time zone (``"Europe/Berlin"``); ticks are wall-clock times there.
        queue: The queue the tick's items go to.
        tenant: The tenant of the tick's items.
        payload: Extra payload of every tick's item (its ``tick`` key is the tick's time).
        gates: The flow gates of every tick's item (`durably.stores.work.flow_fields`).
        workflow: The workflow kind a tick starts instead of enqueueing an item (None:
            an item). The App sets it for ``@app.workflow(cron=...)``.
        starts: What starts that workflow for a tick (its instant, seconds since the
            epoch); it names the workflow by the tick, so a repeated start finds it.

    Raises:
        InvalidInputError: a cron expression that does not parse, an unknown time zone or
            an invalid name, queue or tenant.
    """

    name: str
    cron: str
    tz: str = "UTC"
    queue: str = DEFAULT_QUEUE
    tenant: str = "default"
    payload: dict[str, str] = field(default_factory=dict)
    gates: FlowFields = field(default_factory=lambda: FlowFields())
    workflow: str | None = None
    starts: Callable[[float], Awaitable[object]] | None = field(
        default=None, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        identifier(self.name, "name")
        if (self.workflow is None) != (self.starts is None):
            raise InvalidInputError("a workflow schedule needs both workflow= and starts=")
        identifier(self.queue, "queue")
        identifier(self.tenant, "tenant")
        payload_text(self.payload)
        if TICK_KEY in self.payload:
            raise InvalidInputError(f"payload must not hold the key {TICK_KEY!r}")
        if not isinstance(self.cron, str) or len(self.cron.split()) != 5:
            raise InvalidInputError(f"cron must be a five-field cron expression, got {self.cron!r}")
        if not _croniter().is_valid(self.cron):
            raise InvalidInputError(f"cron {self.cron!r} does not parse")
        self.zone()
        if self.gates:
            checked_item(self.tick_item(0.0))

    def zone(self) -> ZoneInfo:
        """The schedule's time zone. Raises `InvalidInputError` for an unknown one."""
        try:
            return ZoneInfo(identifier(self.tz, "tz"))
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidInputError(f"tz {self.tz!r} is not a known time zone") from None

    def next_after(self, instant: float) -> float:
        """The first tick strictly after ``instant`` (seconds since the epoch)."""
        start = datetime.fromtimestamp(finite(instant, "instant"), self.zone())
        return float(_croniter()(self.cron, start).get_next(float))

    def latest_at_or_before(self, instant: float) -> float:
        """The last tick at or before ``instant``."""
        probe = self.next_after(instant)
        start = datetime.fromtimestamp(probe, self.zone())
        return float(_croniter()(self.cron, start).get_prev(float))

    def tick_item(self, tick: float) -> WorkItem:
        """The item a tick enqueues: its id and dedupe key name the schedule and the tick."""
        stamp = tick_text(tick)
        key = f"{self.name}@{stamp}"
        return WorkItem(
            id=key,
            tenant=self.tenant,
            queue=self.queue,
            payload={**self.payload, TICK_KEY: stamp},
            dedupe_key=key,
            **self.gates,
        )


TICK_KEPT_SECONDS = 86_400.0
"""How long a tick's item keeps its dedupe key after it finishes: a worker that fires the
tick again (it read the mark before another moved it, or the one that fired was killed
before moving it) finds the item however quickly it ran."""


def tick_text(tick: float) -> str:
    """A tick as its items carry it: ISO 8601 in UTC, to the second."""
    return datetime.fromtimestamp(tick, UTC).isoformat()


def tick_of(item: WorkItem) -> datetime | None:
    """The scheduled time of the tick that enqueued ``item`` (aware, UTC), if one did."""
    text = item.payload.get(TICK_KEY)
    return None if text is None else datetime.fromisoformat(text)


async def tick(queue: WorkQueue, schedule: Schedule, *, now: float) -> WorkItem | None:
    """One round of ``schedule`` at ``now`` on ``queue``: if a tick has come since the last
    one fired, enqueue its item (or, for a workflow schedule, start its workflow), then
    move the schedule's mark on to it; the item enqueued (or found live), if any.

    Safe to call from any number of workers at once, and to be cut short anywhere: a
    tick's item and workflow are named by the tick, so firing it again finds the first,
    and the mark moves only once the tick fired. A schedule seen for the first time only
    takes its mark: it fires from its next tick on. Raises `ConfigurationError` for a
    queue that keeps no ticks.
    """
    last_tick = getattr(queue, "last_tick", None)
    advance = getattr(queue, "advance_tick", None)
    if last_tick is None or advance is None:
        raise ConfigurationError(f"{type(queue).__name__} keeps no schedule ticks")
    due = schedule.latest_at_or_before(now)
    last = await last_tick(schedule.name)
    if last is None:
        await advance(schedule.name, due)
        return None
    if due <= last:
        return None
    enqueued: WorkItem | None = None
    if schedule.starts is not None:
        await schedule.starts(due)
    else:
        enqueued = await queue.enqueue(schedule.tick_item(due), dedupe_ttl=TICK_KEPT_SECONDS)
    await advance(schedule.name, due)
    return enqueued


__all__ = [
    "TICK_KEY",
    "Schedule",
    "tick",
    "tick_of",
    "tick_text",
]
