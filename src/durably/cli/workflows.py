"""``durably workflows list``, ``show`` (with history) and ``delete``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from durably.cli.render import cell, emit_json, printable, table
from durably.cli.stores import UsageError, add_dsn, opened
from durably.codec import JsonCodec
from durably.status import WorkflowStatus


def register(commands: Any) -> None:
    """Add the ``workflows`` command group."""
    group = commands.add_parser("workflows", help="list, show and delete workflows")
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

    delete = sub.add_parser("delete", help="cancel a workflow's wakeups and discard its records")
    add_dsn(delete)
    delete.add_argument("workflow", metavar="WORKFLOW")
    delete.add_argument(
        "--kind", default="default", help="the workflow kind its worker serves (default: default)"
    )
    delete.add_argument("--json", action="store_true", help="JSON for scripts")
    delete.set_defaults(run=delete_workflow)


async def list_workflows(args: argparse.Namespace) -> int:
    """Print one page of statuses."""
    if not 1 <= args.limit <= 1000:
        raise UsageError("--limit must be between 1 and 1000")
    status = WorkflowStatus(args.status) if args.status else None
    async with opened(args) as stores:
        infos = await stores.checkpointer.list_status(
            status=status, limit=args.limit, after=args.after
        )
    if args.json:
        emit_json({"workflows": infos, "next_after": infos[-1].workflow if infos else None})
        return 0
    if not infos:
        print("no workflows" + (f" with status {status.value}" if status else ""))
        return 0
    rows = [[i.workflow, i.status, i.attempts, i.updated_at, i.last_error] for i in infos]
    print(table(rows, ["workflow", "status", "attempts", "updated", "last error"], right=(2,)))
    if len(infos) == args.limit:
        print(f"(more may follow: --after {infos[-1].workflow!r})")
    return 0


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
    if args.json:
        emit_json(
            {
                "workflow": args.workflow,
                "status": info,
                "history": [{"key": k, "value": w.value, "at": w.at} for k, w in history.items()],
            }
        )
        return 0
    print(f"workflow  {args.workflow}")
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
    """Delete a workflow's records and wakeups."""
    async with opened(args) as stores:
        deleted = await stores.durable(args.kind).delete(args.workflow)
    if args.json:
        emit_json({"workflow": args.workflow, "records_deleted": deleted})
    else:
        print(f"deleted workflow {args.workflow!r}: {deleted} record(s) discarded")
    return 0
