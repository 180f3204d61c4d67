"""``durably workflows`` commands that operate workflows through the App's operations API:
``list`` (newest first, by filter), ``start``, ``send``, ``result``, ``cancel``,
``resume`` by filter, ``fork`` and ``catalog``.

Commands that name one workflow act in ``--tenant`` (the default tenant without it).
Listing shows every tenant unless ``--tenant`` names one; bulk ``cancel`` and ``resume``
need ``--tenant T`` or ``--all-tenants`` (crossing tenants is always asked for) and ask
for confirmation unless ``--yes``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from durably.app.storage import DEFAULT_TENANT, catalogue_earlier
from durably.cli.render import emit_json, printable, table
from durably.cli.stores import UsageError, dsn_from, opened
from durably.errors import (
    InvalidInputError,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowNotFoundError,
)
from durably.stores.status import WorkflowInfo

BULK_PAGE = 200
"""How many workflows one bulk call looks at (the CLI calls until none are left)."""


def add_filters(parser: argparse.ArgumentParser, *, tenant_help: str) -> None:
    """Add the filter options listing and bulk commands share."""
    parser.add_argument("--kind", help="only workflows of this kind")
    parser.add_argument("--status", help="only workflows in this status")
    parser.add_argument("--tenant", help=tenant_help)
    parser.add_argument(
        "--all-tenants", action="store_true", help="every tenant's workflows (say it explicitly)"
    )
    parser.add_argument("--since", help="only workflows created at or after this UTC time (ISO)")
    parser.add_argument("--until", help="only workflows created before this UTC time (ISO)")
    parser.add_argument("--parent", help="only the children of this workflow id (of --tenant)")


def _moment(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option} must be an ISO 8601 time, got {text!r}") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    if args.tenant is not None and args.all_tenants:
        raise UsageError("--tenant and --all-tenants exclude each other")
    return {
        "kind": args.kind,
        "status": args.status,
        "tenant": args.tenant,
        "created_after": _moment(args.since, "--since"),
        "created_before": _moment(args.until, "--until"),
        "parent": args.parent,
    }


@contextlib.asynccontextmanager
async def _app(args: argparse.Namespace) -> AsyncIterator[Any]:
    """An App over ``--dsn`` (the store must exist: a missing SQLite file is refused)."""
    from durably.app import App

    async with opened(args):
        pass
    app = App(dsn_from(args.dsn), migrate=False)
    try:
        yield app
    finally:
        await app.close()


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _rows(infos: list[WorkflowInfo]) -> list[list[object]]:
    return [
        [
            _when(info.created),
            info.tenant,
            info.workflow,
            info.kind,
            info.status,
            info.attempts,
            _when(info.updated_at),
            info.last_error,
        ]
        for info in infos
    ]


_HEADERS = ["created", "tenant", "workflow", "kind", "status", "attempts", "updated", "last error"]


async def list_newest(args: argparse.Namespace) -> int:
    """Print one page of workflows, newest first, by the filter the options give."""
    filters = _filters(args)
    async with _app(args) as app:
        try:
            page = await app.list_workflows(**filters, limit=args.limit, after=args.after)
        except InvalidInputError as exc:
            raise UsageError(str(exc)) from None
    if args.json:
        emit_json({"workflows": page.workflows, "next_after": page.next_after})
        return 0
    if page.workflows:
        print(table(_rows(page.workflows), _HEADERS, right=(5,)))
    else:
        print("no workflows" + (" on this page" if page.next_after else ""))
    if page.next_after is not None:
        print(f"(more may follow: --after {page.next_after})")
    return 0


async def start_workflow(args: argparse.Namespace) -> int:
    """Start workflow ``module:workflow`` with ``--args`` (a JSON list or object)."""
    workflow, app = _workflow_of(args.target, args.app_dir)
    try:
        given = json.loads(args.args)
    except ValueError as exc:
        raise UsageError(f"--args must be JSON: {exc}") from None
    positional, named = (given, {}) if isinstance(given, list) else ([], given)
    if not isinstance(named, dict):
        raise UsageError("--args must be a JSON list (positional) or object (by name)")
    if args.dsn:
        app.dsn = dsn_from(args.dsn)
    try:
        handle = await workflow.start(*positional, id=args.id, tenant=args.tenant, **named)
    finally:
        await app.close()
    if args.json:
        emit_json({"tenant": handle.tenant, "workflow": handle.id, "created": handle.created})
    else:
        print(f"{'started' if handle.created else 'exists already'}: {printable(handle.id)}")
    return 0


def _workflow_of(target: str, app_dir: str | None) -> tuple[Any, Any]:
    """The workflow ``module:workflow`` names and the App that registers it."""
    from durably.app import App, Workflow
    from durably.cli.worker import import_target

    found, module = import_target(target, app_dir)
    if not isinstance(found, Workflow):
        raise UsageError(f"{target!r} is not a workflow (@app.workflow)")
    for value in vars(module).values():
        if isinstance(value, App) and value.workflows.get(found.kind) is found:
            return found, value
    raise UsageError(f"no durably.App in the module of {target!r} registers it")


async def send_message(args: argparse.Namespace) -> int:
    """Send JSON ``value`` on ``topic`` to a workflow."""
    from durably.app import Topic

    try:
        value = json.loads(args.value)
    except ValueError as exc:
        raise UsageError(f"VALUE must be JSON: {exc}") from None
    async with _app(args) as app:
        handle = await _handle(app, args)
        if handle is None:
            return 1
        await handle.send(Topic(args.topic, Any), value)
    print(f"sent to {printable(args.workflow)} on {printable(args.topic)}")
    return 0


async def _handle(app: Any, args: argparse.Namespace) -> Any:
    try:
        return await app.get_handle(args.workflow, tenant=args.tenant)
    except WorkflowNotFoundError:
        print(f"durably: no workflow {printable(repr(args.workflow))}", file=sys.stderr)
        return None


async def workflow_result(args: argparse.Namespace) -> int:
    """Print a workflow's result; exit 1 when it failed, was cancelled or is not there."""
    async with _app(args) as app:
        handle = await _handle(app, args)
        if handle is None:
            return 1
        try:
            value = await handle.result(timeout=args.timeout)
        except WorkflowFailedError as exc:
            failed = {"error": exc.error, "type": exc.type, "message": exc.message}
            emit_json({"failed": {**failed, "step": exc.step}})
            return 1
        except WorkflowCancelledError:
            emit_json({"cancelled": True})
            return 1
        except TimeoutError:
            print("durably: the workflow has not ended yet", file=sys.stderr)
            return 1
    emit_json({"result": value})
    return 0


