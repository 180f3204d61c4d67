"""What each dashboard page shows, read through the App's paged APIs: every read is
bounded (one page of a listing, one stats call per queue), whatever the store holds."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from durably.app import App
from durably.stores.catalog import Cataloguing
from durably.stores.runs import RunRecord, StateQuery
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.stores.throughput import MINUTES, NAMES_MOST, Minute, minute_of
from durably.stores.work import QueueStats, WorkItem

PAGE = 50
"""Rows on one page of workflows, dead letters or runs."""

RUN_TENANTS = 20
"""Tenants whose run totals the overview and the runs page add up at most."""

RUNS_TOTALLED = 1000
"""Runs of one tenant added into its totals at most (one page): past it a total is a floor."""

TENANTS_TTL = 60.0
"""Seconds the list of tenants with runs is kept before it is read again."""

BAR_STEPS = 8
"""Heights a minute's bar takes (the stylesheet draws each; no inline style is allowed)."""

VALUE_SHOWN = 2000
"""Characters of a stored value shown at most (the rest is cut, and says so)."""


@dataclass(frozen=True)
class QueueRow:
    """One queue on the overview."""

    name: str
    stats: QueueStats


@dataclass(frozen=True)
class TenantRuns:
    """A tenant's runs added up (over its first `RUNS_TOTALLED` at most)."""

    tenant: str
    runs: int
    tokens: int
    cost_micros: int
    partial: bool


@dataclass(frozen=True)
class MinuteCell:
    """One minute of a throughput row: its counts and its bar's height (0 to `BAR_STEPS`)."""

    label: str
    completed: int
    failed: int
    level: int


@dataclass(frozen=True)
class RateRow:
    """What finished of one queue or workflow kind over the last minutes."""

    what: str
    name: str
    completed: int
    failed: int
    minutes: list[MinuteCell]


@dataclass(frozen=True)
class Overview:
    """The overview page."""

    queues: list[QueueRow]
    by_status: dict[str, int]
    by_kind: dict[str, dict[str, int]]
    runs: list[TenantRuns]
    more_tenants: bool
    rates: list[RateRow]


@dataclass(frozen=True)
class Record:
    """One record of a workflow's history, as its timeline shows it."""

    key: str
    what: str
    at: str
    seconds: float | None
    value: str
    error: bool


@dataclass
class WorkflowPageData:
    """A workflow's page."""

    info: WorkflowInfo
    history: dict[str, Any]
    records: list[Record] = field(default_factory=list)
    inbox: list[Record] = field(default_factory=list)
    errors: list[Record] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    children: list[WorkflowInfo] = field(default_factory=list)


def shown(value: object) -> str:
    """A stored value as text for a page, cut to `VALUE_SHOWN` characters (the page
    escapes it)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    if len(text) > VALUE_SHOWN:
        return text[:VALUE_SHOWN] + f"… ({len(text) - VALUE_SHOWN:,} more characters)"
    return text


def when(epoch: float | None) -> str:
    """A store time (seconds since the epoch) as readable UTC, empty for None."""
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def queue_rows(app: App, queues: tuple[str, ...]) -> list[QueueRow]:
    """Each named queue's stats (one call per queue)."""
    stores = await app.stores()
    stats = await asyncio.gather(*(stores.queue.stats(queue=name) for name in queues))
    return [QueueRow(name, found) for name, found in zip(queues, stats, strict=True)]


async def tenant_runs(app: App, tenants: list[str]) -> list[TenantRuns]:
    """The run totals of each of ``tenants`` (one page of runs each)."""
    state = (await app.stores()).state
    totals: list[TenantRuns] = []
    for tenant in tenants:
        page = await state.list_runs(StateQuery(tenant=tenant, limit=RUNS_TOTALLED))
        totals.append(
            TenantRuns(
                tenant=tenant,
                runs=len(page.records),
                tokens=sum(r.usage.total_tokens for r in page.records),
                cost_micros=sum(r.cost_micros for r in page.records),
                partial=page.cursor is not None,
            )
        )
    return totals


class RunTenants:
    """The first `RUN_TENANTS` tenants with runs, read again at most every ``ttl``
    seconds: the SQL backings find distinct tenants by walking the runs index, which reads
    every run of the first tenants, too much for a page polled every few seconds."""

    def __init__(self, ttl: float = TENANTS_TTL) -> None:
        self._ttl = ttl
        self._read: tuple[float, list[str], bool] | None = None

    async def get(self, app: App) -> tuple[list[str], bool]:
        """The tenants, and whether there are more than shown."""
        now = time.monotonic()
        if self._read is None or now - self._read[0] > self._ttl:
            state = (await app.stores()).state
            tenants = await state.tenants(limit=RUN_TENANTS + 1)
            self._read = (now, tenants[:RUN_TENANTS], len(tenants) > RUN_TENANTS)
        return self._read[1], self._read[2]


