"""The replay tester: check a deploy against the workflows in flight before it ships.

Read the histories of stored workflows (from a store, or from the JSON that ``durably
workflows show --json`` prints), then replay each against the bodies an `App` of the code
about to ship registers. Recorded calls answer from the record; the first call with no
record stops the replay there, unrun; nothing is written to any store::

    histories = await in_flight_histories("postgresql://…", kind="orders.fulfil")
    report = await replay(app, histories)
    assert report.ok, report.describe()

Each workflow's report (`WorkflowReplay`) says whether the code still fits its history
(`Finding`): a step called with other arguments, steps replaced, inserted, removed or
reordered, a recorded value that no longer validates, a body that now fails.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durably.app import App
from durably.app.replaying import Finding, WorkflowReplay, replay_workflow
from durably.app.storage import (
    DEFAULT_TENANT,
    key_prefix,
    recorded_kind,
    scoped_key,
    workflow_at,
    workflow_scope,
)
from durably.clock import Clock
from durably.errors import InvalidInputError, WorkflowNotFoundError
from durably.stores.opening import Stores, open_stores
from durably.stores.status import WorkflowStatus
from durably.validation import identifier

IN_FLIGHT = (
    WorkflowStatus.PENDING,
    WorkflowStatus.RUNNING,
    WorkflowStatus.SLEEPING,
    WorkflowStatus.BLOCKED,
    WorkflowStatus.PARKED,
)
"""The statuses of workflows a deploy meets: every unfinished one (a parked workflow
waits to be resumed on the code deployed then)."""
PAGE = 500
"""Workflows one read of a store's statuses or ids lists."""


@dataclass(frozen=True, slots=True)
class History:
    """One workflow's stored history: every record, in the order it was recorded.

    Attributes:
        tenant: The workflow's tenant.
        workflow: Its id.
        key: The store's key of the workflow (its id, in the default tenant).
        records: Every record as ``(key, value)``, in recorded order; the first is the
            start record.
        status: Its status when read (``"sleeping"``...), None when it had none.
    """

    tenant: str
    workflow: str
    key: str
    records: tuple[tuple[str, object], ...]
    status: str | None = None

    @property
    def kind(self) -> str | None:
        """The kind its start record names (None without one)."""
        return recorded_kind(dict(self.records))

    @classmethod
    def from_json(cls, data: str | bytes | Mapping[str, Any]) -> History:
        """Read a history from what ``durably workflows show --json`` prints.

        Args:
            data: The JSON text, or the object it holds.

        Returns:
            The history.

        Raises:
            InvalidInputError: Not JSON, or not an object with ``workflow`` and a
                ``history`` list of ``{"key": ..., "value": ...}`` records.
        """
        if isinstance(data, str | bytes):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise InvalidInputError(f"a history is JSON: {exc}") from None
        if not isinstance(data, Mapping):
            raise InvalidInputError(f"a history is a JSON object, got {type(data).__name__}")
        workflow = identifier(data.get("workflow"), "history's workflow")
        tenant = identifier(data.get("tenant", DEFAULT_TENANT), "history's tenant")
        entries = data.get("history")
        if not isinstance(entries, list):
            raise InvalidInputError(f"history of {workflow!r}: 'history' must be a list")
        records: list[tuple[str, object]] = []
        for entry in entries:
            if not isinstance(entry, Mapping) or "value" not in entry:
                raise InvalidInputError(
                    f"history of {workflow!r}: each record is an object with key and value"
                )
            records.append((identifier(entry.get("key"), "record key"), entry["value"]))
        key = data.get("key")
        status = data.get("status")
        if isinstance(status, Mapping):
            status = status.get("status")
        return cls(
            tenant=tenant,
            workflow=workflow,
            key=_key_of(tenant, workflow) if key is None else identifier(key, "history's key"),
            records=tuple(records),
            status=status if isinstance(status, str) else None,
        )

    def to_json(self) -> str:
        """The history as JSON that `from_json` reads back (the shape ``durably workflows
        show --json`` prints, without the times records landed)."""
        return json.dumps(
            {
                "tenant": self.tenant,
                "workflow": self.workflow,
                "key": self.key,
                "kind": self.kind,
                "status": None if self.status is None else {"status": self.status},
                "history": [{"key": key, "value": value} for key, value in self.records],
            },
            indent=2,
            sort_keys=True,
            ensure_ascii=False,
        )

    def __str__(self) -> str:
        where = "" if self.tenant == DEFAULT_TENANT else f"{self.tenant}/"
        return f"{where}{self.workflow}"


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """What replaying histories against the code deployed now found, workflow by workflow.

    Attributes:
        workflows: One report per history, in the order given.
    """

    workflows: tuple[WorkflowReplay, ...]

    @property
    def ok(self) -> bool:
        """Whether the code fits every history."""
        return all(workflow.ok for workflow in self.workflows)

    @property
    def problems(self) -> tuple[WorkflowReplay, ...]:
        """The reports of the workflows the code no longer fits."""
        return tuple(workflow for workflow in self.workflows if not workflow.ok)

    def describe(self) -> str:
        """The report for people: a summary line, then each workflow, problems first."""
        problems = self.problems
        counts: dict[str, int] = {}
        for problem in problems:
            counts[problem.finding.value] = counts.get(problem.finding.value, 0) + 1
        found = ", ".join(f"{count} {finding}" for finding, count in sorted(counts.items()))
        head = (
            f"replayed {len(self.workflows)} workflow(s): "
            f"{len(self.workflows) - len(problems)} ok"
            + (f", {len(problems)} not ({found})" if problems else "")
        )
        lines = [head]
        lines += [f"  {workflow.describe()}" for workflow in problems]
        lines += [f"  {workflow.describe()}" for workflow in self.workflows if workflow.ok]
        return "\n".join(lines)


