"""Named SQL statements, read once at import from the ``.sql`` files of the ``sql/`` folder.

A file holds blocks introduced by a ``-- name: <name>`` line; the block's text up to the
next such line is the statement. Python refers to statements only by name.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from importlib.resources import files
from types import MappingProxyType

_NAME = re.compile(r"^--\s*name:\s*(\S+)\s*$", re.MULTILINE)


def load_statements(filename: str) -> Mapping[str, str]:
    """The named statements of ``filename`` (a file of this package)."""
    text = (files("durably.sqlite") / "sql" / filename).read_text(encoding="utf-8")
    parts = _NAME.split(text)
    statements: dict[str, str] = {}
    # parts = [preamble, name1, body1, name2, body2, ...]
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in statements:
            raise RuntimeError(f"{filename}: statement {name!r} defined twice")
        statements[name] = body.strip()
    return MappingProxyType(statements)


def split_script(text: str) -> list[str]:
    """Split a schema script into complete statements (comments and blanks dropped)."""
    statements: list[str] = []
    pending = ""
    for line in text.splitlines(keepends=True):
        if not pending and (not line.strip() or line.lstrip().startswith("--")):
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip():
        raise RuntimeError(f"incomplete statement at the end of the schema: {pending!r}")
    return statements


def load_script(filename: str) -> list[str]:
    """The statements of the script ``filename`` (a file of this package), in order."""
    return split_script((files("durably.sqlite") / "sql" / filename).read_text(encoding="utf-8"))


__all__ = ["load_script", "load_statements", "split_script"]
