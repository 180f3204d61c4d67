"""``durably runs list`` and ``durably runs show``: agent run records of one tenant."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from durably.cli.render import Progress, dollars, emit_json, table, when
from durably.cli.stores import UsageError, add_dsn, opened
from durably.stores.opening import Stores
from durably.stores.runs import (
    FOLLOWS,
    RunRecord,
    RunState,
    StateKey,
    StateQuery,
    StateStore,
    run_state,
)
from durably.stores.totals import TOTALS_PAGE


def register(commands: Any) -> None:
    """Add the ``runs`` command group."""
    group = commands.add_parser("runs", help="list and show agent run records")
    sub = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = sub.add_parser(
        "list", help="runs in creation order, tenant by tenant (every tenant's by default)"
    )
    add_dsn(listing)
    listing.add_argument("--tenant", help="only this tenant's runs (default: every tenant)")
    listing.add_argument("--state", choices=[s.value for s in RunState], help="only this state")
    listing.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    listing.add_argument("--all", action="store_true", help="every run, page after page")
    listing.add_argument("--json", action="store_true", help="JSON for scripts")
    listing.set_defaults(run=list_runs)

    show = sub.add_parser("show", help="one run record in full")
    add_dsn(show)
    show.add_argument("--tenant", required=True)
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--json", action="store_true", help="JSON for scripts")
    show.set_defaults(run=show_run)


def _row(record: RunRecord) -> list[object]:
    return [
        record.tenant,
        record.run_id,
        record.agent_name,
        record.state,
        record.usage.total_tokens,
        dollars(record.cost_micros),
        record.iterations,
        record.version,
        when(record.updated_at),
    ]


HEADERS = ["tenant", "run", "agent", "state", "tokens", "cost", "iterations", "version", "updated"]


async def list_runs(args: argparse.Namespace) -> int:
    """Print runs: one tenant's or every tenant's (tenant by tenant, each in creation
    order); one page of ``--limit`` rows, or every run with ``--all``; then the totals of
    every stored run of each tenant shown, as the store keeps them. An App workflow's run
    shows its workflow's state, which ``--state`` filters on (a page may then hold fewer
    rows)."""
    if args.limit < 1 or args.limit > 1000:
        raise UsageError("--limit must be between 1 and 1000")
    state = RunState(args.state) if args.state else None
    records: list[RunRecord] = []
    more = False
    cursor: str | None = None
    async with opened(args) as stores:
        one = args.tenant is not None
        tenants = [args.tenant] if one else await _every_tenant(stores.state)
        progress = Progress("runs read") if args.all else None
        for tenant in tenants:
            cursor = None
            while not more:
                room = args.limit if args.all else args.limit - len(records)
                if room <= 0:  # the page is full and runs of another tenant may follow
                    more = True
                    break
                page = await stores.state.list_runs(
                    StateQuery(tenant=tenant, limit=room, cursor=cursor)
                )
                records.extend(page.records)
                if progress is not None:
                    progress.set(len(records))
                cursor = page.cursor
                if cursor is None:
                    break
                more = not args.all
            if more:
                break
        if progress is not None:
            progress.finish()
        records = [await _followed(stores, record) for record in records]
        totals = await _totals(stores.state, sorted({record.tenant for record in records}))
    if state is not None:  # a run whose workflow moved on since its record was written
        records = [record for record in records if record.state is state]
    if args.json:
        shown = [record.scrubbed() for record in records]  # secrets stay out of exports
        emit_json({"runs": shown, "cursor": cursor if more and one else None, "more": more})
        return 0
    if not records:
        print("no runs" + (f" for tenant {args.tenant!r}" if one else ""))
        return 0
    print(table([_row(r) for r in records], HEADERS, right=(4, 5, 6, 7)))
    print()
    print(table(totals, TOTAL_HEADERS, right=(1, 2, 3, 4, 5)))
    if more:
        print(f"(more runs may follow: pass --all, or --limit above {args.limit})")
    return 0


TOTAL_HEADERS = ["tenant", "runs", "input tokens", "output tokens", "tokens", "cost"]


async def _totals(state: StateStore, tenants: list[str]) -> list[list[object]]:
    """One row per tenant of ``tenants`` with runs: how many runs it has, their tokens and
    their cost (the totals the store keeps, a page of tenants per read)."""
    rows: list[list[object]] = []
    for start in range(0, len(tenants), TOTALS_PAGE):
        for found in await state.tenant_totals(
            tenants[start : start + TOTALS_PAGE], limit=TOTALS_PAGE
        ):
            usage = found.usage
            rows.append(
                [
                    found.tenant,
                    found.runs,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.total_tokens,
                    dollars(found.cost_micros),
                ]
            )
    return rows


async def _followed(stores: Stores, record: RunRecord) -> RunRecord:
    """``record`` with the state of the workflow it follows (an App workflow's run), read
    from that workflow's status; any other record as stored."""
    workflow = record.metadata.get(FOLLOWS)
    if not isinstance(workflow, str):
        return record
    info = await stores.checkpointer.get_status(workflow)
    return record.model_copy(update={"state": run_state(None if info is None else info.status)})


async def _every_tenant(state: StateStore) -> list[str]:
    tenants: list[str] = []
    while page := await state.tenants(after=tenants[-1] if tenants else None, limit=1000):
        tenants.extend(page)
        if len(page) < 1000:
            break
    return tenants


async def show_run(args: argparse.Namespace) -> int:
    """Print one run record; exit 1 if there is none."""
    async with opened(args) as stores:
        record = await stores.state.get_run(StateKey(tenant=args.tenant, id=args.run_id))
        if record is not None:
            record = await _followed(stores, record)
    if record is None:
        print(f"durably: no run {args.run_id!r} for tenant {args.tenant!r}", file=sys.stderr)
        return 1
    record = record.scrubbed()  # what a display shows: secrets masked
    if args.json:
        emit_json(record)
        return 0
    usage = record.usage
    fields: list[list[object]] = [
        ["run", record.run_id],
        ["tenant", record.tenant],
        ["agent", record.agent_name],
        ["session", record.session_id],
        ["state", record.state],
        ["version", record.version],
        ["updated", when(record.updated_at)],
        ["iterations", record.iterations],
        ["message cursor", record.message_cursor],
        ["input tokens", usage.input_tokens],
        ["output tokens", usage.output_tokens],
        ["cached tokens", usage.cached_tokens],
        ["cache write tokens", usage.cache_write_tokens],
        ["reasoning tokens", usage.reasoning_tokens],
        ["requests", usage.requests],
        ["tool calls", usage.tool_calls],
        ["cost", dollars(record.cost_micros)],
        ["awaiting approval", record.awaiting_approval],
        ["pending tool calls", ", ".join(c.name for c in record.pending_tool_calls) or None],
    ]
    fields.extend([f"metadata.{k}", v] for k, v in sorted(record.metadata.items()))
    fields.extend(["masked", path] for path in record.masked_paths)
    print(table(fields, ["field", "value"]))
    return 0
