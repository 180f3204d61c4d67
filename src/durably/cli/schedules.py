"""``durably schedules list``: the cron schedules a module registers, with their next tick.

A task's schedule enqueues on its queue; a workflow's starts its kind (WORKFLOW).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from durably.cli.render import emit_json, printable, table
from durably.cli.stores import UsageError
from durably.cli.worker import load_attribute
from durably.engine.schedules import Schedule


def register(commands: Any) -> None:
    """Add ``schedules list``."""
    group = commands.add_parser("schedules", help="list cron schedules")
    actions = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        help="the schedules MODULE:ATTR registers, with their next tick",
        description=(
            "List the cron schedules of MODULE:ATTR: a Schedule, a list of them, or an "
            "object with a `schedules` attribute (an App, a Worker). Schedules live in "
            "code, so nothing is read from a store."
        ),
    )
    listing.add_argument("target", metavar="MODULE:ATTR")
    listing.add_argument("--app-dir", help="import MODULE from this directory first")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(run=list_schedules)


def schedules_of(found: object, target: str) -> list[Schedule]:
    """The schedules ``found`` holds; `UsageError` for anything else."""
    if isinstance(found, Schedule):
        return [found]
    held = getattr(found, "schedules", found)
    if isinstance(held, Iterable) and not isinstance(held, str | bytes):
        listed = list(held)
        if all(isinstance(schedule, Schedule) for schedule in listed):
            return listed
    raise UsageError(f"{target!r} holds no cron schedules (a Schedule, a list, an App or a Worker)")


async def list_schedules(args: argparse.Namespace) -> int:
    """Print every schedule with its cron expression, time zone, queue and next tick."""
    schedules = schedules_of(load_attribute(args.target, args.app_dir), args.target)
    now = time.time()
    rows = []
    for schedule in schedules:
        upcoming = datetime.fromtimestamp(schedule.next_after(now), schedule.zone())
        rows.append(
            {
                "name": schedule.name,
                "cron": schedule.cron,
                "tz": schedule.tz,
                "queue": None if schedule.workflow is not None else schedule.queue,
                "workflow": schedule.workflow,
                "tenant": schedule.tenant,
                "next": upcoming.isoformat(),
            }
        )
    if args.json:
        emit_json(rows)
        return 0
    if not rows:
        print("no schedules")
        return 0
    headers = ["NAME", "CRON", "TZ", "QUEUE", "WORKFLOW", "TENANT", "NEXT"]
    cells = [
        [printable("-" if row[key.lower()] is None else str(row[key.lower()])) for key in headers]
        for row in rows
    ]
    print(table(cells, headers))
    return 0


__all__ = ["list_schedules", "register", "schedules_of"]
