"""``durably workflows list``, ``show`` (with history), ``resume`` and ``delete``.

Workflow ids are unique within a tenant: ``show``, ``resume`` and ``delete`` act in the
tenant ``--tenant`` names (the default tenant without it), and ``list`` shows every
tenant's workflows, or one tenant's with ``--tenant``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from durably.app.storage import (
    DEFAULT_TENANT,
    START,
    START_INSTANTS,
    described,
    earlier_workflows,
    history_of,
    instant,
    key_prefix,
    kind_of,
    older_layout,
    problems,
    records_of,
    scoped_key,
    settle_layout,
    status_of,
    workflow_at,
    workflow_scope,
)
from durably.app.storage import (
    delete_workflow as delete_stored,
)
from durably.cli import operations
from durably.cli.render import cell, emit_json, iso, printable, table
from durably.cli.stores import UsageError, add_dsn, dsn_from, opened
from durably.errors import InvalidInputError, UnreadableRecordError, WorkflowNotFoundError
from durably.stores.codec import JsonCodec
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.stores.workflows import Checkpointer, Written
from durably.validation import identifier


def register(commands: Any) -> None:
    """Add the ``workflows`` command group."""
    group = commands.add_parser("workflows", help="list, show, resume and delete workflows")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = sub.add_parser("list", help="workflows newest first, by kind, status, tenant...")
    add_dsn(listing)
    operations.add_filters(listing, tenant_help="only this tenant's workflows (default: every)")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--after", help="the page cursor the previous page printed")
    listing.add_argument(
        "--store-order",
        action="store_true",
        help="every workflow with records in the store's key order (also those started "
        "before the store kept a catalog, or by the engine), with --tenant and --status",
    )
    listing.add_argument("--json", action="store_true", help="JSON for scripts")
    listing.set_defaults(run=_listing)

    show = sub.add_parser("show", help="a workflow's status and every record with its time")
    add_dsn(show)
    _add_tenant(show)
    show.add_argument("workflow", metavar="WORKFLOW")
    show.add_argument("--json", action="store_true", help="JSON for scripts")
    show.set_defaults(run=show_workflow)

    resume = sub.add_parser(
        "resume",
        help="make a parked, failed or cancelled workflow ready again on the code deployed now",
    )
    add_dsn(resume)
    operations.add_bulk(resume)
    resume.set_defaults(run=_resuming)

    settle = sub.add_parser(
        "settle-tenants",
        help="check that no workflow stored before tenant scopes remains, and record it",
    )
    add_dsn(settle)
    settle.add_argument("--json", action="store_true", help="JSON for scripts")
    settle.set_defaults(run=settle_tenants)

    delete = sub.add_parser("delete", help="cancel a workflow's wakeups and discard its records")
    add_dsn(delete)
    _add_tenant(delete)
    delete.add_argument("workflow", metavar="WORKFLOW")
    delete.add_argument(
        "--kind",
        help="the kind whose wakeups to cancel (default: the kind its start recorded; "
        "needed for workflows not started through durably.App)",
    )
    delete.add_argument("--json", action="store_true", help="JSON for scripts")
    delete.set_defaults(run=delete_workflow)
    operations.register(sub, add_dsn)


async def _listing(args: argparse.Namespace) -> int:
    """``list``: newest first through the catalog, or in the store's order."""
    if not args.store_order:
        return await operations.list_newest(args)
    for option in ("kind", "since", "until", "parent"):
        if getattr(args, option) is not None:
            raise UsageError(f"--{option} lists through the catalog: drop --store-order")
    if args.status is not None and args.status not in {s.value for s in WorkflowStatus}:
        raise UsageError(f"--status: no workflow status is {args.status!r}")
    return await list_workflows(args)


async def _resuming(args: argparse.Namespace) -> int:
    """``resume``: one workflow (``WORKFLOW``), or every one a filter selects."""
    if (
        args.workflow is not None
        and not args.all_tenants
        and not any(
            getattr(args, name) is not None
            for name in ("kind", "status", "since", "until", "parent")
        )
    ):
        args.tenant = args.tenant if args.tenant is not None else DEFAULT_TENANT
        return await resume_workflow(args)
    return await operations.resume_workflows(args)


def _add_tenant(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tenant",
        default=DEFAULT_TENANT,
        help=f"the tenant whose workflow WORKFLOW is (default {DEFAULT_TENANT!r})",
    )


def _named(args: argparse.Namespace) -> str:
    """How a message names the workflow ``args`` name (printable)."""
    where = "" if args.tenant == DEFAULT_TENANT else f" of tenant {args.tenant!r}"
    return printable(f"{args.workflow!r}{where}")


