"""Named SQL statements read from the ``.sql`` files of the ``sql/`` folder in this package.

A file holds statements introduced by ``-- name: <name>`` lines. Table names appear as
``{field}`` placeholders (see `StateTables`), filled in once per store; values are always
bound parameters (``$1``...), never interpolated. A statement's comments are for the
reader of the file: whole-line comments are left out of what is sent (the driver encodes
and hashes the text on every call, and the claim's comments were a third of it), unless
the text is published, as the schema is.

A statement whose name starts with ``_`` is a fragment: not a statement of its own, but
text that the file's statements (and fragments) take in where they write ``{_name}`` (two
statements that must keep the same writes say them once).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_FRAGMENT = re.compile(r"\{(_[a-z_]+)\}")


def load(
    filename: str, *, keep_comments: bool = False, fragments_from: tuple[str, ...] = ()
) -> dict[str, str]:
    """Every named statement of ``filename`` (in this package), unrendered, without its
    whole-line comments unless ``keep_comments``; its fragments may also be those of the
    files ``fragments_from`` (a write that two files' statements must keep alike)."""
    statements = _named(filename, keep_comments)
    fragments: dict[str, str] = {}
    for other in fragments_from:
        fragments.update(
            (name, body) for name, body in _named(other, keep_comments).items() if name[0] == "_"
        )
    fragments.update((name, statements.pop(name)) for name in list(statements) if name[0] == "_")
    return {name: _expand(body, fragments) for name, body in statements.items()}


def _named(filename: str, keep_comments: bool) -> dict[str, str]:
    """Every named statement and fragment of ``filename``, as written."""
    text = resources.files(__package__).joinpath("sql", filename).read_text(encoding="utf-8")
    parts = _NAME.split(text)
    statements: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if not keep_comments:
            lines = body.splitlines()
            body = "\n".join(line for line in lines if not line.lstrip().startswith("--"))
        statements[name] = body.strip().rstrip(";").strip()
    return statements


def _expand(body: str, fragments: Mapping[str, str]) -> str:
    """``body`` with its fragments taken in, and theirs in turn."""
    while _FRAGMENT.search(body):
        body = _FRAGMENT.sub(lambda match: fragments[match.group(1)], body)
    return body


def render(template: str, names: Mapping[str, str]) -> str:
    """``template`` with every ``{field}`` replaced by its (already quoted) name."""
    return _PLACEHOLDER.sub(lambda match: names[match.group(1)], template)


def render_all(templates: Mapping[str, str], names: Mapping[str, str]) -> dict[str, str]:
    """Every template rendered with ``names``."""
    return {key: render(text, names) for key, text in templates.items()}
