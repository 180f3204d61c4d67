"""``durably sweep``: the retention sweep of finished workflows."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from durably.cli.render import Progress, emit_json
from durably.cli.stores import UsageError, add_dsn, opened

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
MAX_LIMIT = 100_000


def age(text: str) -> timedelta:
    """``30s``, ``15m``, ``12h``, ``7d`` or ``2w`` as a duration (zero allowed: sweep every
    finished workflow); `UsageError` otherwise."""
    match = _AGE.match(text)
    if match is None:
        raise UsageError(f"--older-than takes a number and a unit (s, m, h, d, w), got {text!r}")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def register(commands: Any) -> None:
    """Add ``sweep``."""
    sweep = commands.add_parser(
        "sweep",
        help="delete finished workflows (records, status, claim) older than a given age",
        description=(
            "Delete every record, the status and the claim of workflows that completed or "
            "failed more than --older-than ago and that no live pass holds, and cancel "
            "their wakeups. A workflow id reused later starts afresh; a pass that ran before "
            "the sweep can never write to it."
        ),
    )
    add_dsn(sweep)
    sweep.add_argument(
        "--older-than",
        required=True,
        metavar="AGE",
        help="how long ago a workflow must have finished: 30s, 15m, 12h, 7d, 2w",
    )
    sweep.add_argument(
        "--limit", type=int, default=1000, help="sweep at most this many (default 1000)"
    )
    sweep.add_argument(
        "--kind",
        action="append",
        metavar="KIND",
        help="the workflow kind(s) whose wakeups to cancel (repeatable; default: default)",
    )
    sweep.add_argument("--json", action="store_true", help="JSON for scripts")
    sweep.set_defaults(run=run_sweep)


async def run_sweep(args: argparse.Namespace) -> int:
    """Sweep, showing a running count on a terminal; print how many went."""
    older_than = age(args.older_than)
    if not 1 <= args.limit <= MAX_LIMIT:
        raise UsageError(f"--limit must be between 1 and {MAX_LIMIT}")
    kinds = args.kind or ["default"]
    cutoff = datetime.now(UTC) - older_than
    async with opened(args) as stores:
        schedulers = [stores.durable(kind).scheduler for kind in kinds]
        progress = Progress("swept")
        swept_ids: list[str] = []

        async def swept(workflow: str) -> None:
            for scheduler in schedulers:
                await scheduler.cancel(workflow)
            swept_ids.append(workflow)
            progress.advance()

        count = await stores.checkpointer.sweep(
            finished_before=cutoff, limit=args.limit, on_swept=swept
        )
        progress.finish()
    if args.json:
        emit_json(
            {
                "swept": count,
                "workflows": swept_ids,
                "finished_before": cutoff,
                "limit": args.limit,
                "more_may_remain": count == args.limit,
            }
        )
        return 0
    print(f"swept {count} finished workflow(s) last updated before {cutoff:%Y-%m-%d %H:%M:%S}Z")
    if count == args.limit:
        print(f"(the limit was reached: run again to sweep more than {args.limit})")
    return 0


__all__ = ["age", "register", "run_sweep"]