async def _key_of(checkpointer: Checkpointer[Any], args: argparse.Namespace) -> str | None:
    """The store's key of the workflow ``args`` name, None if there is none; a bad id or
    tenant is a `UsageError`. A workflow whose start record cannot be read is found at
    the key that failed to read (the commands go on around it)."""
    try:
        return await workflow_at(checkpointer, args.tenant, args.workflow)
    except InvalidInputError as exc:
        raise UsageError(str(exc)) from None
    except UnreadableRecordError as exc:
        return exc.workflow


async def resume_workflow(args: argparse.Namespace) -> int:
    """Resume a workflow started through `durably.App` (`WorkflowHandle.resume`): exit 0
    when it was parked, failed or cancelled and is ready again, 1 when it does not exist or
    is in any other state (nothing changes then)."""
    from durably.app import App

    async with opened(args):  # the store exists and answers (a missing file is refused)
        pass
    app = App(dsn_from(args.dsn), migrate=False)
    try:
        try:
            handle = await app.get_handle(args.workflow, tenant=args.tenant)
        except InvalidInputError as exc:
            raise UsageError(str(exc)) from None
        except WorkflowNotFoundError:
            print(f"durably: no workflow {_named(args)}", file=sys.stderr)
            return 1
        resumed = await handle.resume()
        status = (await handle.status()).status.value
    finally:
        await app.close()
    if args.json:
        emit_json(
            {
                "tenant": args.tenant,
                "workflow": args.workflow,
                "resumed": resumed,
                "status": status,
            }
        )
    elif resumed:
        print(f"resumed {_named(args)}: {status}, a worker will run it")
    else:
        print(
            f"durably: {_named(args)} is {status}: only a parked, failed or "
            "cancelled workflow can be resumed",
            file=sys.stderr,
        )
    return 0 if resumed else 1


SETTLE_SHOWN = 20
"""How many remaining workflows ``settle-tenants`` names at most."""


async def settle_tenants(args: argparse.Namespace) -> int:
    """Record that no workflow stored before tenant scopes remains (exit 0), or name them.

    Releases before tenant scopes kept a workflow of any tenant under its bare id; Apps
    look there too until this is recorded, one more read per start outside the default
    tenant. Exit 1, recording nothing, naming those that remain (they go once finished
    and swept, or deleted).
    """
    async with opened(args) as stores:
        earlier = await older_layout(stores.checkpointer, settle=False)
        remaining = (
            await earlier_workflows(stores.checkpointer, limit=SETTLE_SHOWN) if earlier else []
        )
        if not remaining:
            await settle_layout(stores.checkpointer)
    if args.json:
        rows = [{"tenant": tenant, "workflow": id} for tenant, id in remaining]
        emit_json({"settled": not remaining, "remaining": rows})
    elif remaining:
        print(
            f"durably: {len(remaining)}{'+' if len(remaining) >= SETTLE_SHOWN else ''} "
            "workflow(s) "
            "stored before tenant scopes remain; nothing recorded:",
            file=sys.stderr,
        )
        for tenant, id in remaining:
            print(f"  tenant {printable(repr(tenant))}: {printable(repr(id))}", file=sys.stderr)
    else:
        print("no workflow stored before tenant scopes remains: recorded")
    return 1 if remaining else 0


async def list_workflows(args: argparse.Namespace) -> int:
    """Print one page of workflows in the store's order with their tenant and id, each
    with its kind when its start recorded one; a workflow started but not yet run by a
    worker is listed as pending. A workflow with records or a status that cannot be read
    is listed with what and why (exit 0: the listing itself worked)."""
    if not 1 <= args.limit <= 1000:
        raise UsageError("--limit must be between 1 and 1000")
    status = WorkflowStatus(args.status) if args.status else None
    try:
        tenant = None if args.tenant is None else identifier(args.tenant, "--tenant")
        after = None if args.after is None else identifier(args.after, "--after")
    except InvalidInputError as exc:
        raise UsageError(str(exc)) from None
    async with opened(args) as stores:
        rows = await _page(stores.checkpointer, status, tenant, args.limit, after)
    listed = [
        {
            "tenant": row.tenant,
            "workflow": row.id,
            "kind": row.kind,
            "status": (
                _shown(row.info, row.id, row.tenant)
                if row.info
                else (None if row.unread_status else _PENDING)
            ),
            "unreadable": row.problem,
        }
        for row in rows
    ]
    cursor = rows[-1].key if len(rows) == args.limit else None
    if args.json:
        emit_json({"workflows": listed, "next_after": cursor})
        return 0
    if not rows:
        print(
            "no workflows"
            + (f" of tenant {printable(repr(tenant))}" if tenant is not None else "")
            + (f" with status {status.value}" if status else "")
        )
        return 0
    table_rows = [[row.tenant, row.id, row.kind, *_row_cells(row)] for row in rows]
    headers = ["tenant", "workflow", "kind", "status", "attempts", "updated", "last error"]
    print(table(table_rows, headers, right=(4,)))
    if cursor is not None:
        print(f"(more may follow: --after {printable(repr(cursor))})")
    damaged = sum(1 for row in rows if row.problem)
    if damaged:
        print(
            f"durably: {damaged} workflow(s) above have records that cannot be read: "
            "see durably workflows show WORKFLOW",
            file=sys.stderr,
        )
    return 0


