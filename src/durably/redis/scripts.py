"""Lua scripts kept in ``.lua`` files beside this module, loaded once, called by SHA.

A script missing from the server's cache (after ``SCRIPT FLUSH``, a restart or a
failover to a replica that never saw it) is sent whole once with EVAL, which caches it
again, so callers never see ``NOSCRIPT``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from redis.exceptions import NoScriptError

_HERE = Path(__file__).parent


class Script:
    """One Lua script and its SHA1."""

    def __init__(self, source: str, name: str = "<inline>") -> None:
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    @classmethod
    def load(cls, filename: str, prelude: str | None = None) -> Script:
        """The script in ``filename`` beside this module, after the ``prelude`` file's
        shared functions when given."""
        source = (_HERE / filename).read_text(encoding="utf-8")
        if prelude is not None:
            source = (_HERE / prelude).read_text(encoding="utf-8") + "\n" + source
        return cls(source, filename)

    async def __call__(self, client: Any, keys: list[str], args: list[Any]) -> Any:
        """Run the script with ``keys`` (routing uses the first) and ``args``."""
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await client.eval(self.source, len(keys), *keys, *args)


def scripts(*names: str, prelude: str | None = None) -> dict[str, Script]:
    """Load the named ``.lua`` files (without the suffix) at import time."""
    return {name: Script.load(f"{name}.lua", prelude) for name in names}


__all__ = ["Script", "scripts"]
