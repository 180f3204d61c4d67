"""``durably queue list``, ``stats``, ``purge``, ``dead-letters`` and ``requeue``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from durably.cli.render import Progress, emit_json, table, when
from durably.cli.stores import UsageError, add_dsn, opened
from durably.errors import InvalidInputError
from durably.stores.work import (
    DEAD_LETTERS_MOST,
    DEFAULT_QUEUE,
    QUEUE_NAMES_MOST,
    WorkItem,
    WorkQueue,
    requeued,
)
from durably.validation import identifier

MAX_LISTED = DEAD_LETTERS_MOST
"""The most dead letters one command reads (``queue dead-letters --limit``, ``requeue``)."""


def register(commands: Any) -> None:
    """Add the ``queue`` command group."""
    group = commands.add_parser("queue", help="work queue stats, dead letters and requeue")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    listed = sub.add_parser(
        "list", help="every queue with its depth, running and dead items, and oldest age"
    )
    add_dsn(listed)
    listed.add_argument("--json", action="store_true", help="JSON for scripts")
    listed.set_defaults(run=list_queues)

    stats = sub.add_parser("stats", help="depth, claimed, dead-lettered, oldest age, counters")
    add_dsn(stats)
    stats.add_argument("--queue", action="append", help="queue name (repeatable; default: default)")
    stats.add_argument("--json", action="store_true", help="JSON for scripts")
    stats.set_defaults(run=show_stats)

    purge = sub.add_parser(
        "purge",
        help="delete the queued items of a queue (running items and dead letters stay)",
    )
    add_dsn(purge)
    purge.add_argument("queue", metavar="QUEUE", help="the queue to purge")
    purge.add_argument("--tenant", help="only this tenant's items (default: every tenant's)")
    purge.add_argument(
        "--dead-letters",
        action="store_true",
        help="delete the queue's dead letters instead (queued and running items stay)",
    )
    purge.add_argument("--item", help="with --dead-letters and --tenant: only this dead letter")
    purge.add_argument("--json", action="store_true", help="JSON for scripts")
    purge.set_defaults(run=purge_queue)

    dead = sub.add_parser(
        "dead-letters", help="dead-lettered items, oldest first (every tenant's by default)"
    )
    add_dsn(dead)
    dead.add_argument("--tenant", help="only this tenant's (default: every tenant)")
    dead.add_argument("--queue", help="only this queue (default: every queue)")
    dead.add_argument("--limit", type=int, default=50)
    dead.add_argument("--json", action="store_true", help="JSON for scripts")
    dead.set_defaults(run=show_dead_letters)

    requeue = sub.add_parser(
        "requeue", help="queue dead-lettered items again (attempts reset, failures kept)"
    )
    add_dsn(requeue)
    requeue.add_argument("--tenant", required=True)
    requeue.add_argument("item_ids", nargs="*", metavar="ITEM_ID", help="items to requeue")
    requeue.add_argument("--all", action="store_true", help="every dead letter of the tenant")
    requeue.add_argument("--queue", help="with --all: only this queue")
    requeue.add_argument("--json", action="store_true", help="JSON for scripts")
    requeue.set_defaults(run=requeue_items)


async def list_queues(args: argparse.Namespace) -> int:
    """Print every queue the store knows (up to `QUEUE_NAMES_MOST`): its depth, running
    (claimed) and dead-lettered items, and the age of its oldest due item (``-`` when
    nothing is queued)."""
    async with opened(args) as stores:
        names = await stores.queue.queue_names()
        snapshots = {name: await stores.queue.stats(queue=name) for name in names}
    if args.json:
        emit_json({"queues": snapshots})
        return 0
    if not snapshots:
        print("no queues")
        return 0
    rows = [
        [
            name,
            s.depth,
            s.claimed,
            s.dead_lettered,
            f"{s.oldest_age_seconds:.1f}s" if s.depth else "-",
        ]
        for name, s in snapshots.items()
    ]
    print(table(rows, ["queue", "depth", "running", "dead", "oldest"], right=(1, 2, 3, 4)))
    if len(names) == QUEUE_NAMES_MOST:
        print(f"(the first {QUEUE_NAMES_MOST:,} queues by name)")
    return 0


async def purge_queue(args: argparse.Namespace) -> int:
    """Delete the queued items of one queue (one tenant's, or every tenant's), or with
    ``--dead-letters`` its dead letters (one tenant's, or the one ``--item``)."""
    if args.item is not None and not (args.dead_letters and args.tenant):
        raise UsageError("--item: only with --dead-letters and --tenant")
    for value, name in ((args.queue, "QUEUE"), (args.tenant, "--tenant"), (args.item, "--item")):
        if value is not None:
            try:
                identifier(value, name)
            except InvalidInputError as exc:
                raise UsageError(str(exc)) from None
    async with opened(args) as stores:
        if args.dead_letters:
            deleted = await stores.queue.purge_dead_letters(
                queue=args.queue, tenant=args.tenant, item_id=args.item
            )
        else:
            deleted = await stores.queue.purge(queue=args.queue, tenant=args.tenant)
    what = "dead letter(s)" if args.dead_letters else "queued item(s)"
    if args.json:
        emit_json({"queue": args.queue, "purged": deleted})
    else:
        print(f"purged {deleted} {what} of queue {args.queue!r}")
    return 0


async def show_stats(args: argparse.Namespace) -> int:
    """Print a snapshot of each queue asked for."""
    names = args.queue or [DEFAULT_QUEUE]
    async with opened(args) as stores:
        snapshots = {name: await stores.queue.stats(queue=name) for name in names}
    if args.json:
        emit_json(snapshots)
        return 0
    rows = [
        [
            name,
            s.depth,
            s.claimed,
            s.dead_lettered,
            f"{s.oldest_age_seconds:.1f}s",
            s.reaped,
            s.duplicates_suppressed,
        ]
        for name, s in snapshots.items()
    ]
    headers = ["queue", "depth", "claimed", "dead", "oldest", "reaped", "duplicates"]
    print(table(rows, headers, right=(1, 2, 3, 4, 5, 6)))
    return 0


async def show_dead_letters(args: argparse.Namespace) -> int:
    """Print dead letters (one tenant's, or every tenant's) with their last error."""
    if not 1 <= args.limit <= MAX_LISTED:
        raise UsageError(f"--limit must be between 1 and {MAX_LISTED}")
    async with opened(args) as stores:
        items = await stores.queue.dead_letters(
            tenant=args.tenant, limit=args.limit, queue=args.queue
        )
    if args.json:
        emit_json({"dead_letters": items})
        return 0
    if not items:
        print(
            "no dead letters" + (f" for tenant {args.tenant!r}" if args.tenant is not None else "")
        )
        return 0
    rows = [
        [i.tenant, i.id, i.queue, i.attempts, when(i.enqueued_at), (i.failures or ("-",))[-1][:60]]
        for i in items
    ]
    headers = ["tenant", "item", "queue", "attempts", "enqueued", "last error"]
    print(table(rows, headers, right=(3,)))
    if len(items) == args.limit:
        print(f"(more may follow: --limit above {args.limit})")
    return 0


async def _dead_letters(queue: WorkQueue, tenant: str, name: str | None) -> list[WorkItem]:
    return await queue.dead_letters(tenant=tenant, limit=MAX_LISTED, queue=name)


async def requeue_items(args: argparse.Namespace) -> int:
    """Requeue named dead letters (or ``--all``); exit 1 if one named is not dead-lettered."""
    if bool(args.item_ids) == bool(args.all):
        raise UsageError("name ITEM_IDs or pass --all (not both)")
    for item_id in args.item_ids:  # before the store is opened, as every usage error
        try:
            identifier(item_id, "ITEM_ID")
        except InvalidInputError as exc:
            raise UsageError(str(exc)) from None
    done: list[WorkItem] = []
    # A live item holding the dead letter's dedupe key is returned instead (a
    # duplicate): that dead letter was not requeued and stays dead.
    duplicates: dict[str, str] = {}
    wanted = set(args.item_ids)
    seen: set[str] = set()
    async with opened(args) as stores:
        progress = Progress("requeued", None if args.all else len(wanted))
        # A read sees at most MAX_LISTED dead letters, oldest first. Those it requeues
        # leave the dead letter, so the next read reaches further; a read that brings
        # nothing not seen before ends it.
        while True:
            dead = await _dead_letters(stores.queue, args.tenant, args.queue if args.all else None)
            fresh = [item for item in dead if item.id not in seen]
            seen.update(item.id for item in fresh)
            chosen = fresh if args.all else [item for item in fresh if item.id in wanted]
            for item in chosen:
                queued = await stores.queue.enqueue(requeued(item))
                if queued.id == item.id:
                    done.append(queued)
                else:
                    duplicates[item.id] = queued.id
                progress.advance()
            if len(dead) < MAX_LISTED or not fresh or not (args.all or wanted - seen):
                break
        progress.finish()
    missing = [i for i in args.item_ids if i not in seen]
    # A full read that ended the loop may have stopped short of a named item.
    where = f"a dead letter of {args.tenant!r}"
    if len(dead) == MAX_LISTED:
        where = f"among the oldest {MAX_LISTED:,} dead letters of {args.tenant!r}"
    if args.json:
        emit_json(
            {
                "requeued": [i.id for i in done],
                "not_dead_lettered": missing,
                "duplicates": duplicates,
            }
        )
    else:
        print(f"requeued {len(done)} item(s) of tenant {args.tenant!r}")
    for item_id in missing:
        print(f"durably: {item_id!r} is not {where}", file=sys.stderr)
    for item_id, live in duplicates.items():
        print(
            f"durably: {item_id!r} not requeued: live item {live!r} holds its dedupe key",
            file=sys.stderr,
        )
    return 1 if missing or duplicates else 0