def _row_cells(row: _Row) -> list[object]:
    """A listed workflow's status cells, what cannot be read of it in the last one."""
    cells = _cells(row.info) if row.info else ["pending (never run)", 0, None, None]
    if row.unread_status:
        cells = ["unreadable", None, None, None]
    if row.problem:
        cells[3] = f"unreadable: {row.problem}"
    return cells


_PENDING = {"status": WorkflowStatus.PENDING.value, "attempts": 0}
"""How a workflow no worker ran yet reads in ``--json`` (stores keep no status for it)."""


def _cells(info: WorkflowInfo) -> list[object]:
    return [info.status, info.attempts, info.updated_at, info.last_error]


def _shown(info: WorkflowInfo, id: str, tenant: str | None) -> WorkflowInfo:
    """``info`` as an operator reads it: the workflow's id and tenant, not the store's key."""
    return dataclasses.replace(info, workflow=id, tenant=tenant)


@dataclasses.dataclass(frozen=True, slots=True)
class _Row:
    key: str
    """The store's key: the page cursor."""
    tenant: str | None
    id: str
    kind: str | None
    info: WorkflowInfo | None
    unread_status: str | None = None
    """Why its status cannot be read (None: it can, or there is none)."""
    problem: str | None = None
    """What cannot be read of it, and why (None: everything can)."""


async def _page(
    checkpointer: Checkpointer[Any],
    status: WorkflowStatus | None,
    tenant: str | None,
    limit: int,
    after: str | None,
) -> list[_Row]:
    """Up to ``limit`` workflows after cursor ``after`` (of ``tenant`` only, if given)
    with their status: all, those with ``status``, or (pending) those no worker ran yet
    or a resume reset."""
    # The keys of a tenant other than the default one sort together: the page starts
    # there and ends with them, unless the store may keep some under bare ids still.
    span = None if tenant is None else key_prefix(tenant)
    if span is not None and await older_layout(checkpointer, settle=False):
        span = None
    if span is not None and (after is None or after < span):
        after = span
    found: list[_Row] = []
    while len(found) < limit:
        page = await _statuses(checkpointer, status, limit, after)
        for key, info, unread in page:
            if span is not None and not key.startswith(span):
                return found  # past the tenant's keys
            if status is not None and (unread or (info and info.status is not status)):
                continue  # an unreadable status is none of them
            scoped = scoped_key(key)
            if tenant is not None and scoped is not None and scoped[0] != tenant:
                continue  # known from the key alone, without reading the records
            row = await _row(checkpointer, key, info, unread)
            if row is None or (tenant is not None and row.tenant != tenant):
                continue
            found.append(row)
            if len(found) == limit:
                break
        if len(page) < limit:
            break
        after = page[-1][0]
    return found


async def _statuses(
    checkpointer: Checkpointer[Any], status: WorkflowStatus | None, limit: int, after: str | None
) -> list[tuple[str, WorkflowInfo | None, str | None]]:
    """A page of keys after ``after`` with their status, and why it cannot be read if so:
    by status where one is asked for, unless a status row of the page cannot be read:
    then key by key, around it."""
    if status is not None and status is not WorkflowStatus.PENDING:
        try:
            infos = await checkpointer.list_status(status=status, limit=limit, after=after)
        except UnreadableRecordError:
            pass
        else:
            return [(info.workflow, info, None) for info in infos]
    keys = await checkpointer.workflows(after=after, limit=limit)
    return [(key, *(await status_of(checkpointer, key))) for key in keys]


