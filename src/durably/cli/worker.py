"""``durably worker MODULE:ATTR``: serve handlers and workflows from your code.

``MODULE:ATTR`` names either a `durably.App`, served with ``app.serve()`` (``--workflow
KIND`` and ``--queue NAME``, each repeatable, serve only those; ``--dsn`` replaces the
App's own DSN)::

    $ durably worker myapp.flows:app --workflow triage

or a callable ``setup(worker, stores)`` (plain or
``async``) that registers on the `durably.engine.Worker` it is given, using the `Stores` opened
from the DSN::

    # myapp/jobs.py
    def setup(worker: Worker, stores: Stores) -> None:
        worker.handle(stores.queue, send_invoice, name="invoices", concurrency=5)
        worker.workflow("onboarding", onboard, stores.durable("onboarding"))

    $ durably worker myapp.jobs:setup --dsn sqlite:///app.db

``MODULE`` is imported as installed; only when it is not importable that way is the
current directory searched, after everything else on the path, so a file there never
shadows a module durably or your code imports (a ``psycopg.py`` left in the directory is
not run in psycopg's place). ``--app-dir DIR`` puts ``DIR`` first instead, for code that is
not installed. (``python -m durably`` puts the current directory first by Python's own
rule; the ``durably`` command and ``python -P -m durably`` do not.) The worker runs until
SIGTERM or SIGINT, then shuts down gracefully.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from durably.cli.stores import UsageError, add_dsn, dsn_from, opened
from durably.logging import FieldsFormatter, JsonFormatter
from durably.stores.dsn import describe
from durably.stores.opening import Stores


def register(commands: Any) -> None:
    """Add the ``worker`` command."""
    worker = commands.add_parser(
        "worker",
        help="serve the workflows of a durably.App (or what a setup callable registers)",
        description="Serve the workflows of the durably.App that MODULE:ATTR names (as "
        "app.serve() does), or the handlers and workflows that MODULE:ATTR, a callable "
        "setup(worker, stores), registers on a durably.engine.Worker.",
    )
    worker.add_argument(
        "target", metavar="MODULE:ATTR", help="a durably.App (myapp.flows:app) or setup callable"
    )
    add_dsn(worker)
    worker.add_argument(
        "--app-dir",
        metavar="DIR",
        help="import MODULE from DIR, searched first (default: the current directory, "
        "searched last and only when MODULE is not importable otherwise)",
    )
    worker.add_argument(
        "--workflow",
        action="append",
        metavar="KIND",
        help="with an App: serve only this workflow kind (repeatable)",
    )
    worker.add_argument(
        "--queue",
        action="append",
        metavar="NAME",
        help="with an App: serve only this task queue (repeatable)",
    )
    worker.add_argument("--name", help="worker name (default host:pid:random)")
    worker.add_argument("--poll-seconds", type=float, default=1.0, help="fallback poll period")
    worker.add_argument("--grace-seconds", type=float, default=30.0, help="shutdown grace")
    worker.add_argument(
        "--maintenance-seconds", type=float, default=5.0, help="period of reap / wake_due"
    )
    worker.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="DEBUG, INFO, WARNING or ERROR, in any case (default INFO)",
    )
    worker.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="text lines (default) or one JSON object a line (durably.logging.JsonFormatter)",
    )
    worker.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve metrics for Prometheus at http://HOST:PORT/metrics (needs the "
        "prometheus extra; 0 picks a free port, logged)",
    )
    worker.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address the metrics endpoint binds (default 127.0.0.1)",
    )
    worker.set_defaults(run=run_worker)


def load_target(target: str, app_dir: str | None = None) -> Callable[..., Any]:
    """The App or callable ``MODULE:ATTR`` names, imported from ``app_dir`` (searched
    first) or, when not importable otherwise, from the current directory (searched last);
    `UsageError` when it cannot be found."""
    found, _ = import_target(target, app_dir)
    from durably.app import App

    if isinstance(found, App):
        return found.serve
    if not callable(found):
        raise UsageError(
            f"{target!r} is neither a durably.App nor callable: it must be an App or "
            "setup(worker, stores)"
        )
    return found


def import_target(target: str, app_dir: str | None = None) -> tuple[object, ModuleType]:
    """The object ``MODULE:ATTR`` names and its module, imported from ``app_dir`` (searched
    first) or, when not importable otherwise, from the current directory (searched last);
    `UsageError` when it cannot be found."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"{target!r} is not MODULE:ATTR (e.g. myapp.jobs:setup)")
    _make_importable(module_name, app_dir)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import {module_name!r}: {exc}") from None
    found: object = module
    for part in attr.split("."):
        if not hasattr(found, part):
            raise UsageError(f"module {module_name!r} has no attribute {attr!r}")
        found = getattr(found, part)
    return found, module


