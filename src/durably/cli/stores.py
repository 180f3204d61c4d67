"""The CLI's side of opening stores: ``--dsn`` (default ``$DURABLY_DSN``) and `opened`.

Reading DSNs and opening stores is `durably.open_stores`'s (`durably.stores`); a DSN is
never printed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import AsyncIterator

from pydantic import SecretStr

from durably.errors import DsnError
from durably.stores.dsn import DSN_ENV, parse
from durably.stores.opening import Stores, open_stores
from durably.stores.work import QueuePolicy


class UsageError(ValueError):
    """A command refused its arguments after parsing (exit code 2)."""


def dsn_from(value: SecretStr | str | None) -> SecretStr:
    """The DSN given on the command line, else ``$DURABLY_DSN``, held secret; `DsnError`
    if neither or if it is malformed."""
    if isinstance(value, str):
        value = SecretStr(value)
    if value is None or not value.get_secret_value():
        value = SecretStr(os.environ.get(DSN_ENV, ""))
    if not value.get_secret_value():
        raise DsnError(f"no store named: pass --dsn (or set {DSN_ENV})")
    parse(value)
    return value


def add_dsn(parser: argparse.ArgumentParser) -> None:
    """Add ``--dsn`` (default ``$DURABLY_DSN``)."""
    parser.add_argument(
        "--dsn",
        type=SecretStr,  # held secret from the start: ``args`` is in every frame's locals
        help=f"the store: sqlite:///file.db, postgresql://..., redis://... (default ${DSN_ENV}; "
        "a --dsn shows in the process list, the variable does not)",
    )


@contextlib.asynccontextmanager
async def opened(
    args: argparse.Namespace, *, policy: QueuePolicy | None = None, create: bool = False
) -> AsyncIterator[Stores]:
    """The stores ``args.dsn`` names, closed on exit. A SQLite file that does not exist is
    refused unless ``create`` (inspection never makes a database)."""
    stores = await open_stores(dsn_from(args.dsn), policy=policy, create=create)
    try:
        yield stores
    finally:
        await stores.close()


__all__ = ["DSN_ENV", "Stores", "UsageError", "add_dsn", "dsn_from", "opened"]