async def _row(
    checkpointer: Checkpointer[Any], key: str, info: WorkflowInfo | None, unread: str | None
) -> _Row | None:
    stored, unreadable = await records_of(checkpointer, key)
    scope = workflow_scope(key, stored)
    if scope is None:
        return None  # the store's own marker, not a workflow
    kind, start = kind_of(key, stored, unreadable)
    return _Row(key, scope[0], scope[1], kind, info, unread, problems(unread, unreadable, start))


def _short(value: object, width: int = 70) -> str:
    text = JsonCodec().encode(value) if not isinstance(value, str) else value
    return text if len(text) <= width else text[: width - 1] + "…"


def _readable(key: str, value: object) -> object:
    """A record as an operator reads it: the instants the App records (deadlines, retries,
    a start's times) as UTC times in ISO 8601 rather than epoch seconds."""
    if instant(key):
        return iso(value)
    if key == START and isinstance(value, dict):
        return {k: iso(v) if k in START_INSTANTS else v for k, v in value.items()}
    return value


async def show_workflow(args: argparse.Namespace) -> int:
    """Print a workflow's tenant, id, status and history; exit 1 if the tenant has no
    such workflow. Records that cannot be read are shown as such, with why, after those
    that can.

    ``--json`` prints every record with its value as stored, the start record first, in
    recorded order, and the store's key of the workflow: what
    `durably.testing.History.from_json` reads to replay it against other code."""
    async with opened(args) as stores:
        key = await _key_of(stores.checkpointer, args)
        if args.json:
            found = (
                None
                if key is None
                else await described(stores.checkpointer, key, args.tenant, args.workflow)
            )
            if found is None:
                print(f"durably: no workflow {_named(args)}", file=sys.stderr)
                return 1
            emit_json(found)
            return 0
        info: WorkflowInfo | None = None
        unread_status: str | None = None
        history: dict[str, Written] = {}
        unreadable: dict[str, str] = {}
        if key is not None:
            info, unread_status = await status_of(stores.checkpointer, key)
            history, unreadable = await history_of(stores.checkpointer, key)
    if key is None or (info is None and unread_status is None and not history and not unreadable):
        print(f"durably: no workflow {_named(args)}", file=sys.stderr)
        return 1
    values = {k: written.value for k, written in history.items()}
    kind, start = kind_of(key, values, unreadable)
    print(f"tenant    {printable(args.tenant)}")
    print(f"workflow  {printable(args.workflow)}")
    if start is not None:
        print(f"kind      - ({printable(start)})")
    else:
        print(f"kind      {printable(kind) if kind else '- (not recorded: not started by an App)'}")
    if unread_status is not None:
        print(f"status    - (its status cannot be read: {printable(unread_status)})")
    elif info is not None:
        print(f"status    {info.status.value} (attempts {info.attempts}, {cell(info.updated_at)})")
        if info.last_error:
            print(f"error     {printable(info.last_error)}")
    else:
        print("status    - (never run by a worker)")
    if history or unreadable:
        print()
        rows = [[cell(w.at), key, _short(_readable(key, w.value))] for key, w in history.items()]
        rows += [["?", key, f"(cannot be read: {why})"] for key, why in unreadable.items()]
        print(table(rows, ["recorded", "key", "value"]))
    return 0


async def delete_workflow(args: argparse.Namespace) -> int:
    """Delete a workflow's records and cancel its wakeups in its kind's scheduler; exit 1
    if the tenant has no such workflow."""
    async with opened(args) as stores:
        key = await _key_of(stores.checkpointer, args)
        if key is None:
            print(f"durably: no workflow {_named(args)}", file=sys.stderr)
            return 1
        stored, unreadable = await records_of(stores.checkpointer, key)
        recorded, start = kind_of(key, stored, unreadable)
        if recorded is not None and args.kind is not None and args.kind != recorded:
            raise UsageError(f"workflow {_named(args)} is of kind {recorded!r}, not {args.kind!r}")
        kind = args.kind or recorded
        if kind is None:
            why = start or "it was not started by durably.App"
            raise UsageError(
                f"the kind of workflow {_named(args)} is not recorded ({why}): pass --kind, "
                "the kind its worker serves"
            )
        deleted = await delete_stored(stores, key, kind)
    if args.json:
        emit_json(
            {
                "tenant": args.tenant,
                "workflow": args.workflow,
                "kind": kind,
                "records_deleted": deleted,
            }
        )
    else:
        print(
            f"deleted workflow {_named(args)} of kind {kind!r}: "
            f"{deleted} record(s) discarded, its wakeups cancelled"
        )
    return 0