def _make_importable(module_name: str, app_dir: str | None) -> None:
    """Put ``app_dir`` first on ``sys.path``; without one, append the current directory
    when ``module_name`` cannot be found on the path as it is. Appended, never prepended:
    a directory first on the path shadows every module imported after it."""
    if app_dir is not None:
        directory = os.path.abspath(app_dir)
        if not os.path.isdir(directory):
            raise UsageError(f"--app-dir {app_dir!r} is not a directory")
        if directory in sys.path:
            sys.path.remove(directory)
        sys.path.insert(0, directory)
        return
    top = module_name.partition(".")[0]
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    if not found and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())


async def run_worker(args: argparse.Namespace) -> int:
    """Open the stores, let the target register, and serve until stopped."""
    setup = load_target(args.target, args.app_dir)
    if args.dsn or not _is_app(setup):
        dsn_from(args.dsn)  # a missing or malformed DSN is refused before anything starts
    for name in ("poll_seconds", "grace_seconds", "maintenance_seconds"):
        if getattr(args, name) <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive")
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter()
        if args.log_format == "json"
        else FieldsFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    logging.basicConfig(level=getattr(logging, args.log_level), handlers=[handler])
    if args.metrics_port is not None:
        _serve_metrics(args.metrics_port, args.metrics_host)
    app = getattr(setup, "__self__", None)
    from durably.app import App

    if isinstance(app, App):
        return await _serve_app(app, args)
    if args.workflow or args.queue:
        raise UsageError("--workflow and --queue select what a durably.App serves")
    from durably.engine.worker import Worker

    async with opened(args, create=True) as stores:
        worker = Worker(
            name=args.name,
            poll_seconds=args.poll_seconds,
            grace_seconds=args.grace_seconds,
            maintenance_seconds=args.maintenance_seconds,
        )
        await _setup(setup, worker, stores)
        logging.getLogger("durably.cli").info(
            "worker %s serving %s from %s", worker.name, args.target, stores.location
        )
        await worker.run()
    return 0


def _is_app(target: object) -> bool:
    from durably.app import App

    return isinstance(getattr(target, "__self__", None), App)


async def _serve_app(app: Any, args: argparse.Namespace) -> int:
    if args.dsn:
        app.dsn = dsn_from(args.dsn)
    logging.getLogger("durably.cli").info("serving %s from %s", args.target, describe(app.dsn))
    try:
        await app.serve(
            args.workflow,
            args.queue,
            grace=args.grace_seconds,
            name=args.name,
            poll=args.poll_seconds,
            maintenance=args.maintenance_seconds,
        )
    finally:
        await app.close()
    return 0


def _serve_metrics(port: int, host: str) -> None:
    from durably.errors import DurablyError
    from durably.otel import serve_prometheus

    if not 0 <= port <= 65535:
        raise UsageError(f"--metrics-port must be from 0 to 65535, got {port}")
    try:
        server = serve_prometheus(port, host)
    except (DurablyError, OSError) as exc:
        raise UsageError(f"cannot serve metrics on {host}:{port}: {exc}") from None
    bound_host, bound_port = server.server_address[:2]
    logging.getLogger("durably.cli").info(
        "metrics for Prometheus at http://%s:%d/metrics", bound_host, bound_port
    )


async def _setup(setup: Callable[..., Any], worker: object, stores: Stores) -> None:
    result = setup(worker, stores)
    if inspect.isawaitable(result):
        await result
