"""The ``durably`` command line: ``durably demo``, ``worker``, ``runs``, ``queue``,
``workflows``, ``schedules``, ``sweep``, ``schema``, ``migrate``, ``doctor`` and
``dashboard``.

Exit codes: 0 success, 1 a store could not be reached or an operation failed, 2 bad
arguments (including a malformed DSN). A user error never prints a traceback, and a DSN is
never printed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from pydantic import ValidationError

from durably.cli import (
    dashboard,
    demo,
    doctor,
    queue,
    runs,
    schedules,
    schema,
    sweep,
    tasks,
    worker,
    workflows,
)
from durably.cli.render import printable
from durably.cli.stores import UsageError
from durably.errors import (
    ConfigurationError,
    DsnError,
    DurablyError,
    InvalidInputError,
    StoreUnavailableError,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

Command = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (every command group registers its own subcommands)."""
    parser = argparse.ArgumentParser(
        prog="durably",
        description="Durable agent runs, work queues and workflows: inspect and operate them.",
    )
    from durably import __version__

    parser.add_argument("--version", action="version", version=f"durably {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (
        demo,
        worker,
        runs,
        queue,
        tasks,
        workflows,
        schedules,
        sweep,
        schema,
        doctor,
        dashboard,
    ):
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (the console script exits with it)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    command: Command = args.run
    try:
        return asyncio.run(command(args))
    except (UsageError, InvalidInputError, DsnError) as exc:
        parser.exit(EXIT_USAGE, f"durably: error: {exc}\n")
    except ValidationError as exc:  # an argument a model refused (an empty id, say)
        reasons = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        parser.exit(EXIT_USAGE, f"durably: error: {reasons}\n")
    except (StoreUnavailableError, ConfigurationError) as exc:
        print(f"durably: {printable(str(exc))}", file=sys.stderr)
        return EXIT_FAILED
    except DurablyError as exc:
        print(f"durably: {type(exc).__name__}: {printable(str(exc))}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("durably: interrupted", file=sys.stderr)
        return 130


def console() -> None:
    """Entry point that exits the process with `main`'s code."""
    sys.exit(main())


__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "UsageError", "build_parser", "console", "main"]
