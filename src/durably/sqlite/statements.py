"""Named SQL statements, read once at import from the ``.sql`` files of the ``sql/`` folder.

A file holds blocks introduced by a ``-- name: <name>`` line; the block's text up to the
next such line is the statement. Python refers to statements only by name.

A schema script is run whole; the named blocks after it, each a name starting with ``_``,
are fragments the script takes in where it writes ``{_name}`` (indented as the
placeholder is), so two triggers that must make the same write say it once.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from importlib.resources import files
from types import MappingProxyType

_NAME = re.compile(r"^--\s*name:\s*(\S+)\s*$", re.MULTILINE)
_FRAGMENT = re.compile(r"^([ \t]*)\{(_\w+)\}", re.MULTILINE)


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
    """The statements of the script ``filename`` (a file of this package), in order, its
    fragments taken in."""
    text = (files("durably.sqlite") / "sql" / filename).read_text(encoding="utf-8")
    return split_script(rendered_script(text, filename))


def rendered_script(text: str, filename: str = "<script>") -> str:
    """``text`` up to its first named block, with every ``{_name}`` (first on its line)
    replaced by fragment ``_name``, each line after the first indented as the placeholder
    is. `RuntimeError` for a block not named as a fragment or a fragment never defined."""
    parts = _NAME.split(text)
    fragments: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if not name.startswith("_") or name in fragments:
            raise RuntimeError(f"{filename}: {name!r} is not one fragment of a script")
        fragments[name] = body.strip()

    def taken_in(match: re.Match[str]) -> str:
        indent, name = match.group(1), match.group(2)
        if name not in fragments:
            raise RuntimeError(f"{filename}: no fragment {name!r}")
        return indent + fragments[name].replace("\n", "\n" + indent)

    return _FRAGMENT.sub(taken_in, parts[0])


__all__ = ["load_script", "load_statements", "rendered_script", "split_script"]
