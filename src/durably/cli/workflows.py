"""``durably workflows list``, ``show`` (with history), ``resume`` and ``delete``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from durably.app import recorded_kind
from durably.cli.render import cell, emit_json, printable, table
from durably.cli.stores import UsageError, add_dsn, dsn_from, opened
from durably.errors import WorkflowNotFoundError
from durably.stores.codec import JsonCodec
from durably.stores.status import WorkflowInfo, WorkflowStatus
from durably.stores.workflows import Checkpointer


def register(commands: Any) -> None:
    """Add the ``workflows`` command group."""
    group = commands.add_parser("workflows", help="list, show, resume and delete workflows")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = sub.add_parser("list", help="workflow statuses ordered by id")
    add_dsn(listing)
    listing.add_argument("--status", choices=[s.value for s in WorkflowStatus])
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--after", help="only ids after this one (for paging)")
    listing.add_argument("--json", action="store_true", help="JSON for scripts")
    listing.set_defaults(run=list_workflows)

    show = sub.add_parser("show", help="a workflow's status and every record with its time")
    add_dsn(show)
    show.add_argument("workflow", metavar="WORKFLOW")
    show.add_argument("--json", action="store_true", help="JSON for scripts")
    show.set_defaults(run=show_workflow)

    resume = sub.add_parser(
        "resume",
        help="make a parked, failed or cancelled workflow ready again on the code deployed now",
    )
    add_dsn(resume)
    resume.add_argument("workflow", metavar="WORKFLOW")
    resume.add_argument("--json", action="store_true", help="JSON for scripts")
    resume.set_defaults(run=resume_workflow)

    delete = sub.add_parser("delete", help="cancel a workflow's wakeups and discard its records")
    add_dsn(delete)
    delete.add_argument("workflow", metavar="WORKFLOW")
    delete.add_argument(
        "--kind",
        help="the kind whose wakeups to cancel (default: the kind its start recorded; "
        "needed for workflows not started through durably.App)",
    )
    delete.add_argument("--json", action="store_true", help="JSON for scripts")
    delete.set_defaults(run=delete_workflow)


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
            handle = await app.get_handle(args.workflow)
        except WorkflowNotFoundError:
            print(f"durably: no workflow {printable(repr(args.workflow))}", file=sys.stderr)
            return 1
        resumed = await handle.resume()
        status = (await handle.status()).status.value
    finally:
        await app.close()
    if args.json:
        emit_json({"workflow": args.workflow, "resumed": resumed, "status": status})
    elif resumed:
        print(f"resumed {printable(args.workflow)}: {status}, a worker will run it")
    else:
        print(
            f"durably: {printable(args.workflow)} is {status}: only a parked, failed or "
            "cancelled workflow can be resumed",
            file=sys.stderr,
        )
    return 0 if resumed else 1


async def list_workflows(args: argparse.Namespace) -> int:
    """Print one page of workflows in id order, each with its kind when its start recorded
    one; a workflow started but not yet run by a worker is listed as pending."""
    if not 1 <= args.limit <= 1000:
        raise UsageError("--limit must be between 1 and 1000")
    status = WorkflowStatus(args.status) if args.status else None
    async with opened(args) as stores:
        checkpointer = stores.checkpointer
        if status is None or status is WorkflowStatus.PENDING:
            rows = await _every_workflow(checkpointer, status, args.limit, args.after)
        else:
            infos = await checkpointer.list_status(
                status=status, limit=args.limit, after=args.after
            )
            rows = [(i.workflow, i) for i in infos]
        kinds = [recorded_kind(await checkpointer.load(workflow)) for workflow, _ in rows]
    listed = [
        {"workflow": workflow, "kind": kind, "status": info or _PENDING}
        for (workflow, info), kind in zip(rows, kinds, strict=True)
    ]
    if args.json:
        emit_json({"workflows": listed, "next_after": rows[-1][0] if rows else None})
        return 0
    if not rows:
        print("no workflows" + (f" with status {status.value}" if status else ""))
        return 0
    table_rows = [
        [workflow, kind, *(_cells(info) if info else ["pending (never run)", 0, None, None])]
        for (workflow, info), kind in zip(rows, kinds, strict=True)
    ]
    headers = ["workflow", "kind", "status", "attempts", "updated", "last error"]
    print(table(table_rows, headers, right=(3,)))
    if len(rows) == args.limit:
        print(f"(more may follow: --after {rows[-1][0]!r})")
    return 0


_PENDING = {"status": WorkflowStatus.PENDING.value, "attempts": 0}
"""How a workflow no worker ran yet reads in ``--json`` (stores keep no status for it)."""


def _cells(info: WorkflowInfo) -> list[object]:
    return [info.status, info.attempts, info.updated_at, info.last_error]


async def _every_workflow(
    checkpointer: Checkpointer[Any], status: WorkflowStatus | None, limit: int, after: str | None
) -> list[tuple[str, WorkflowInfo | None]]:
    """Workflows after ``after`` with their status (None: never run), all or (``status``
    pending) only those no worker ran yet or a resume reset, at most ``limit``."""
    found: list[tuple[str, WorkflowInfo | None]] = []
    while len(found) < limit:
        ids = await checkpointer.workflows(after=after, limit=limit)
        for workflow in ids:
            info = await checkpointer.get_status(workflow)
            if status is None or info is None or info.status is WorkflowStatus.PENDING:
                found.append((workflow, info))
                if len(found) == limit:
                    break
        if len(ids) < limit:
            break
        after = ids[-1]
    return found


def _short(value: object, width: int = 70) -> str:
    text = JsonCodec().encode(value) if not isinstance(value, str) else value
    return text if len(text) <= width else text[: width - 1] + "…"


async def show_workflow(args: argparse.Namespace) -> int:
    """Print a workflow's status and history; exit 1 if it has neither."""
    async with opened(args) as stores:
        info = await stores.checkpointer.get_status(args.workflow)
        history = await stores.checkpointer.history(args.workflow)
    if info is None and not history:
        print(f"durably: no workflow {args.workflow!r}", file=sys.stderr)
        return 1
    kind = recorded_kind({key: written.value for key, written in history.items()})
    if args.json:
        emit_json(
            {
                "workflow": args.workflow,
                "kind": kind,
                "status": info,
                "history": [{"key": k, "value": w.value, "at": w.at} for k, w in history.items()],
            }
        )
        return 0
    print(f"workflow  {printable(args.workflow)}")
    print(f"kind      {printable(kind) if kind else '- (not recorded: not started by an App)'}")
    if info is not None:
        print(f"status    {info.status.value} (attempts {info.attempts}, {cell(info.updated_at)})")
        if info.last_error:
            print(f"error     {printable(info.last_error)}")
    else:
        print("status    - (never run by a worker)")
    if history:
        print()
        rows = [[cell(w.at), key, _short(w.value)] for key, w in history.items()]
        print(table(rows, ["recorded", "key", "value"]))
    return 0


async def delete_workflow(args: argparse.Namespace) -> int:
    """Delete a workflow's records and cancel its wakeups in its kind's scheduler; exit 1
    if there is no such workflow."""
    async with opened(args) as stores:
        info = await stores.checkpointer.get_status(args.workflow)
        stored = await stores.checkpointer.load(args.workflow)
        if info is None and not stored:
            print(f"durably: no workflow {args.workflow!r}", file=sys.stderr)
            return 1
        recorded = recorded_kind(stored)
        if recorded is not None and args.kind is not None and args.kind != recorded:
            raise UsageError(
                f"workflow {args.workflow!r} is of kind {recorded!r}, not {args.kind!r}"
            )
        kind = args.kind or recorded
        if kind is None:
            raise UsageError(
                f"the kind of workflow {args.workflow!r} is not recorded (it was not started "
                "by durably.App): pass --kind, the kind its worker serves"
            )
        deleted = await stores.durable(kind).delete(args.workflow)
    if args.json:
        emit_json({"workflow": args.workflow, "kind": kind, "records_deleted": deleted})
    else:
        print(
            f"deleted workflow {args.workflow!r} of kind {kind!r}: "
            f"{deleted} record(s) discarded, its wakeups cancelled"
        )
    return 0