async def replay(
    app: App, histories: History | Iterable[History], *, clock: Clock | None = None
) -> ReplayReport:
    """Replay stored histories against the bodies ``app`` registers, without side effects.

    Each history runs one pass of its kind's body over a copy of its records in memory:
    recorded calls answer from the record, the first call with no record stops there
    unrun (a worker would run it next), and neither ``app``'s store nor any other is
    opened or written.

    Args:
        app: An App of the code about to ship, its workflows and steps registered.
        histories: The histories to check (`History`; see `histories_from_store`,
            `in_flight_histories` and `histories_from_files`).
        clock: The time the replay runs at (default: ``app``'s clock). A recorded sleep
            whose deadline is ahead of it, and after which nothing more was recorded, is
            where the workflow waits.

    Returns:
        One report per history, in order; ``report.ok`` when the code fits them all.

    Raises:
        InvalidInputError: ``app`` is not an `App`, or a history is not a `History`.
    """
    if not isinstance(app, App):
        raise InvalidInputError(f"replay needs a durably.App, got {type(app).__name__}")
    items = [histories] if isinstance(histories, History) else list(histories)
    for item in items:
        if not isinstance(item, History):
            raise InvalidInputError(
                f"replay takes durably.testing.History values, got {type(item).__name__}"
            )
    reports = [
        await replay_workflow(app, item.key, dict(item.records), clock=clock) for item in items
    ]
    return ReplayReport(tuple(reports))


async def assert_replays(
    app: App, histories: History | Iterable[History], *, clock: Clock | None = None
) -> ReplayReport:
    """`replay`, failing with the report's description unless the code fits every history.

    For tests: ``await assert_replays(app, history)`` in a test parametrized over saved
    histories names the workflow and what no longer fits.

    Args:
        app: As for `replay`.
        histories: As for `replay`.
        clock: As for `replay`.

    Returns:
        The report, when it is ok.

    Raises:
        AssertionError: The code does not fit some history; the message is
            `ReplayReport.describe`.
        InvalidInputError: As for `replay`.
    """
    __tracebackhide__ = True
    report = await replay(app, histories, clock=clock)
    if not report.ok:
        raise AssertionError(report.describe())
    return report


