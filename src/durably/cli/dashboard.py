"""``durably dashboard``: serve the web dashboard of a store.

It binds 127.0.0.1 unless told otherwise; binding anywhere else needs a token
(``--token`` or ``$DURABLY_DASHBOARD_TOKEN``), and is refused without one (exit 2).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from typing import Any

from durably.cli.render import printable
from durably.cli.stores import UsageError, add_dsn, dsn_from, opened

TOKEN_ENV = "DURABLY_DASHBOARD_TOKEN"
DEFAULT_PORT = 8321


def register(commands: Any) -> None:
    """Add the ``dashboard`` command."""
    parser = commands.add_parser(
        "dashboard", help="serve a web dashboard of queues, workflows and agent runs"
    )
    add_dsn(parser)
    parser.add_argument("--host", default="127.0.0.1", help="the address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"({DEFAULT_PORT})")
    parser.add_argument(
        "--token",
        help=f"every request must carry it (default ${TOKEN_ENV}); needed to bind an "
        "address other than loopback",
    )
    parser.add_argument(
        "--allow-actions",
        action="store_true",
        help="let its buttons act: requeue, send, cancel, resume, fork (off: read-only)",
    )
    parser.add_argument(
        "--queue",
        action="append",
        help="a work queue to show (repeatable; default: the default queue)",
    )
    parser.add_argument(
        "--refresh",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how often an open page refreshes its figures (2)",
    )
    parser.set_defaults(run=serve_dashboard)


def loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def serve_dashboard(args: argparse.Namespace) -> int:
    """Serve until interrupted; a usage error (exit 2) before anything is opened."""
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    if not loopback(args.host) and token is None:
        raise UsageError(
            f"--host {args.host}: binding other than loopback needs --token or ${TOKEN_ENV}"
        )
    if not 0 < args.port < 65536:
        raise UsageError("--port must be between 1 and 65535")
    try:
        import uvicorn

        from durably.dashboard import dashboard
    except ImportError:
        raise UsageError(
            "the dashboard needs its extra: pip install 'durably[dashboard]'"
        ) from None
    from durably.app import App

    async with opened(args):  # the store exists and answers (a missing file is refused)
        pass
    app = App(dsn_from(args.dsn), migrate=False)
    try:
        site = dashboard(
            app,
            token=token,
            allow_actions=args.allow_actions,
            queues=args.queue or ("default",),
            refresh_seconds=args.refresh,
        )
        served: Any = site
        if token is None:  # loopback only: refuse other Host names (DNS rebinding)
            from starlette.middleware.trustedhost import TrustedHostMiddleware

            names = ["127.0.0.1", "localhost", "[::1]", "::1", args.host]
            served = TrustedHostMiddleware(site, allowed_hosts=names)
        config = uvicorn.Config(
            served, host=args.host, port=args.port, log_level="warning", access_log=False
        )
        where = f"http://{args.host}:{args.port}/"
        mode = "actions on" if args.allow_actions else "read-only"
        print(f"durably dashboard on {printable(where)} ({mode})", file=sys.stderr, flush=True)
        await uvicorn.Server(config).serve()
    finally:
        await app.close()
    return 0


__all__ = ["DEFAULT_PORT", "TOKEN_ENV", "loopback", "register", "serve_dashboard"]
