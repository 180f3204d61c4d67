"""``durably tasks enqueue MODULE:TASK --args JSON``: queue a run of a registered task."""

from __future__ import annotations

import argparse
import json
from typing import Any

from durably.cli.render import emit_json
from durably.cli.stores import UsageError, add_dsn, dsn_from
from durably.cli.worker import load_attribute


def register(commands: Any) -> None:
    """Add the ``tasks`` command group."""
    group = commands.add_parser("tasks", help="queue runs of the tasks an App registers")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    enqueue = sub.add_parser(
        "enqueue",
        help="queue one run of MODULE:TASK (a function decorated with @app.task)",
        description="Queue one run of the task MODULE:TASK names, on its App's store "
        "(or --dsn), with the arguments --args gives as JSON.",
    )
    enqueue.add_argument("target", metavar="MODULE:TASK", help="the task, e.g. myapp.jobs:send")
    enqueue.add_argument(
        "--args",
        default="[]",
        help='the arguments as JSON: an array (positional) or an object (by name); default "[]"',
    )
    enqueue.add_argument("--tenant", help="the item's tenant (default: the App's)")
    enqueue.add_argument("--delay", type=float, help="seconds before it may run")
    enqueue.add_argument("--dedupe-key", help="a live item with this key is answered instead")
    enqueue.add_argument("--app-dir", help="import MODULE from DIR, searched first")
    add_dsn(enqueue)
    enqueue.add_argument("--json", action="store_true", help="JSON for scripts")
    enqueue.set_defaults(run=enqueue_task)


async def enqueue_task(args: argparse.Namespace) -> int:
    """Queue one run of the task and print its item's id."""
    try:
        given = json.loads(args.args)
    except ValueError as exc:
        raise UsageError(f"--args is not JSON: {exc}") from None
    if isinstance(given, list):
        positional, keywords = given, {}
    elif isinstance(given, dict):
        positional, keywords = [], given
    else:
        raise UsageError("--args must be a JSON array (positional) or object (by name)")
    from durably.app import Task

    task = load_attribute(args.target, args.app_dir)
    if not isinstance(task, Task):
        raise UsageError(f"{args.target!r} is not a task (a function decorated with @app.task)")
    if args.dsn is not None:
        task.retarget(dsn_from(args.dsn))
    try:
        item = await task.enqueue(
            *positional,
            delay=args.delay,
            tenant=args.tenant,
            dedupe_key=args.dedupe_key,
            **keywords,
        )
    finally:
        await task.close()
    if args.json:
        emit_json({"item": item})
    else:
        print(f"queued {item.id} on queue {item.queue!r} (tenant {item.tenant!r})")
    return 0
