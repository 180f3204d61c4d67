"""``durably sweep``: the retention sweep of finished workflows."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from durably.app.storage import recorded_kind, records_of
from durably.cli.render import Progress, emit_json
from durably.cli.stores import UsageError, add_dsn, opened
from durably.errors import InvalidInputError
from durably.stores.retention import FINISHED
from durably.stores.workflows import Checkpointer
from durably.validation import identifier

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
MAX_LIMIT = 100_000
MAX_AGE_SECONDS = 36525 * 86400.0
"""The oldest ``--older-than`` taken (100 years, an App's longest retention)."""
_PAGE = 1000


def age(text: str) -> timedelta:
    """``30s``, ``15m``, ``12h``, ``7d`` or ``2w`` as a duration (zero allowed: sweep every
    finished workflow); `UsageError` otherwise."""
    match = _AGE.match(text)
    if match is None:
        raise UsageError(f"--older-than takes a number and a unit (s, m, h, d, w), got {text!r}")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds > MAX_AGE_SECONDS:
        raise UsageError("--older-than must be at most 100 years (36525d)")
    return timedelta(seconds=seconds)


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
        help=(
            "the workflow kind(s) whose wakeups to cancel for workflows whose start recorded "
            "no kind (repeatable; default: default); an App workflow's own kind is read"
        ),
    )
    sweep.add_argument("--json", action="store_true", help="JSON for scripts")
    sweep.set_defaults(run=run_sweep)


async def run_sweep(args: argparse.Namespace) -> int:
    """Sweep, showing a running count on a terminal; print how many went."""
    older_than = age(args.older_than)
    if not 1 <= args.limit <= MAX_LIMIT:
        raise UsageError(f"--limit must be between 1 and {MAX_LIMIT}")
    kinds = args.kind or ["default"]
    for kind in kinds:  # checked before anything is swept: a bad one would stop it midway
        try:
            identifier(kind, "--kind")
        except InvalidInputError as exc:
            raise UsageError(str(exc)) from None
    cutoff = datetime.now(UTC) - older_than
    async with opened(args) as stores:
        recorded = await _recorded_kinds(stores.checkpointer, cutoff, args.limit)
        # A workflow swept that was not read beforehand (one finished in between) has its
        # wakeups cancelled in every kind named or seen.
        unread = sorted({*kinds, *recorded.values()})
        progress = Progress("swept")
        swept_ids: list[str] = []

        async def swept(workflow: str) -> None:
            kind = recorded.get(workflow)
            for name in [kind] if kind is not None else unread:
                await stores.durable(name).scheduler.cancel(workflow)
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


async def _recorded_kinds(
    checkpointer: Checkpointer[Any], cutoff: datetime, limit: int
) -> dict[str, str]:
    """The kind each sweepable workflow's start recorded (None-recording ones left out),
    for the ``limit`` oldest: read before the sweep discards the start record."""
    eligible: list[tuple[datetime, str]] = []
    for status in FINISHED:
        after: str | None = None
        while True:
            page = await checkpointer.list_status(status=status, limit=_PAGE, after=after)
            eligible.extend((i.updated_at, i.workflow) for i in page if i.updated_at < cutoff)
            if len(page) < _PAGE:
                break
            after = page[-1].workflow
    kinds: dict[str, str] = {}
    for _, workflow in sorted(eligible)[:limit]:
        stored, _ = await records_of(checkpointer, workflow)  # around unreadable records
        kind = recorded_kind(stored)
        if kind is not None:
            kinds[workflow] = kind
    return kinds


__all__ = ["age", "register", "run_sweep"]
