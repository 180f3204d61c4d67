"""Named SQL statements read from the ``.sql`` files beside the modules that run them.

A file holds statements introduced by ``-- name: <name>`` lines. Table names appear as
``{field}`` placeholders (see `StateTables`), filled in once per store; values are always
bound parameters (``$1``...), never interpolated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def load(filename: str) -> dict[str, str]:
    """Every named statement of ``filename`` (in this package), unrendered."""
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    parts = _NAME.split(text)
    statements: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        statements[name] = body.strip().rstrip(";").strip()
    return statements


def render(template: str, names: Mapping[str, str]) -> str:
    """``template`` with every ``{field}`` replaced by its (already quoted) name."""
    return _PLACEHOLDER.sub(lambda match: names[match.group(1)], template)


def render_all(templates: Mapping[str, str], names: Mapping[str, str]) -> dict[str, str]:
    """Every template rendered with ``names``."""
    return {key: render(text, names) for key, text in templates.items()}