async def cancel_workflows(args: argparse.Namespace) -> int:
    """Cancel one workflow (``ID``) or every workflow the filter selects."""
    return await _one_or_many(args, "cancel")


async def resume_workflows(args: argparse.Namespace) -> int:
    """Resume every parked, failed or cancelled workflow the filter selects."""
    return await _one_or_many(args, "resume")


async def _one_or_many(args: argparse.Namespace, action: str) -> int:
    filtered = any(
        getattr(args, name) is not None for name in ("kind", "status", "since", "until", "parent")
    )
    if args.workflow is not None:
        if filtered or args.all_tenants:
            raise UsageError(f"give a WORKFLOW or a filter to {action}, not both")
        return await _one(args, action)
    if not filtered and not args.all_tenants and args.tenant is None:
        raise UsageError("name a WORKFLOW, or a filter with --tenant T or --all-tenants")
    if args.tenant is None and not args.all_tenants:
        raise UsageError(f"a bulk {action} needs --tenant T or --all-tenants")
    filters = _filters(args)
    if not args.yes and not _confirmed(action, filters):
        print("nothing done", file=sys.stderr)
        return 1
    changed: list[WorkflowInfo] = []
    async with _app(args) as app:
        bulk = app.cancel_workflows if action == "cancel" else app.resume_workflows
        after = None
        while True:
            try:
                result = await bulk(**filters, limit=BULK_PAGE, after=after)
            except InvalidInputError as exc:
                raise UsageError(str(exc)) from None
            changed += result.changed
            after = result.next_after
            if after is None:
                break
    done = "cancelled" if action == "cancel" else "resumed"
    if args.json:
        emit_json({done: [{"tenant": i.tenant, "workflow": i.workflow} for i in changed]})
    else:
        print(f"{done} {len(changed)} workflow(s)")
    return 0