def _rate_rows(what: str, names: list[str], found: dict[str, list[Minute]]) -> list[RateRow]:
    """A row per name, each with every one of the last `MINUTES` minutes (none: zero),
    ending at the newest minute of any row or this one, whichever is later."""
    newest = max([minute_of(time.time())] + [m.minute for ms in found.values() for m in ms])
    first = newest - MINUTES + 1
    busiest = max([1] + [m.completed + m.failed for ms in found.values() for m in ms])
    rows: list[RateRow] = []
    for name in names:
        by_minute = {m.minute: m for m in found.get(name, [])}
        cells = []
        for minute in range(first, newest + 1):
            held = by_minute.get(minute, Minute(minute, 0, 0))
            total = held.completed + held.failed
            label = datetime.fromtimestamp(minute * 60, UTC).strftime("%H:%M")
            level = -(-BAR_STEPS * total // busiest)  # rounded up: one item shows
            cells.append(MinuteCell(label, held.completed, held.failed, level))
        done = sum(c.completed for c in cells)
        failed = sum(c.failed for c in cells)
        rows.append(RateRow(what, name, done, failed, cells))
    return rows


async def rates(app: App, queues: tuple[str, ...]) -> list[RateRow]:
    """Items of each shown queue and workflows of each kind finished per minute over the
    last `MINUTES` minutes: two reads of the rings the stores keep, whatever they hold."""
    stores = await app.stores()
    named = list(queues[:NAMES_MOST])
    items = await stores.queue.finished_per_minute(queues=named)
    rows = _rate_rows("queue", named, items)
    checkpointer = stores.checkpointer
    if isinstance(checkpointer, Cataloguing):
        ended = await checkpointer.finished_per_minute()
        kinds = sorted(set(ended) | set(app.workflows))
        rows += _rate_rows("workflows", kinds, ended)
    return rows


async def overview(app: App, queues: tuple[str, ...], known: RunTenants) -> Overview:
    """The overview: queues, throughput, workflows by status and by kind, run totals by
    tenant."""
    rows = await queue_rows(app, queues)
    counts = await app.workflow_counts()
    tenants, more = await known.get(app)
    return Overview(
        queues=rows,
        by_status={s.value: counts.by_status.get(s, 0) for s in WorkflowStatus},
        by_kind={
            kind: {s.value: n for s, n in by.items() if n}
            for kind, by in sorted(counts.by_kind.items())
        },
        runs=await tenant_runs(app, tenants),
        more_tenants=more,
        rates=await rates(app, queues),
    )


async def dead_letters(app: App, queue: str, tenant: str | None) -> list[WorkItem]:
    """The oldest dead letters of ``queue`` (one page)."""
    stores = await app.stores()
    return await stores.queue.dead_letters(tenant=tenant, limit=PAGE, queue=queue)


def _record(entry: dict[str, Any], previous: datetime | None) -> tuple[Record, datetime | None]:
    at_text = str(entry.get("at") or "")
    try:
        at = datetime.fromisoformat(at_text) if at_text else None
    except ValueError:
        at = None
    seconds = (at - previous).total_seconds() if at and previous else None
    what = str(entry.get("what", ""))
    value = entry.get("value")
    error = what in ("failure", "retry") or (isinstance(value, dict) and "error" in value)
    readable = at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC" if at else at_text
    record = Record(str(entry.get("key", "")), what, readable, seconds, shown(value), error)
    return record, at or previous


async def workflow_page(app: App, workflow: str, tenant: str) -> WorkflowPageData:
    """A workflow's status, its history as a timeline, its inbox, errors and children.

    Raises:
        WorkflowNotFoundError: No workflow has this id in ``tenant``.
        InvalidInputError: A bad id or tenant.
    """
    handle = await app.get_handle(workflow, tenant=tenant)
    info = await handle.status()
    history = await handle.history()
    page = WorkflowPageData(info=info, history=history)
    previous: datetime | None = None
    for entry in history.get("history", []):
        record, previous = _record(entry, previous)
        page.records.append(record)
        if record.what in ("message", "recv"):
            page.inbox.append(record)
        if record.error:
            page.errors.append(record)
        if record.what == "step" and record.key not in page.steps:
            page.steps.append(record.key)
    children = await app.list_workflows(parent=workflow, tenant=tenant, limit=PAGE)
    page.children = children.workflows
    return page


async def runs_page(
    app: App, tenant: str | None, cursor: str | None, known: RunTenants
) -> tuple[list[str], list[RunRecord], str | None, list[TenantRuns], bool]:
    """The runs page: the tenants, one page of ``tenant``'s runs (the first tenant's by
    default) and the totals of each tenant."""
    tenants, more = await known.get(app)
    chosen = tenant if tenant is not None else (tenants[0] if tenants else None)
    records: list[RunRecord] = []
    next_cursor: str | None = None
    if chosen is not None:
        state = (await app.stores()).state
        page = await state.list_runs(StateQuery(tenant=chosen, limit=PAGE, cursor=cursor))
        records, next_cursor = list(page.records), page.cursor
    return tenants, records, next_cursor, await tenant_runs(app, tenants), more


__all__ = [
    "PAGE",
    "MinuteCell",
    "Overview",
    "QueueRow",
    "RateRow",
    "Record",
    "RunTenants",
    "TenantRuns",
    "WorkflowPageData",
    "dead_letters",
    "overview",
    "queue_rows",
    "rates",
    "runs_page",
    "shown",
    "when",
    "workflow_page",
]
