"""What the App conformance suites share: value types of every supported kind, topics, a
fresh-id helper and the ``app`` fixture (an App on a `ManualClock`)."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Awaitable, Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from durably.app import App, Context, Retry, Step, Topic, Workflow
from durably.clock import ManualClock

AppFactory = Callable[..., Awaitable[App]]
"""``(clock, **options)``: each call an App over the test's one store (every call of one test
shares it), keyword options (``limits=``, say) passed on to the App."""


class Ticket(BaseModel):
    title: str
    priority: int = 1


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Everything(BaseModel):
    when: datetime
    day: date
    id: uuid.UUID
    amount: Decimal
    colour: Colour
    point: Point
    tags: list[str]
    pair: tuple[int, str]
    table: dict[str, int]
    maybe: int | None


class Reply(BaseModel):
    """A step's value as first deployed."""

    text: str


class ReplyWithScore(BaseModel):
    """The same value after a deploy added a required field (an unsafe model change)."""

    text: str
    score: float


class ReplyWithDefault(BaseModel):
    """The fix: the new field has a default (a safe model change)."""

    text: str
    score: float = 0.0


APPROVAL: Topic[bool] = Topic("approval", bool)
NOTE: Topic[str] = Topic("note", str)


def fresh_id() -> str:
    return f"wf-{uuid.uuid4().hex[:12]}"


def fails_once(app: App, tries: list[int]) -> Step[[], str]:
    """Register a step whose first attempt fails and whose retry waits a minute (a durable
    sleep, over `DURABLE_BACKOFF`); ``tries`` gets an entry per attempt."""

    @app.step(retry=Retry(max_attempts=2, initial=60, maximum=60, jitter=0))
    async def flaky() -> str:
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("the first attempt fails; the retry waits a minute")
        return "recovered"

    return flaky


def parent_of_a_sleeper(app: App) -> tuple[Workflow[[], None], Workflow[[], None]]:
    """Register ``slow``, which sleeps a day, and ``parent``, which waits for it as its
    child; both returned, ``(slow, parent)``."""

    @app.workflow
    async def slow(ctx: Context) -> None:
        await ctx.sleep(timedelta(days=1))

    @app.workflow
    async def parent(ctx: Context) -> None:
        await ctx.child(slow)

    return slow, parent


def earlier_start(
    kind: str,
    args: dict[str, Any],
    tenant: str,
    *,
    parent: str | None = None,
    parent_kind: str | None = None,
) -> dict[str, Any]:
    """A start record as releases before tenant scopes wrote it."""
    return {
        "kind": kind,
        "args": args,
        "tenant": tenant,
        "created": 0.0,
        "parent": parent,
        "parent_kind": parent_kind,
        "timeout_at": None,
    }


async def write_earlier(
    app: App,
    kind: str,
    args: dict[str, Any],
    records: dict[str, object] | None = None,
    messages: list[dict[str, object]] | None = None,
) -> str:
    """Start a workflow of ``kind`` in the default tenant as an earlier release did.

    Its start record holds ``args`` as that release encoded them, ``records`` lie beside
    it and ``messages`` wait in its inbox; then it is made ready. Returns its id.
    """
    stores = await app.stores()
    workflow = fresh_id()
    await stores.checkpointer.supply(
        workflow, "durably:start", earlier_start(kind, args, "default")
    )
    for key, value in (records or {}).items():
        await stores.checkpointer.supply(workflow, key, value)
    durable = stores.durable(kind)
    for message in messages or []:
        await durable.deliver(workflow, message)
    await durable.scheduler.make_ready(workflow)
    return workflow


class AppFixtures:
    """The ``app`` fixture: an App on a `ManualClock` from the subclass's ``app_factory``."""

    shares_stores = True
    """Whether two Apps of one test see one store (not on memory, whose stores live in
    the App that opened them): tests of a deploy between two Apps need it."""

    @pytest.fixture
    async def app(self, app_factory: AppFactory) -> App:
        return await app_factory(ManualClock())

    async def stored_slots(self, app: App) -> int | None:
        """How many debounce slots ``app``'s store keeps, counted in the store itself (its
        rows or keys), or None where this suite does not count them. Tests compare it
        before and after, so slots other tests left do not matter."""
        return None


__all__ = [
    "APPROVAL",
    "NOTE",
    "AppFactory",
    "AppFixtures",
    "Colour",
    "Everything",
    "Point",
    "Reply",
    "ReplyWithDefault",
    "ReplyWithScore",
    "Ticket",
    "earlier_start",
    "fails_once",
    "fresh_id",
    "parent_of_a_sleeper",
    "write_earlier",
]