def histories_from_files(*paths: str | Path) -> list[History]:
    """Read histories saved with ``durably workflows show --json > FILE``.

    Args:
        *paths: JSON files (one history, or a list of them) or directories (every
            ``*.json`` file in them, by name).

    Returns:
        The histories, in the order the files are named.

    Raises:
        InvalidInputError: A file that is not a history (`History.from_json`), or a path
            that does not exist.
    """
    found: list[History] = []
    for path in map(Path, paths):
        if path.is_dir():
            found += histories_from_files(*sorted(path.glob("*.json")))
            continue
        if not path.is_file():
            raise InvalidInputError(f"no history file at {str(path)!r}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise InvalidInputError(f"{str(path)!r} is not JSON: {exc}") from None
        for item in data if isinstance(data, list) else [data]:
            found.append(History.from_json(item))
    return found


async def histories_from_store(
    source: str | Stores, ids: Iterable[str], *, tenant: str = DEFAULT_TENANT
) -> list[History]:
    """Read the histories of workflows ``ids`` of ``tenant`` from a store, reading only.

    Args:
        source: The store: a DSN (opened and closed here; a missing SQLite file is
            refused, not made) or open `Stores`.
        ids: The workflows' ids.
        tenant: Their tenant.

    Returns:
        Their histories, in the order of ``ids``.

    Raises:
        InvalidInputError: A bad id or tenant (before any I/O).
        WorkflowNotFoundError: The tenant has no workflow of one of the ids.
    """
    tenant = identifier(tenant, "tenant")
    wanted = [identifier(id, "id") for id in ids]
    found: list[History] = []
    async with _opened(source) as stores:
        for id in wanted:
            key = await workflow_at(stores.checkpointer, tenant, id)
            history = None if key is None else await _read(stores, key)
            if history is None:
                raise WorkflowNotFoundError(id, tenant=tenant)
            found.append(history)
    return found


async def in_flight_histories(
    source: str | Stores,
    *,
    kind: str | None = None,
    tenant: str | None = None,
    limit: int = 1000,
    never_run: bool = False,
) -> list[History]:
    """Read the histories of every unfinished workflow in a store, reading only.

    Unfinished: pending, running, sleeping, blocked or parked (found by their status).
    Workflows started that no worker ran yet have no status: ``never_run=True`` finds
    them too, by reading every workflow the store keeps (slow on a large store).

    Args:
        source: The store: a DSN (opened and closed here) or open `Stores`.
        kind: Only workflows of this kind (default: every kind).
        tenant: Only this tenant's workflows (default: every tenant's).
        limit: The most histories read. More matching is an error, not a silent cut:
            a check that passes must have seen every workflow in flight.
        never_run: Also read workflows no worker ran yet.

    Returns:
        The histories, by tenant and id.

    Raises:
        InvalidInputError: A bad ``kind``, ``tenant`` or ``limit`` (before any I/O), or
            more than ``limit`` workflows match.
    """
    if kind is not None:
        identifier(kind, "kind")
    if tenant is not None:
        identifier(tenant, "tenant")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError(f"limit must be an int of at least 1, got {limit!r}")
    found: list[History] = []

    def take(history: History | None) -> None:
        if history is None or (kind is not None and history.kind != kind):
            return
        if tenant is not None and history.tenant != tenant:
            return
        if len(found) == limit:
            raise InvalidInputError(
                f"more than {limit} workflows in flight match: raise limit= or narrow "
                "kind= or tenant="
            )
        found.append(history)

    async with _opened(source) as stores:
        checkpointer = stores.checkpointer
        for status in IN_FLIGHT:
            after: str | None = None
            while True:
                infos = await checkpointer.list_status(status=status, limit=PAGE, after=after)
                for info in infos:
                    if _skippable(info.workflow, tenant):
                        continue
                    take(await _read(stores, info.workflow, info.status.value))
                if len(infos) < PAGE:
                    break
                after = infos[-1].workflow
        if never_run:
            after = None
            while True:
                keys = await checkpointer.workflows(after=after, limit=PAGE)
                for key in keys:
                    if _skippable(key, tenant) or await checkpointer.get_status(key) is not None:
                        continue
                    take(await _read(stores, key))
                if len(keys) < PAGE:
                    break
                after = keys[-1]
    return sorted(found, key=lambda history: (history.tenant, history.workflow))


def _skippable(key: str, tenant: str | None) -> bool:
    """Whether the key alone shows the workflow is of another tenant than ``tenant``."""
    scoped = scoped_key(key)
    return tenant is not None and scoped is not None and scoped[0] != tenant


async def _read(stores: Stores, key: str, status: str | None = None) -> History | None:
    """The history of the workflow keyed ``key``; None without a start record (not a
    workflow an App started, or the store's own marker)."""
    records = await stores.checkpointer.load(key)
    scope = workflow_scope(key, records)
    if scope is None or scope[0] is None or not records:
        return None
    if status is None:
        info = await stores.checkpointer.get_status(key)
        status = None if info is None else info.status.value
    return History(scope[0], scope[1], key, tuple(records.items()), status)


def _key_of(tenant: str, workflow: str) -> str:
    """The store's key of ``workflow`` of ``tenant``, for a history saved without one."""
    prefix = key_prefix(tenant)
    return workflow if prefix is None else f"{prefix}{workflow}"


@contextlib.asynccontextmanager
async def _opened(source: str | Stores) -> AsyncIterator[Stores]:
    if isinstance(source, Stores):
        yield source
        return
    if not isinstance(source, str):
        raise InvalidInputError(
            f"a history source is a DSN or durably.Stores, got {type(source).__name__}"
        )
    stores = await open_stores(source, create=False)
    try:
        yield stores
    finally:
        await stores.close()


__all__ = [
    "IN_FLIGHT",
    "PAGE",
    "Finding",
    "History",
    "ReplayReport",
    "WorkflowReplay",
    "assert_replays",
    "histories_from_files",
    "histories_from_store",
    "in_flight_histories",
    "replay",
]