def _confirmed(action: str, filters: dict[str, Any]) -> bool:
    said = ", ".join(f"{k}={v}" for k, v in filters.items() if v is not None) or "every tenant"
    print(f"{action} every workflow with {said}? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


async def _one(args: argparse.Namespace, action: str) -> int:
    args.tenant = args.tenant if args.tenant is not None else DEFAULT_TENANT
    async with _app(args) as app:
        handle = await _handle(app, args)
        if handle is None:
            return 1
        changed = await (handle.cancel() if action == "cancel" else handle.resume())
        status = (await handle.status()).status
    done = "cancelled" if action == "cancel" else "resumed"
    if args.json:
        emit_json({"workflow": args.workflow, "tenant": args.tenant, done: changed})
    elif changed:
        print(f"{done} {printable(repr(args.workflow))}: {status.value}")
    else:
        print(
            f"durably: {printable(repr(args.workflow))} is {status.value}: unchanged",
            file=sys.stderr,
        )
    return 0 if changed else 1


async def fork_workflow(args: argparse.Namespace) -> int:
    """Fork a workflow from a step (`WorkflowHandle.fork`)."""
    async with _app(args) as app:
        handle = await _handle(app, args)
        if handle is None:
            return 1
        try:
            fork = await handle.fork(args.from_step, id=args.id)
        except InvalidInputError as exc:
            raise UsageError(str(exc)) from None
    if args.json:
        emit_json({"tenant": fork.tenant, "workflow": fork.id, "forked_from": args.workflow})
    else:
        print(f"forked {printable(repr(args.workflow))} as {printable(repr(fork.id))}")
    return 0


async def catalog_workflows(args: argparse.Namespace) -> int:
    """Enter every workflow an App started before the store kept a catalog into it."""
    async with opened(args) as stores:
        entered = await catalogue_earlier(stores.checkpointer)
    if args.json:
        emit_json({"catalogued": entered})
    else:
        print(f"catalogued {entered} workflow(s)")
    return 0


def register(sub: Any, add_dsn: Any) -> None:
    """Add the operating commands to the ``workflows`` group ``sub``."""
    start = sub.add_parser("start", help="start a workflow (MODULE:WORKFLOW) with JSON arguments")
    add_dsn(start)
    start.add_argument("target", metavar="MODULE:WORKFLOW")
    start.add_argument("--args", default="[]", help="a JSON list (positional) or object")
    start.add_argument("--id", help="the workflow's id (default: a fresh one)")
    start.add_argument("--tenant", help="its tenant (default: the App's)")
    start.add_argument("--app-dir", help="where to import MODULE from (searched first)")
    start.add_argument("--json", action="store_true", help="JSON for scripts")
    start.set_defaults(run=start_workflow)

    send = sub.add_parser("send", help="send a JSON message on a topic to a workflow")
    add_dsn(send)
    _single(send)
    send.add_argument("topic", metavar="TOPIC")
    send.add_argument("value", metavar="JSON")
    send.set_defaults(run=send_message)

    result = sub.add_parser("result", help="wait for a workflow's result and print it")
    add_dsn(result)
    _single(result)
    result.add_argument("--timeout", type=float, help="seconds to wait (default: for ever)")
    result.set_defaults(run=workflow_result)

    cancel = sub.add_parser("cancel", help="cancel a workflow, or every one a filter selects")
    add_dsn(cancel)
    _bulk(cancel)
    cancel.set_defaults(run=cancel_workflows)

    fork = sub.add_parser("fork", help="a new workflow replaying one's records before a step")
    add_dsn(fork)
    _single(fork)
    fork.add_argument("--from-step", help="the first step to re-run (default: all of them)")
    fork.add_argument("--id", help="the fork's id (default: a fresh one)")
    fork.add_argument("--json", action="store_true", help="JSON for scripts")
    fork.set_defaults(run=fork_workflow)

    catalog = sub.add_parser(
        "catalog", help="list workflows started before the store kept a catalog"
    )
    add_dsn(catalog)
    catalog.add_argument("--json", action="store_true", help="JSON for scripts")
    catalog.set_defaults(run=catalog_workflows)


def _single(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tenant",
        default=DEFAULT_TENANT,
        help=f"the tenant whose workflow WORKFLOW is (default {DEFAULT_TENANT!r})",
    )
    parser.add_argument("workflow", metavar="WORKFLOW")


def add_bulk(parser: argparse.ArgumentParser) -> None:
    """``WORKFLOW`` or a filter, ``--yes`` and ``--json``: a one-or-many command."""
    _bulk(parser)


def _bulk(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workflow", metavar="WORKFLOW", nargs="?")
    add_filters(parser, tenant_help="the tenant (one workflow: default 'default')")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--json", action="store_true", help="JSON for scripts")


__all__ = ["BULK_PAGE", "add_bulk", "add_filters", "list_newest", "register"]
