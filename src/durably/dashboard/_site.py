"""The dashboard's routes: pages (each also served as the fragment the page's script
polls), and the actions, POSTs that are off unless allowed."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from durably.app import App, Topic
from durably.dashboard import _reads as reads
from durably.dashboard import _security as security
from durably.errors import (
    DurablyError,
    InvalidInputError,
    StoreUnavailableError,
    WorkflowNotFoundError,
)
from durably.stores.status import WorkflowStatus
from durably.stores.work import requeued
from durably.validation import identifier

LIVE_HEADER = "x-durably-live"
"""The header of the page script's polls: the answer is the page's live part only."""

_ENV = Environment(
    loader=PackageLoader("durably.dashboard", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters["dollars"] = lambda micros: f"${micros / 1_000_000:.4f}"
_ENV.filters["when"] = reads.when
_ENV.filters["shown"] = reads.shown
_ENV.filters["ago"] = lambda seconds: f"{seconds:,.1f} s"

Handler = Callable[[Request], Awaitable[Response]]


class Site:
    """One dashboard over one App."""

    def __init__(
        self,
        app: App,
        *,
        token: str | None,
        allow_actions: bool,
        queues: tuple[str, ...],
        refresh_seconds: float,
    ) -> None:
        self.app = app
        self.token = token
        self.allow_actions = allow_actions
        self.queues = queues
        self.refresh_ms = int(refresh_seconds * 1000)
        self.run_tenants = reads.RunTenants()

    def asgi(self) -> Starlette:
        """The Starlette application serving this dashboard."""
        static = StaticFiles(directory=Path(__file__).parent / "static")
        pages: list[tuple[str, Handler]] = [
            ("/", self.overview),
            ("/queue", self.queue),
            ("/workflows", self.workflows),
            ("/workflow", self.workflow),
            ("/runs", self.runs),
        ]
        actions: list[tuple[str, Handler]] = [
            ("/actions/requeue", self.requeue),
            ("/actions/purge", self.purge),
            ("/actions/cancel", self.cancel),
            ("/actions/resume", self.resume),
            ("/actions/fork", self.fork),
            ("/actions/send", self.send),
        ]
        routes: list[Route | Mount] = [
            Route(path, self._guarded(handler), methods=["GET"]) for path, handler in pages
        ]
        routes += [
            Route(path, self._guarded(self._action(handler)), methods=["POST"])
            for path, handler in actions
        ]
        routes.append(Mount("/static", app=static, name="static"))
        site = Starlette(routes=routes)
        return site

    # -- plumbing

    def _guarded(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            refused = security.admitted(request, self.token)
            if refused is not None:
                return refused
            try:
                return await handler(request)
            except WorkflowNotFoundError as exc:
                return self._problem(request, 404, str(exc))
            except InvalidInputError as exc:
                return self._problem(request, 400, str(exc))
            except ValidationError as exc:  # a model refused an argument (a bad tenant)
                reasons = "; ".join(str(error["msg"]) for error in exc.errors())
                return self._problem(request, 400, reasons)
            except StoreUnavailableError:
                return self._problem(request, 503, "the store cannot be reached")
            except DurablyError as exc:
                return self._problem(request, 500, f"{type(exc).__name__}: {exc}")

        return guarded

    def _action(self, handler: Handler) -> Handler:
        async def action(request: Request) -> Response:
            if not self.allow_actions:
                return PlainTextResponse(
                    "actions are off: start the dashboard with --allow-actions", status_code=403
                )
            form = await _form(request)
            request.state.form = form
            if security.forged(request, form.get(security.CSRF_FIELD)):
                return PlainTextResponse("refused: the form's CSRF check failed", status_code=403)
            return await handler(request)

        return action

    def _problem(self, request: Request, status: int, message: str) -> Response:
        return self._page(request, "problem.html", {"message": message}, status=status)

    def _page(
        self, request: Request, name: str, values: dict[str, Any], *, status: int = 200
    ) -> Response:
        csrf, fresh = security.csrf_of(request)
        template = _ENV.get_template(name)
        context = {
            **values,
            "csrf": csrf,
            "csrf_field": security.CSRF_FIELD,
            "actions": self.allow_actions,
            "queues": self.queues,
            "refresh_ms": self.refresh_ms,
            "root": request.scope.get("root_path", ""),
            "notice": request.query_params.get("notice"),
        }
        if request.headers.get(LIVE_HEADER) == "1":
            live = template.blocks["live"](template.new_context(context))
            body = "".join(live)
        else:
            body = template.render(context)
        answer = HTMLResponse(body, status_code=status)
        answer.headers["cache-control"] = "no-store"
        answer.headers["content-security-policy"] = (
            "default-src 'self'; script-src 'self'; style-src 'self'; "
            "frame-ancestors 'none'; form-action 'self'"
        )
        answer.headers["x-content-type-options"] = "nosniff"
        answer.headers["referrer-policy"] = "same-origin"
        if fresh:
            security.keep_csrf(answer, csrf)
        return answer

    def _back(self, request: Request, path: str, notice: str, **query: str) -> Response:
        root = request.scope.get("root_path", "")
        target = f"{root}{path}?{urlencode({**query, 'notice': notice})}"
        return RedirectResponse(target, status_code=303)

    # -- pages

    async def overview(self, request: Request) -> Response:
        """Queues, workflows by status and kind, agent runs and cost by tenant."""
        found = await reads.overview(self.app, self.queues, self.run_tenants)
        return self._page(request, "overview.html", {"page": "overview", "o": found})

    async def queue(self, request: Request) -> Response:
        """One queue: items by state, its oldest dead letters with their errors."""
        name = identifier(request.query_params.get("name", self.queues[0]), "queue")
        tenant = _optional(request, "tenant")
        (row,) = await reads.queue_rows(self.app, (name,))
        dead = await reads.dead_letters(self.app, name, tenant)
        values = {"page": "queue", "row": row, "dead": dead, "tenant": tenant, "name": name}
        return self._page(request, "queue.html", values)

    async def workflows(self, request: Request) -> Response:
        """Workflows newest first, filtered by kind, status and tenant, a page at a time."""
        kind = _optional(request, "kind")
        status = _optional(request, "status")
        tenant = _optional(request, "tenant")
        after = _optional(request, "after")
        listed = await self.app.list_workflows(
            kind=kind, status=status, tenant=tenant, after=after, limit=reads.PAGE
        )
        counts = await self.app.workflow_counts(tenant=tenant)
        values = {
            "page": "workflows",
            "listed": listed,
            "kinds": sorted(counts.by_kind),
            "statuses": [s.value for s in WorkflowStatus],
            "kind": kind,
            "status": status,
            "tenant": tenant,
            "filters": {
                k: v
                for k, v in (("kind", kind), ("status", status), ("tenant", tenant))
                if v is not None
            },
        }
        return self._page(request, "workflows.html", values)

    async def workflow(self, request: Request) -> Response:
        """One workflow: its steps as a timeline, inbox, errors, children and buttons."""
        workflow = _required(request, "id")
        tenant = request.query_params.get("tenant") or self.app.tenant
        found = await reads.workflow_page(self.app, workflow, tenant)
        values = {"page": "workflows", "w": found, "id": workflow, "tenant": tenant}
        return self._page(request, "workflow.html", values)

    async def runs(self, request: Request) -> Response:
        """Agent runs of a tenant with tokens and cost, and every tenant's totals."""
        tenant = _optional(request, "tenant")
        cursor = _optional(request, "cursor")
        tenants, records, next_cursor, totals, more = await reads.runs_page(
            self.app, tenant, cursor, self.run_tenants
        )
        values = {
            "page": "runs",
            "tenants": tenants,
            "records": records,
            "cursor": next_cursor,
            "totals": totals,
            "more": more,
            "tenant": tenant if tenant is not None else (tenants[0] if tenants else None),
        }
        return self._page(request, "runs.html", values)

    # -- actions

    async def requeue(self, request: Request) -> Response:
        """Queue a dead letter again (attempts reset, failures kept)."""
        form: dict[str, str] = request.state.form
        queue = identifier(form.get("queue", ""), "queue")
        tenant = identifier(form.get("tenant", ""), "tenant")
        item_id = identifier(form.get("item", ""), "item")
        stores = await self.app.stores()
        dead = await stores.queue.dead_letters(tenant=tenant, queue=queue, limit=1000)
        match = [item for item in dead if item.id == item_id]
        if not match:
            return self._back(request, "/queue", f"{item_id} is not dead-lettered", name=queue)
        queued = await stores.queue.enqueue(requeued(match[0]))
        notice = (
            f"requeued {item_id}"
            if queued.id == item_id
            else f"{item_id} not requeued: live item {queued.id} holds its dedupe key"
        )
        return self._back(request, "/queue", notice, name=queue)

    async def purge(self, request: Request) -> Response:
        """Delete one dead letter (``item`` and ``tenant``) or every dead letter of the
        queue (of ``tenant`` only, when given)."""
        form: dict[str, str] = request.state.form
        queue = identifier(form.get("queue", ""), "queue")
        tenant = form.get("tenant") or None
        item_id = form.get("item") or None
        stores = await self.app.stores()
        purged = await stores.queue.purge_dead_letters(queue=queue, tenant=tenant, item_id=item_id)
        if item_id is not None:
            notice = f"purged {item_id}" if purged else f"{item_id} is not dead-lettered"
        else:
            notice = f"purged {purged:,} dead letter(s)"
        return self._back(request, "/queue", notice, name=queue)

    async def _handle(self, request: Request) -> tuple[Any, str, str, dict[str, str]]:
        form: dict[str, str] = request.state.form
        workflow = form.get("id", "")
        tenant = form.get("tenant", "") or self.app.tenant
        handle = await self.app.get_handle(workflow, tenant=tenant)
        return handle, workflow, tenant, form

    async def cancel(self, request: Request) -> Response:
        """Cancel a workflow (its body sees it at its next pass)."""
        handle, workflow, tenant, _ = await self._handle(request)
        done = await handle.cancel()
        notice = "cancel asked" if done else "not cancelled: it has finished"
        return self._back(request, "/workflow", notice, id=workflow, tenant=tenant)

    async def resume(self, request: Request) -> Response:
        """Resume a parked, failed or cancelled workflow on the code deployed now."""
        handle, workflow, tenant, _ = await self._handle(request)
        done = await handle.resume()
        notice = "resumed" if done else "not resumed: only parked, failed or cancelled ones are"
        return self._back(request, "/workflow", notice, id=workflow, tenant=tenant)

    async def fork(self, request: Request) -> Response:
        """Start a fork replaying the records before a step."""
        handle, workflow, tenant, form = await self._handle(request)
        fresh = await handle.fork(form.get("step") or None)
        return self._back(
            request, "/workflow", f"forked from {workflow}", id=fresh.id, tenant=tenant
        )

    async def send(self, request: Request) -> Response:
        """Send a JSON value on a topic to a workflow."""
        handle, workflow, tenant, form = await self._handle(request)
        try:
            value = json.loads(form.get("value", ""))
        except ValueError:
            raise InvalidInputError("value: not JSON") from None
        await handle.send(Topic(form.get("topic", ""), Any), value)
        return self._back(request, "/workflow", "sent", id=workflow, tenant=tenant)


FORM_BYTES = 64 * 1024
"""The largest action form read (every form of the pages is far smaller)."""


async def _form(request: Request) -> dict[str, str]:
    """An action's URL-encoded form, each field's last value; a body over `FORM_BYTES` or
    of another type is refused."""
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind != "application/x-www-form-urlencoded":
        raise InvalidInputError("an action is a URL-encoded form")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_BYTES:
            raise InvalidInputError(f"the form is over {FORM_BYTES:,} bytes")
    try:
        pairs = parse_qsl(body.decode(), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise InvalidInputError("the form is not UTF-8") from None
    return dict(pairs)


def _optional(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    return value if value else None


def _required(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise InvalidInputError(f"{name}: missing")
    return value


__all__ = ["LIVE_HEADER", "Site"]
