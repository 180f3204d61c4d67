"""``durably schema`` (print the DDL a backing uses) and ``durably migrate`` (apply it)."""

from __future__ import annotations

import argparse
import importlib
from importlib.resources import files
from typing import Any

from durably.cli.render import emit_json
from durably.cli.stores import UsageError, add_dsn, dsn_from
from durably.errors import ConfigurationError
from durably.stores.dsn import describe, parse
from durably.stores.opening import open_stores

# The schema files each SQL backing ships, in the order they are applied.
SCHEMA_FILES = {"sqlite": ("sql/schema.sql",), "postgresql": ("sql/schema.sql",)}
PACKAGES = {"sqlite": "durably.sqlite", "postgresql": "durably.postgres"}


def register(commands: Any) -> None:
    """Add ``schema`` and ``migrate``."""
    schema = commands.add_parser("schema", help="print the tables a backing uses (no I/O)")
    target = schema.add_mutually_exclusive_group()
    target.add_argument("--backing", choices=["sqlite", "postgresql", "redis", "memory"])
    add_dsn(target)
    schema.add_argument("--json", action="store_true", help="JSON for scripts")
    schema.set_defaults(run=show_schema)

    migrate = commands.add_parser(
        "migrate", help="create what is missing in the store (idempotent; safe for a fleet)"
    )
    add_dsn(migrate)
    migrate.add_argument("--json", action="store_true", help="JSON for scripts")
    migrate.set_defaults(run=run_migrate)


def schema_text(backing: str) -> str | None:
    """The DDL of ``backing``, or None when it keeps no schema (Redis, memory)."""
    package = PACKAGES.get(backing)
    if package is None:
        return None
    try:
        root = files(package)
    except ModuleNotFoundError:
        raise ConfigurationError(f"the {backing} backing is not available") from None
    parts = []
    for name in SCHEMA_FILES[backing]:
        resource = root / name
        if not resource.is_file():
            raise ConfigurationError(f"the {backing} backing ships no {name} in this build")
        parts.append(resource.read_text(encoding="utf-8"))
    return "\n".join(parts)


def schema_version(backing: str) -> int | None:
    """The schema version this build of ``backing`` writes, when it publishes one."""
    package = PACKAGES.get(backing)
    if package is None:
        return None
    for module_name in (package, f"{package}.connection", f"{package}.schema"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in ("SCHEMA_VERSION", "EXPECTED_SCHEMA"):
            value = getattr(module, name, None)
            if isinstance(value, int):
                return value
    return None


async def show_schema(args: argparse.Namespace) -> int:
    """Print the DDL for ``--backing`` or the backing ``--dsn`` names."""
    if args.backing:
        backing = args.backing
    elif args.dsn:
        backing = parse(args.dsn).backing
    else:
        raise UsageError("name a backing: --backing sqlite|postgresql|redis|memory, or --dsn")
    text = schema_text(backing)
    if args.json:
        emit_json({"backing": backing, "version": schema_version(backing), "ddl": text})
        return 0
    if text is None:
        print(f"-- the {backing} backing keeps no schema: nothing to migrate")
    else:
        print(text.rstrip())
    return 0


async def run_migrate(args: argparse.Namespace) -> int:
    """Bring the store's schema up to date (opening a store migrates it)."""
    dsn = dsn_from(args.dsn)
    backing = parse(dsn).backing
    stores = await open_stores(dsn)
    try:
        await stores.migrate()
    finally:
        await stores.close()
    version = schema_version(backing)
    if args.json:
        emit_json({"store": describe(dsn), "schema_version": version, "migrated": True})
    elif backing in ("redis", "memory"):
        print(f"{describe(dsn)}: no schema to migrate")
    else:
        suffix = f" (schema version {version})" if version is not None else ""
        print(f"{describe(dsn)}: schema up to date{suffix}")
    return 0
